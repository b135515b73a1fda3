package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Run statuses (runs.status).
const (
	StatusOpen        = "open"        // accepting events and evidence
	StatusFinalized   = "finalized"   // immutable, with terminal hash and verdict
	StatusInterrupted = "interrupted" // its writer ended without finalizing it; refuses writes; sealed by the next writer (schema v5)
)

// Envelope modes (DESIGN.md vocabulary). Only ModeLive can certify.
const (
	ModeLive    = "live"
	ModeDryRun  = "dry_run"
	ModeObserve = "observe"
)

// Envelope is what a run is bound to before it executes (DESIGN.md
// vocabulary). It is stored by OpenRun, bound by its Digest, and covered by the
// terminal hash; it never changes afterwards.
type Envelope struct {
	Tenant                 string   // required: owner of the run
	ManifestDigest         string   // required: SHA-256 hex (64 lowercase chars) of the case manifest
	Mode                   string   // required: "live" | "dry_run" | "observe"
	PolicyDigest           string   // SHA-256 hex of the policy, or "" when none
	DatasetDigest          string   // SHA-256 hex of the dataset descriptor, or "" when none
	EnvironmentFingerprint string   // required, e.g. SHA-256 over go version, GOOS/GOARCH, assay version
	EntropySources         []string // declared sources of nondeterminism (each non-empty)
	ReplayTolerance        string   // name of the replay tolerance policy, e.g. "exact"
	Provider               string   // provider name, e.g. "reference", "openai"
	BaseURL                string   // provider base URL
	Model                  string   // model id
	Formation              string   // formation name (DESIGN.md vocabulary)
	TaskProfile            string   // task profile name
	Language               string   // case language, e.g. "go", "python"
}

// ArtifactLink is one artifact linked to a run under a name.
type ArtifactLink struct {
	Name      string    // e.g. "cases/double.go", "provider/response/exec-1/0"
	Digest    string    // SHA-256 hex of the content
	MediaType string    // e.g. "text/x-go", "application/json"
	Size      int64     // bytes
	Storage   string    // "inline" (in the database) or "file" (under artifacts/sha256)
	LinkedAt  time.Time // UTC, microsecond precision
}

// RunSummary is a run with everything recorded about it.
type RunSummary struct {
	RunID          string
	CorrectsRunID  string // the run this one corrects; "" when none
	Status         string // StatusOpen | StatusFinalized | StatusInterrupted
	Envelope       Envelope
	EnvelopeDigest string      // Envelope.Digest() as bound at OpenRun
	CreatedAt      time.Time   // UTC, microsecond precision
	FinalizedAt    *time.Time  // nil until finalized
	EventCount     int64       // events in the trace (counted live for unfinalized runs)
	TerminalHash   string      // "" until finalized
	Verdict        *Verdict    // nil until finalized
	Checks         []Check     // ordered by name
	Usage          []UsageRow  // in recording order
	UsageCalls     []UsageCall // observations, ordered by source, call id, observation
	UsageVerdicts  []UsageVerdict
	Artifacts      []ArtifactLink   // ordered by name
	Checkpoints    []CheckpointInfo // ordered by seq
	// StatusChanges are status changes made without an event (open ->
	// interrupted on crash recovery), in order.
	StatusChanges []StatusChange
	// TerminalVersion is the terminal hash definition the run was finalized
	// under (TerminalV1, TerminalV2, TerminalV3: the schema version it was
	// finalized under); 0 until finalized.
	TerminalVersion int
	// AdmissionHash is the run's hash in the store-wide admissions chain
	// (Admission.Hash, SHA-256 hex); "" when the run has no admission.
	AdmissionHash string
	// WriterID is the writer session that opened the run (runs.writer_id);
	// 0 for a run of schema v1.
	WriterID int64
	// Interrupted reports that the run was interrupted: its status is
	// interrupted (sealed by a later writer, or recorded so before schema 5),
	// or it is open although no writer session of this Store owns it (to a
	// reader, and to a writer before its first write, every open run is one
	// whose writer ended: Open holds the lock, so none is live).
	Interrupted bool
	// Sealed reports an interrupted run a later writer finalized as
	// interrupted (schema v5): it has a terminal hash, an event count and
	// the verdict rejected for the reason "interrupted".
	Sealed bool
}

