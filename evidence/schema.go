package evidence

// SchemaVersion is the evidence store schema version this build reads and
// writes. A file recording an older version is refused with
// *SchemaVersionError until `assay store migrate` (Migrate) upgrades it; a
// file recording a newer version is refused outright.
//
// Version 3 adds the store-wide admissions chain and the store-written
// check_recorded and run_finalized events (terminal hash version 3); version 4 allows the check
// statuses simulated and not_enforced, and per-call usage from the gateway source; version 5
// chains the writer sessions and the finalizations store-wide, seals interrupted runs, binds the
// records a run rests on outside the store (run_bindings), and finalizes with terminal hash
// version 5, which covers every column of the run's rows; version 6 records the catalog case and the
// CLI invocation in the envelope (envelopes.case_name, envelopes.invocation_id); version 7 records
// the team task and the repeat index in the envelope (envelopes.task_name, envelopes.repeat_index).
const SchemaVersion = 7

// appMarker is the value of meta.app that identifies a DuckDB file as an assay
// evidence store.
const appMarker = "assay-evidence"

// schemaDDL creates every table of the current schema version. It runs in one
// transaction when a writer opens a DuckDB file that holds no tables.
// docs/evidence-schema.md documents each table and column; a v1 file gets the
// same tables through migrations (migrate.go).
func schemaDDL() []string {
	return []string{
		`CREATE TABLE meta (
		key   VARCHAR PRIMARY KEY,
		value VARCHAR NOT NULL
	)`,
		writersDDL("writers"),
		admissionsDDL,
		finalizationsDDL,
		runBindingsDDL,
		`CREATE TABLE runs (
		run_id           VARCHAR PRIMARY KEY,
		ordinal          BIGINT NOT NULL UNIQUE,
		corrects_run_id  VARCHAR,
		status           VARCHAR NOT NULL CHECK (status IN ('open', 'finalized', 'interrupted')),
		envelope_digest  VARCHAR NOT NULL,
		created_at       TIMESTAMP NOT NULL,
		finalized_at     TIMESTAMP,
		event_count      BIGINT,
		terminal_hash    VARCHAR,
		writer_id        BIGINT,
		terminal_version INTEGER
	)`,
		runStatusChangesDDL,
		`CREATE TABLE envelopes (
		run_id                  VARCHAR PRIMARY KEY,
		tenant                  VARCHAR NOT NULL,
		manifest_digest         VARCHAR NOT NULL,
		mode                    VARCHAR NOT NULL CHECK (mode IN ('live', 'dry_run', 'observe')),
		policy_digest           VARCHAR NOT NULL,
		dataset_digest          VARCHAR NOT NULL,
		environment_fingerprint VARCHAR NOT NULL,
		entropy_sources         VARCHAR[] NOT NULL,
		replay_tolerance        VARCHAR NOT NULL,
		provider                VARCHAR NOT NULL,
		base_url                VARCHAR NOT NULL,
		model                   VARCHAR NOT NULL,
		formation               VARCHAR NOT NULL,
		task_profile            VARCHAR NOT NULL,
		language                VARCHAR NOT NULL,
		case_name               VARCHAR,
		invocation_id           VARCHAR,
		task_name               VARCHAR,
		repeat_index            INTEGER
	)`,
		`CREATE TABLE events (
		run_id     VARCHAR NOT NULL,
		seq        BIGINT NOT NULL,
		parent     BIGINT NOT NULL,
		type       VARCHAR NOT NULL,
		member_id  VARCHAR NOT NULL,
		session_id VARCHAR NOT NULL,
		time       TIMESTAMP NOT NULL,
		payload    JSON NOT NULL,
		prev_hash  VARCHAR NOT NULL,
		hash       VARCHAR NOT NULL,
		PRIMARY KEY (run_id, seq)
	)`,
		`CREATE TABLE artifacts (
		digest     VARCHAR PRIMARY KEY,
		size       BIGINT NOT NULL,
		storage    VARCHAR NOT NULL CHECK (storage IN ('inline', 'file')),
		data       BLOB,
		created_at TIMESTAMP NOT NULL
	)`,
		`CREATE TABLE run_artifacts (
		run_id     VARCHAR NOT NULL,
		name       VARCHAR NOT NULL,
		digest     VARCHAR NOT NULL,
		media_type VARCHAR NOT NULL,
		linked_at  TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, name)
	)`,
		usageDDL("usage"),
		usageCallsDDL("usage_calls"),
		`CREATE TABLE usage_verdicts (
		run_id      VARCHAR NOT NULL,
		ordinal     BIGINT NOT NULL,
		member_id   VARCHAR NOT NULL,
		session_id  VARCHAR NOT NULL,
		verdict     VARCHAR NOT NULL CHECK (verdict IN ('conserved', 'mismatch', 'unknown')),
		deltas      JSON NOT NULL,
		detail      VARCHAR NOT NULL,
		recorded_at TIMESTAMP NOT NULL,
		duplicated  BOOLEAN NOT NULL DEFAULT false,
		multiple    BIGINT,
		sources     JSON,
		PRIMARY KEY (run_id, ordinal)
	)`,
		checksDDL("checks"),
		`CREATE TABLE verdicts (
		run_id            VARCHAR PRIMARY KEY,
		verdict           VARCHAR NOT NULL CHECK (verdict IN ('accepted', 'rejected', 'non_certifiable')),
		requested_verdict VARCHAR NOT NULL,
		reasons           VARCHAR[] NOT NULL,
		decided_at        TIMESTAMP NOT NULL
	)`,
		`CREATE TABLE checkpoints (
		run_id     VARCHAR NOT NULL,
		seq        BIGINT NOT NULL,
		state      JSON NOT NULL,
		hash       VARCHAR NOT NULL,
		created_at TIMESTAMP NOT NULL,
		event_hash VARCHAR,
		PRIMARY KEY (run_id, seq)
	)`,
	}
}

