package evidence

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// migration upgrades a store from schema version From to From+1. Its
// statements run in one transaction with the schema_version update, so a
// failed migration leaves the file as it was.
type migration struct {
	From int
	Doc  string
	// Check refuses a file this migration cannot convert faithfully; nil
	// when every file of version From converts.
	Check func(ctx context.Context, q queryer) error
	Stmts []string
	// Apply, when set, runs after Stmts in the same transaction, for steps
	// SQL cannot express (computing hashes).
	Apply func(ctx context.Context, tx *sql.Tx) error
}

// migrations lists every upgrade step in order; migrations()[i].From == i+1.
func migrations() []migration {
	return []migration{{
		From: 1,
		Doc: "v1 -> v2: writer sessions and event-free status changes (crash recovery), per-call usage with the " +
			"suspect_zero state, usage verdict duplication and per-source states, checkpoints linked to an event " +
			"hash, terminal hash versions (v1-finalized runs keep terminal_version 1)",
		Check: func(ctx context.Context, q queryer) error {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints`).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				// v1 had no API writing checkpoints, so rows there were put by
				// something else and their hashes follow no known definition.
				return fmt.Errorf("%d checkpoint rows that schema v1 never wrote; refusing to carry them over", n)
			}
			return nil
		},
		Stmts: []string{
			writersDDLv2,
			runStatusChangesDDL,
			`ALTER TABLE runs ADD COLUMN writer_id BIGINT`,
			`ALTER TABLE runs ADD COLUMN terminal_version INTEGER`,
			`UPDATE runs SET terminal_version = 1 WHERE status = 'finalized'`,
			usageDDL("usage_v2"),
			`INSERT INTO usage_v2 SELECT run_id, ordinal, member_id, session_id, source, state, requests, prompt_tokens,
				completion_tokens, total_tokens, cached_tokens, reasoning_tokens, recorded_at FROM usage`,
			`DROP TABLE usage`,
			`ALTER TABLE usage_v2 RENAME TO usage`,
			usageCallsDDL("usage_calls"),
			`CREATE TABLE usage_verdicts_v2 (
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
			`INSERT INTO usage_verdicts_v2 (run_id, ordinal, member_id, session_id, verdict, deltas, detail, recorded_at)
				SELECT run_id, ordinal, member_id, session_id, verdict, deltas, detail, recorded_at FROM usage_verdicts`,
			`DROP TABLE usage_verdicts`,
			`ALTER TABLE usage_verdicts_v2 RENAME TO usage_verdicts`,
			`DROP TABLE checkpoints`,
			`CREATE TABLE checkpoints (
				run_id     VARCHAR NOT NULL,
				seq        BIGINT NOT NULL,
				state      JSON NOT NULL,
				hash       VARCHAR NOT NULL,
				created_at TIMESTAMP NOT NULL,
				event_hash VARCHAR,
				PRIMARY KEY (run_id, seq)
			)`,
		},
	}, {
		From: 2,
		Doc: "v2 -> v3: the store-wide admissions chain, backfilled for existing runs in ordinal order (a gap in the " +
			"ordinals stays a gap); runs admitted from now on chain their checks and verdict as check_recorded and " +
			"run_finalized events and finalize with terminal version 3 (existing runs keep their terminal version)",
		Check: func(ctx context.Context, q queryer) error {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE type IN (?, ?)`, EventCheckRecorded, EventRunFinalized).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				// Schema v3 reserves these types for the store; a v2 event of
				// such a type would read as a forged check or verdict record.
				return fmt.Errorf("%d events of type %s or %s, which schema 3 reserves for the store; refusing to carry them over",
					n, EventCheckRecorded, EventRunFinalized)
			}
			return nil
		},
		Stmts: []string{admissionsDDL},
		Apply: backfillAdmissions,
	}, {
		From: 3,
		Doc: "v3 -> v4: check statuses simulated (dry_run effects) and not_enforced (a check that depended on a policy " +
			"observe mode did not enforce) are allowed, and usage_calls takes the gateway's per-request records as source " +
			"gateway; existing rows are unchanged",
		Stmts: []string{
			checksDDL("checks_v4"),
			`INSERT INTO checks_v4 SELECT run_id, name, required, status, detail, evidence, recorded_at FROM checks`,
			`DROP TABLE checks`,
			`ALTER TABLE checks_v4 RENAME TO checks`,
			usageCallsDDL("usage_calls_v4"),
			`INSERT INTO usage_calls_v4 SELECT * FROM usage_calls`,
			`DROP TABLE usage_calls`,
			`ALTER TABLE usage_calls_v4 RENAME TO usage_calls`,
		},
	}, {
		From: 4,
		Doc: "v4 -> v5: writer sessions form a hash chain (existing ones backfilled, in writer_id order) that pins the admissions " +
			"and finalizations chains at each open and close; the finalizations chain, backfilled for runs finalized before (in " +
			"finalization order); run_bindings binds a run to the records outside the store its verdict rests on; runs finalized " +
			"from now on use terminal version 5 (every column of their rows); the next writer seals interrupted runs (finalized " +
			"rejected, reason interrupted)",
		Stmts: []string{
			writersDDL("writers_v5"),
			`INSERT INTO writers_v5 (writer_id, pid, command, host, opened_at, closed_at, backfilled, prev_hash, hash)
				SELECT writer_id, pid, command, host, opened_at, closed_at, true, '', '' FROM writers`,
			`DROP TABLE writers`,
			`ALTER TABLE writers_v5 RENAME TO writers`,
			finalizationsDDL,
			runBindingsDDL,
		},
		Apply: backfillV5,
	}, {
		From: 5,
		Doc: "v5 -> v6: envelopes record the catalog case (case_name) and the CLI invocation (invocation_id); both are NULL " +
			"for existing runs (case not recorded), whose envelope digests are unchanged (the digest covers them only when set)",
		Stmts: []string{
			`ALTER TABLE envelopes ADD COLUMN case_name VARCHAR`,
			`ALTER TABLE envelopes ADD COLUMN invocation_id VARCHAR`,
		},
	}, {
		From: 6,
		Doc: "v6 -> v7: envelopes record the team task (task_name) and the repeat index (repeat_index); both are NULL " +
			"for existing runs (task not recorded, not a repeat run), whose envelope digests are unchanged (the digest covers them only when set)",
		Stmts: []string{
			`ALTER TABLE envelopes ADD COLUMN task_name VARCHAR`,
			`ALTER TABLE envelopes ADD COLUMN repeat_index INTEGER`,
		},
	}}
}

// backfillV5 chains the writer sessions and the finalizations of a store
// being migrated to schema v5: every existing session in writer_id order
// (backfilled: no heads), and a backfilled finalization for every finalized
// run in the order of its finalization time, then creation.
func backfillV5(ctx context.Context, tx *sql.Tx) error {
	ws, err := loadWriters(ctx, tx)
	if err != nil {
		return fmt.Errorf("backfill writers: %w", err)
	}
	prev := ZeroHash
	for _, w := range ws {
		w.PrevHash = prev
		if w.Hash, err = WriterHash(prev, w); err != nil {
			return fmt.Errorf("backfill writers: %w", err)
		}
		w.CloseHash = ""
		var closeHash any
		if w.ClosedAt != nil {
			if w.CloseHash, err = WriterCloseHash(w); err != nil {
				return fmt.Errorf("backfill writers: %w", err)
			}
			closeHash = w.CloseHash
		}
		if _, err := tx.ExecContext(ctx, `UPDATE writers SET prev_hash = ?, hash = ?, close_hash = ? WHERE writer_id = ?`,
			w.PrevHash, w.Hash, closeHash, w.WriterID); err != nil {
			return fmt.Errorf("backfill writers: %w", err)
		}
		prev = w.finalHash()
	}
	rows, err := tx.QueryContext(ctx, `SELECT run_id, coalesce(terminal_hash, ''), writer_id, coalesce(finalized_at, created_at)
		FROM runs WHERE status = 'finalized' ORDER BY finalized_at NULLS LAST, ordinal`)
	if err != nil {
		return fmt.Errorf("backfill finalizations: %w", err)
	}
	var fins []Finalization
	for rows.Next() {
		f := Finalization{Status: StatusFinalized, Backfilled: true}
		var wid sql.NullInt64
		if err := rows.Scan(&f.RunID, &f.TerminalHash, &wid, &f.FinalizedAt); err != nil {
			rows.Close()
			return fmt.Errorf("backfill finalizations: %w", err)
		}
		if wid.Valid {
			v := wid.Int64
			f.WriterID = &v
		}
		fins = append(fins, f)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("backfill finalizations: %w", err)
	}
	for _, f := range fins {
		if _, err := appendFinalization(ctx, tx, f); err != nil {
			return fmt.Errorf("backfill finalizations: %w", err)
		}
	}
	return nil
}

// MigrateResult is what Migrate did.
type MigrateResult struct {
	Path string `json:"path"`
	From int    `json:"from_schema_version"` // schema version found
	To   int    `json:"to_schema_version"`   // schema version now (SchemaVersion)
	// Steps documents each migration applied; empty when the store was current.
	Steps []string `json:"steps"`
	// Verification is Verify over every run after migrating: migration never
	// changes what a run's hashes cover, so a run that verified before still does.
	Verification []RunVerification `json:"verification"`
	// Interrupted lists runs left open by earlier writers and recorded as
	// interrupted when the migrated store was opened for writing.
	Interrupted []string `json:"interrupted"`
}

// Unverified returns the entries of Verification that do not verify: neither passed
// (RunVerification.Passed: ok, or interrupted with its evidence verifying) nor unfinalized (a run
// left open verifies as far as it goes). The migration itself succeeded; these
// runs did not verify before it either.
func (r MigrateResult) Unverified() []RunVerification {
	var bad []RunVerification
	for _, v := range r.Verification {
		if !v.Passed() && v.Status != VerifyUnfinalized {
			bad = append(bad, v)
		}
	}
	return bad
}

// Migrate upgrades the store at path to SchemaVersion in place, holding the
// writer lock (opts.Wait and opts.Command as for Open; opts.ReadOnly is
// ignored). All steps and the schema_version update run in one transaction.
// A store already at SchemaVersion is left unchanged. Opening a store never
// migrates it: Open refuses older versions with *SchemaVersionError.
//
// Errors: those of Open (ErrLocked, ErrNotStore, fs.ErrNotExist...);
// *SchemaVersionError for a newer store; an error naming the step that
// failed or refused (the file is then unchanged).
func Migrate(ctx context.Context, path string, opts OpenOptions) (MigrateResult, error) {
	opts.ReadOnly = false
	if _, err := statExisting(path); err != nil {
		return MigrateResult{}, err
	}
	s, err := open(ctx, path, opts, true)
	if err != nil {
		return MigrateResult{}, err
	}
	defer s.Close()
	res := MigrateResult{Path: path, To: SchemaVersion}
	if res.From, err = s.checkSchema(ctx); err != nil {
		return MigrateResult{}, err
	}
	if res.From < SchemaVersion {
		s.mu.Lock()
		err = s.applyMigrations(ctx, res.From, &res)
		s.mu.Unlock()
		if err != nil {
			return MigrateResult{}, err
		}
		s.mu.Lock()
		err = s.startWriter(ctx)
		s.mu.Unlock()
		if err != nil {
			return MigrateResult{}, err
		}
	}
	res.Interrupted = s.Recovered()
	if res.Verification, err = s.Verify(ctx); err != nil {
		return MigrateResult{}, err
	}
	return res, nil
}

func (s *Store) applyMigrations(ctx context.Context, from int, res *MigrateResult) error {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: migrate %s: %w", s.path, err)
	}
	defer tx.Rollback()
	for _, m := range migrations() {
		if m.From < from {
			continue
		}
		if m.Check != nil {
			if err := m.Check(ctx, tx); err != nil {
				return fmt.Errorf("evidence: migrate %s from schema %d: %w", s.path, m.From, err)
			}
		}
		for _, st := range m.Stmts {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("evidence: migrate %s from schema %d: %w", s.path, m.From, err)
			}
		}
		if m.Apply != nil {
			if err := m.Apply(ctx, tx); err != nil {
				return fmt.Errorf("evidence: migrate %s from schema %d: %w", s.path, m.From, err)
			}
		}
		res.Steps = append(res.Steps, m.Doc)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'schema_version'`, strconv.Itoa(SchemaVersion)); err != nil {
		return fmt.Errorf("evidence: migrate %s: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`,
		fmt.Sprintf("migrated_from_%d", from), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("evidence: migrate %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: migrate %s: %w", s.path, err)
	}
	return nil
}