// markInterrupted sets Interrupted and Sealed on runs as this store sees them.
func (s *Store) markInterrupted(runs []RunSummary) {
	for i := range runs {
		r := &runs[i]
		r.Sealed = r.Status == StatusInterrupted && r.TerminalHash != ""
		r.Interrupted = r.Status == StatusInterrupted || (r.Status == StatusOpen && (s.writerID == 0 || r.WriterID != s.writerID))
	}
}

// StatusChange is a run status change recorded outside the hash chain.
type StatusChange struct {
	From, To string
	Reason   string    // e.g. "interrupted: writer 3 (pid 4242, assay matrix run) ended without closing the store (crashed or killed)"
	WriterID int64     // the writer session that made the change
	At       time.Time // UTC
}

// validRunID reports whether id is 1..128 chars of [A-Za-z0-9._-].
func validRunID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func checkRunID(field, id string) error {
	if !validRunID(id) {
		return fieldErr(ErrInvalidArgument, field, "%q is not 1..128 characters of [A-Za-z0-9._-]", id)
	}
	return nil
}

// validate refuses an envelope missing a required field or holding a malformed one.
func (e Envelope) validate() error {
	bad := func(field, format string, args ...any) error {
		return fieldErr(ErrInvalidEnvelope, field, format, args...)
	}
	fields := []struct{ name, value string }{
		{"tenant", e.Tenant}, {"manifest_digest", e.ManifestDigest}, {"mode", e.Mode},
		{"policy_digest", e.PolicyDigest}, {"dataset_digest", e.DatasetDigest},
		{"environment_fingerprint", e.EnvironmentFingerprint}, {"replay_tolerance", e.ReplayTolerance},
		{"provider", e.Provider}, {"base_url", e.BaseURL}, {"model", e.Model}, {"formation", e.Formation},
		{"task_profile", e.TaskProfile}, {"language", e.Language},
	}
	for _, f := range fields {
		if !utf8.ValidString(f.value) {
			return bad(f.name, "not valid UTF-8")
		}
	}
	switch {
	case e.Tenant == "":
		return bad("tenant", "required")
	case !isDigest(e.ManifestDigest):
		return bad("manifest_digest", "%q is not SHA-256 hex (64 lowercase chars)", e.ManifestDigest)
	case e.Mode != ModeLive && e.Mode != ModeDryRun && e.Mode != ModeObserve:
		return bad("mode", "%q is not one of live, dry_run, observe", e.Mode)
	case e.PolicyDigest != "" && !isDigest(e.PolicyDigest):
		return bad("policy_digest", "%q is neither empty nor SHA-256 hex", e.PolicyDigest)
	case e.DatasetDigest != "" && !isDigest(e.DatasetDigest):
		return bad("dataset_digest", "%q is neither empty nor SHA-256 hex", e.DatasetDigest)
	case e.EnvironmentFingerprint == "":
		return bad("environment_fingerprint", "required")
	}
	for i, src := range e.EntropySources {
		if src == "" || !utf8.ValidString(src) {
			return bad("entropy_sources", "entry %d is empty or not UTF-8", i)
		}
	}
	return nil
}