// writersDDL records every writer session: who held the lock, from when to
// when (v2). A run opened by a writer that never closed was interrupted. From
// v5 the sessions form a hash chain (WriterHash, WriterCloseHash): each
// session's opening record pins the admissions and finalizations chains as it
// found them, its closing record as it left them.
func writersDDL(name string) string {
	return `CREATE TABLE ` + name + ` (
		writer_id                   BIGINT PRIMARY KEY,
		pid                         BIGINT NOT NULL,
		command                     VARCHAR NOT NULL,
		host                        VARCHAR NOT NULL,
		opened_at                   TIMESTAMP NOT NULL,
		closed_at                   TIMESTAMP,
		backfilled                  BOOLEAN NOT NULL,
		admissions_at_open          BIGINT,
		admissions_head_at_open     VARCHAR,
		finalizations_at_open       BIGINT,
		finalizations_head_at_open  VARCHAR,
		prev_hash                   VARCHAR NOT NULL,
		hash                        VARCHAR NOT NULL,
		admissions_at_close         BIGINT,
		admissions_head_at_close    VARCHAR,
		finalizations_at_close      BIGINT,
		finalizations_head_at_close VARCHAR,
		close_hash                  VARCHAR
	)`
}

// writersDDLv2 is the writers table of schemas 2 to 4.
const writersDDLv2 = `CREATE TABLE writers (
		writer_id BIGINT PRIMARY KEY,
		pid       BIGINT NOT NULL,
		command   VARCHAR NOT NULL,
		host      VARCHAR NOT NULL,
		opened_at TIMESTAMP NOT NULL,
		closed_at TIMESTAMP
	)`

// finalizationsDDL (v5) is the store-wide hash chain over finalizations:
// Finalize, and the sealing of an interrupted run, append one row in the
// transaction that fixes the run's terminal hash (FinalizationHash). Turning a
// finalized run back into an open or interrupted one then leaves a row that
// contradicts it, or a broken chain.
const finalizationsDDL = `CREATE TABLE finalizations (
		ordinal       BIGINT PRIMARY KEY,
		run_id        VARCHAR NOT NULL UNIQUE,
		status        VARCHAR NOT NULL CHECK (status IN ('finalized', 'interrupted')),
		terminal_hash VARCHAR NOT NULL,
		writer_id     BIGINT,
		finalized_at  TIMESTAMP NOT NULL,
		backfilled    BOOLEAN NOT NULL,
		prev_hash     VARCHAR NOT NULL,
		hash          VARCHAR NOT NULL
	)`