// OpenRun creates run runID in status "open", binding it to env before
// anything executes. correctsRunID, when not "", names an existing run this
// one corrects (finalized runs are never edited; corrections are new runs).
//
// In the same transaction the run is appended to the store-wide admissions
// chain (Admission, AdmissionHash), which Verify recomputes, so a run deleted
// later leaves a gap or a broken link there.
//
// Run ids are caller-generated, globally unique, 1..128 chars of
// [A-Za-z0-9._-]. Errors: *FieldError (ErrInvalidArgument for ids,
// ErrInvalidEnvelope naming the envelope field); ErrRunExists; ErrNoRun when
// correctsRunID does not exist; ErrReadOnly; ErrClosed.
func (s *Store) OpenRun(ctx context.Context, runID string, env Envelope, correctsRunID string) error {
	if err := checkRunID("run_id", runID); err != nil {
		return err
	}
	if correctsRunID != "" {
		if err := checkRunID("corrects_run_id", correctsRunID); err != nil {
			return err
		}
		if correctsRunID == runID {
			return fieldErr(ErrInvalidArgument, "corrects_run_id", "a run cannot correct itself")
		}
	}
	if err := env.validate(); err != nil {
		return err
	}
	digest, err := env.Digest()
	if err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: open run %s: %w", runID, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE run_id = ?`, runID).Scan(&n); err != nil {
		return fmt.Errorf("evidence: open run %s: %w", runID, err)
	}
	if n > 0 {
		return fmt.Errorf("evidence: open run %s: %w", runID, ErrRunExists)
	}
	var corrects sql.NullString
	if correctsRunID != "" {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE run_id = ?`, correctsRunID).Scan(&n); err != nil {
			return fmt.Errorf("evidence: open run %s: %w", runID, err)
		}
		if n == 0 {
			return fmt.Errorf("evidence: open run %s: corrected run %s: %w", runID, correctsRunID, ErrNoRun)
		}
		corrects = sql.NullString{String: correctsRunID, Valid: true}
	}
	// The ordinal follows both tables, so a run row deleted behind the
	// store's back never lets a new run take its place in the admissions.
	var ordinal int64
	if err := tx.QueryRowContext(ctx, `SELECT greatest((SELECT coalesce(max(ordinal), 0) FROM runs),
		(SELECT coalesce(max(ordinal), 0) FROM admissions)) + 1`).Scan(&ordinal); err != nil {
		return fmt.Errorf("evidence: open run %s: %w", runID, err)
	}
	now := utcMicro(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (run_id, ordinal, corrects_run_id, status, envelope_digest, created_at, writer_id)
		VALUES (?, ?, ?, 'open', ?, ?, ?)`, runID, ordinal, corrects, digest, now, s.writerID); err != nil {
		return fmt.Errorf("evidence: open run %s: %w", runID, err)
	}
	sources := env.EntropySources
	if sources == nil {
		sources = []string{}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO envelopes (run_id, tenant, manifest_digest, mode, policy_digest,
		dataset_digest, environment_fingerprint, entropy_sources, replay_tolerance, provider, base_url, model,
		formation, task_profile, language) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, env.Tenant, env.ManifestDigest, env.Mode, env.PolicyDigest, env.DatasetDigest,
		env.EnvironmentFingerprint, sources, env.ReplayTolerance, env.Provider, env.BaseURL, env.Model,
		env.Formation, env.TaskProfile, env.Language); err != nil {
		return fmt.Errorf("evidence: open run %s: store envelope: %w", runID, err)
	}
	if _, err := appendAdmission(ctx, tx, Admission{Ordinal: ordinal, RunID: runID, EnvelopeDigest: digest,
		CorrectsRunID: correctsRunID, AdmittedAt: now}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: open run %s: %w", runID, err)
	}
	return nil
}

// queryer is what both *sql.DB and *sql.Tx offer for reads.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// writableRun returns nil when runID exists and is open, else an error
// wrapping ErrNoRun, ErrFinalized or ErrRunNotOpen.
func writableRun(ctx context.Context, q queryer, runID string) error {
	var status string
	err := q.QueryRowContext(ctx, `SELECT status FROM runs WHERE run_id = ?`, runID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	if err != nil {
		return fmt.Errorf("evidence: run %s: %w", runID, err)
	}
	switch status {
	case StatusOpen:
		return nil
	case StatusFinalized:
		return fmt.Errorf("evidence: run %s: %w", runID, ErrFinalized)
	default:
		return fmt.Errorf("evidence: run %s is %s: %w", runID, status, ErrRunNotOpen)
	}
}

// Runs returns every run with its envelope, verdict, checks, usage and
// artifact links, ordered by creation. Works on a read-only store.
func (s *Store) Runs(ctx context.Context) ([]RunSummary, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	runs, err := loadRuns(ctx, s.conn, "")
	if err != nil {
		return nil, err
	}
	s.markInterrupted(runs)
	return runs, nil
}

// Run returns one run like Runs does. Errors: ErrNoRun when it does not exist.
func (s *Store) Run(ctx context.Context, runID string) (RunSummary, error) {
	if err := s.beginRead(); err != nil {
		return RunSummary{}, err
	}
	defer s.mu.Unlock()
	runs, err := loadRuns(ctx, s.conn, runID)
	if err != nil {
		return RunSummary{}, err
	}
	if len(runs) == 0 {
		return RunSummary{}, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	s.markInterrupted(runs)
	return runs[0], nil
}

// loadRuns loads the runs matching runID ("" = all) with everything linked to them.
func loadRuns(ctx context.Context, q queryer, runID string) ([]RunSummary, error) {
	rows, err := q.QueryContext(ctx, `SELECT r.run_id, r.corrects_run_id, r.status, r.envelope_digest, r.created_at,
			r.finalized_at, r.event_count, r.terminal_hash, coalesce(r.terminal_version, 0),
			(SELECT count(*) FROM events ev WHERE ev.run_id = r.run_id),
			e.tenant, e.manifest_digest, e.mode, e.policy_digest, e.dataset_digest, e.environment_fingerprint,
			e.entropy_sources, e.replay_tolerance, e.provider, e.base_url, e.model, e.formation, e.task_profile, e.language,
			coalesce((SELECT min(a.hash) FROM admissions a WHERE a.run_id = r.run_id), ''), coalesce(r.writer_id, 0)
		FROM runs r LEFT JOIN envelopes e ON e.run_id = r.run_id
		WHERE ? = '' OR r.run_id = ?
		ORDER BY r.ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load runs: %w", err)
	}
	defer rows.Close()
	var out []RunSummary
	index := map[string]int{}
	for rows.Next() {
		var r RunSummary
		var corrects, terminal sql.NullString
		var finalized sql.NullTime
		var storedCount sql.NullInt64
		var liveCount int64
		var tenant, manifest, mode, policy, dataset, fingerprint, tolerance, provider, baseURL, model, formation, profile, language sql.NullString
		var sources any
		if err := rows.Scan(&r.RunID, &corrects, &r.Status, &r.EnvelopeDigest, &r.CreatedAt, &finalized, &storedCount,
			&terminal, &r.TerminalVersion, &liveCount, &tenant, &manifest, &mode, &policy, &dataset, &fingerprint, &sources, &tolerance,
			&provider, &baseURL, &model, &formation, &profile, &language, &r.AdmissionHash, &r.WriterID); err != nil {
			return nil, fmt.Errorf("evidence: load runs: %w", err)
		}
		r.CorrectsRunID = corrects.String
		r.TerminalHash = terminal.String
		r.EventCount = liveCount
		if storedCount.Valid {
			r.EventCount = storedCount.Int64
		}
		if finalized.Valid {
			t := finalized.Time.UTC()
			r.FinalizedAt = &t
		}
		r.CreatedAt = r.CreatedAt.UTC()
		r.Envelope = Envelope{
			Tenant: tenant.String, ManifestDigest: manifest.String, Mode: mode.String, PolicyDigest: policy.String,
			DatasetDigest: dataset.String, EnvironmentFingerprint: fingerprint.String, ReplayTolerance: tolerance.String,
			Provider: provider.String, BaseURL: baseURL.String, Model: model.String, Formation: formation.String,
			TaskProfile: profile.String, Language: language.String,
		}
		if r.Envelope.EntropySources, err = toStrings(sources); err != nil {
			return nil, fmt.Errorf("evidence: run %s: entropy_sources: %w", r.RunID, err)
		}
		index[r.RunID] = len(out)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: load runs: %w", err)
	}
	rows.Close()
	if len(out) == 0 {
		return out, nil
	}
	if err := loadVerdicts(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadChecksInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadUsageInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadUsageVerdictsInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	if err := loadArtifactLinksInto(ctx, q, runID, out, index); err != nil {
		return nil, err
	}
	calls, err := loadUsageCalls(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	cps, err := loadCheckpointInfos(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	changes, err := loadStatusChanges(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	for id, i := range index {
		out[i].UsageCalls, out[i].Checkpoints, out[i].StatusChanges = calls[id], cps[id], changes[id]
	}
	return out, nil
}

// loadStatusChanges returns the status changes of runID ("" = all runs) by run id.
func loadStatusChanges(ctx context.Context, q queryer, runID string) (map[string][]StatusChange, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, from_status, to_status, reason, writer_id, changed_at
		FROM run_status_changes WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load status changes: %w", err)
	}
	defer rows.Close()
	out := map[string][]StatusChange{}
	for rows.Next() {
		var id string
		var c StatusChange
		if err := rows.Scan(&id, &c.From, &c.To, &c.Reason, &c.WriterID, &c.At); err != nil {
			return nil, fmt.Errorf("evidence: load status changes: %w", err)
		}
		c.At = c.At.UTC()
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

func loadVerdicts(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	rows, err := q.QueryContext(ctx, `SELECT run_id, verdict, reasons FROM verdicts WHERE ? = '' OR run_id = ?`, runID, runID)
	if err != nil {
		return fmt.Errorf("evidence: load verdicts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v Verdict
		var reasons any
		if err := rows.Scan(&id, &v.Verdict, &reasons); err != nil {
			return fmt.Errorf("evidence: load verdicts: %w", err)
		}
		if v.Reasons, err = toStrings(reasons); err != nil {
			return fmt.Errorf("evidence: run %s: verdict reasons: %w", id, err)
		}
		if i, ok := index[id]; ok {
			out[i].Verdict = &v
		}
	}
	return rows.Err()
}

func loadChecksInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	checks, err := loadChecks(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, cs := range checks {
		if i, ok := index[id]; ok {
			out[i].Checks = cs
		}
	}
	return nil
}

// loadChecks returns the checks of runID ("" = all runs) by run id, each list ordered by name.
func loadChecks(ctx context.Context, q queryer, runID string) (map[string][]Check, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, name, required, status, detail, CAST(evidence AS VARCHAR)
		FROM checks WHERE ? = '' OR run_id = ? ORDER BY run_id, name`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load checks: %w", err)
	}
	defer rows.Close()
	out := map[string][]Check{}
	for rows.Next() {
		var id string
		var c Check
		var ev sql.NullString
		if err := rows.Scan(&id, &c.Name, &c.Required, &c.Status, &c.Detail, &ev); err != nil {
			return nil, fmt.Errorf("evidence: load checks: %w", err)
		}
		if ev.Valid {
			c.Evidence = json.RawMessage(ev.String)
		}
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

func loadUsageInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	usage, err := loadUsage(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, us := range usage {
		if i, ok := index[id]; ok {
			out[i].Usage = us
		}
	}
	return nil
}

// loadUsage returns the usage rows of runID ("" = all runs) by run id, in recording order.
func loadUsage(ctx context.Context, q queryer, runID string) (map[string][]UsageRow, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, member_id, session_id, source, state, requests, prompt_tokens,
		completion_tokens, total_tokens, cached_tokens, reasoning_tokens
		FROM usage WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load usage: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageRow{}
	for rows.Next() {
		var id string
		var u UsageRow
		var requests int64
		var tokens [5]sql.NullInt64
		if err := rows.Scan(&id, &u.MemberID, &u.SessionID, &u.Source, &u.State, &requests,
			&tokens[0], &tokens[1], &tokens[2], &tokens[3], &tokens[4]); err != nil {
			return nil, fmt.Errorf("evidence: load usage: %w", err)
		}
		u.Requests = int(requests)
		ptrs := [5]**int64{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens}
		for i, t := range tokens {
			if t.Valid {
				v := t.Int64
				*ptrs[i] = &v
			}
		}
		out[id] = append(out[id], u)
	}
	return out, rows.Err()
}

func loadUsageVerdictsInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	verdicts, err := loadUsageVerdicts(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, vs := range verdicts {
		if i, ok := index[id]; ok {
			out[i].UsageVerdicts = vs
		}
	}
	return nil
}

// loadUsageVerdicts returns the usage verdicts of runID ("" = all runs) by run id, in recording order.
func loadUsageVerdicts(ctx context.Context, q queryer, runID string) (map[string][]UsageVerdict, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, member_id, session_id, verdict, CAST(deltas AS VARCHAR), detail,
		duplicated, coalesce(multiple, 0), CAST(sources AS VARCHAR)
		FROM usage_verdicts WHERE ? = '' OR run_id = ? ORDER BY run_id, ordinal`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load usage verdicts: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageVerdict{}
	for rows.Next() {
		var id, deltas string
		var v UsageVerdict
		var sources sql.NullString
		if err := rows.Scan(&id, &v.MemberID, &v.SessionID, &v.Verdict, &deltas, &v.Detail, &v.Duplicated, &v.Multiple, &sources); err != nil {
			return nil, fmt.Errorf("evidence: load usage verdicts: %w", err)
		}
		if sources.Valid {
			if err := json.Unmarshal([]byte(sources.String), &v.Sources); err != nil {
				return nil, fmt.Errorf("evidence: run %s: usage verdict sources: %w", id, err)
			}
		}
		if err := json.Unmarshal([]byte(deltas), &v.Deltas); err != nil {
			return nil, fmt.Errorf("evidence: run %s: usage verdict deltas: %w", id, err)
		}
		out[id] = append(out[id], v)
	}
	return out, rows.Err()
}

func loadArtifactLinksInto(ctx context.Context, q queryer, runID string, out []RunSummary, index map[string]int) error {
	links, err := loadArtifactLinks(ctx, q, runID)
	if err != nil {
		return err
	}
	for id, ls := range links {
		if i, ok := index[id]; ok {
			out[i].Artifacts = ls
		}
	}
	return nil
}

// loadArtifactLinks returns the artifact links of runID ("" = all runs) by run
// id, ordered by name. Size and Storage are zero/"" when the artifacts row is
// missing (Verify reports that as missing_payload).
func loadArtifactLinks(ctx context.Context, q queryer, runID string) (map[string][]ArtifactLink, error) {
	rows, err := q.QueryContext(ctx, `SELECT l.run_id, l.name, l.digest, l.media_type, l.linked_at, a.size, a.storage
		FROM run_artifacts l LEFT JOIN artifacts a ON a.digest = l.digest
		WHERE ? = '' OR l.run_id = ? ORDER BY l.run_id, l.name`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load artifact links: %w", err)
	}
	defer rows.Close()
	out := map[string][]ArtifactLink{}
	for rows.Next() {
		var id string
		var l ArtifactLink
		var size sql.NullInt64
		var storage sql.NullString
		if err := rows.Scan(&id, &l.Name, &l.Digest, &l.MediaType, &l.LinkedAt, &size, &storage); err != nil {
			return nil, fmt.Errorf("evidence: load artifact links: %w", err)
		}
		l.LinkedAt = l.LinkedAt.UTC()
		l.Size, l.Storage = size.Int64, storage.String
		out[id] = append(out[id], l)
	}
	return out, rows.Err()
}

// toStrings converts a scanned DuckDB VARCHAR[] ([]any of string) to []string.
func toStrings(v any) ([]string, error) {
	if v == nil {
		return []string{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("expected a list, got %T", v)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("expected a string element, got %T", x)
		}
		out = append(out, s)
	}
	return out, nil
}