// runBindingsDDL (v5) binds a run to records kept outside the store (the
// gateway's usage database, the effect service's receipts): how to find them,
// how many there were and the SHA-256 of their canonical form. Terminal hash
// version 5 covers the rows; Verify recomputes them with a BindingChecker.
const runBindingsDDL = `CREATE TABLE run_bindings (
		run_id      VARCHAR NOT NULL,
		source      VARCHAR NOT NULL,
		locator     JSON NOT NULL,
		records     BIGINT NOT NULL,
		sha256      VARCHAR NOT NULL,
		recorded_at TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, source)
	)`

// admissionsDDL (v3) is the store-wide hash chain over run admissions: OpenRun
// appends one row per run in the transaction that creates it, chained to the
// previous admission (AdmissionHash), so deleting a run breaks the chain
// unless every later admission is rewritten.
const admissionsDDL = `CREATE TABLE admissions (
		ordinal         BIGINT PRIMARY KEY,
		run_id          VARCHAR NOT NULL UNIQUE,
		envelope_digest VARCHAR NOT NULL,
		corrects_run_id VARCHAR NOT NULL,
		admitted_at     TIMESTAMP NOT NULL,
		backfilled      BOOLEAN NOT NULL,
		prev_hash       VARCHAR NOT NULL,
		hash            VARCHAR NOT NULL
	)`

// runStatusChangesDDL (v2) records status changes that are not events, such as
// open -> interrupted on crash recovery; they never touch a run's hash chain.
const runStatusChangesDDL = `CREATE TABLE run_status_changes (
		run_id      VARCHAR NOT NULL,
		ordinal     BIGINT NOT NULL,
		from_status VARCHAR NOT NULL,
		to_status   VARCHAR NOT NULL,
		reason      VARCHAR NOT NULL,
		writer_id   BIGINT NOT NULL,
		changed_at  TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, ordinal)
	)`

// usageDDL creates the session-level usage table under name (v2 adds the
// suspect_zero state).
func usageDDL(name string) string {
	return `CREATE TABLE ` + name + ` (
		run_id            VARCHAR NOT NULL,
		ordinal           BIGINT NOT NULL,
		member_id         VARCHAR NOT NULL,
		session_id        VARCHAR NOT NULL,
		source            VARCHAR NOT NULL CHECK (source IN ('wire', 'store', 'gateway')),
		state             VARCHAR NOT NULL CHECK (state IN ('reported', 'partial', 'unknown', 'suspect_zero')),
		requests          BIGINT NOT NULL,
		prompt_tokens     BIGINT,
		completion_tokens BIGINT,
		total_tokens      BIGINT,
		cached_tokens     BIGINT,
		reasoning_tokens  BIGINT,
		recorded_at       TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, ordinal)
	)`
}

// checksDDL creates the checks table under name; v4 admits the statuses simulated and
// not_enforced.
func checksDDL(name string) string {
	return `CREATE TABLE ` + name + ` (
		run_id      VARCHAR NOT NULL,
		name        VARCHAR NOT NULL,
		required    BOOLEAN NOT NULL,
		status      VARCHAR NOT NULL CHECK (status IN ('passed', 'failed', 'unknown', 'simulated', 'not_enforced')),
		detail      VARCHAR NOT NULL,
		evidence    JSON,
		recorded_at TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, name)
	)`
}

// usageCallsDDL (v2) creates the per-call usage observations table under name,
// keyed by assay's own call ids. v4 admits the source gateway (the gateway's
// per-request records).
func usageCallsDDL(name string) string {
	return `CREATE TABLE ` + name + ` (
		run_id            VARCHAR NOT NULL,
		source            VARCHAR NOT NULL CHECK (source IN ('wire', 'store', 'gateway')),
		call_id           VARCHAR NOT NULL,
		observation       BIGINT NOT NULL,
		session_id        VARCHAR NOT NULL,
		member_id         VARCHAR NOT NULL,
		request_sha256    VARCHAR NOT NULL,
		messages          BIGINT,
		state             VARCHAR NOT NULL CHECK (state IN ('reported', 'partial', 'unknown', 'suspect_zero')),
		prompt_tokens     BIGINT,
		completion_tokens BIGINT,
		total_tokens      BIGINT,
		cached_tokens     BIGINT,
		reasoning_tokens  BIGINT,
		recorded_at       TIMESTAMP NOT NULL,
		PRIMARY KEY (run_id, source, call_id, observation)
	)`
}
