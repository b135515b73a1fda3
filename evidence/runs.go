package evidence

import (
	"context"
	"database/sql"
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
	// Case is the catalog case the run executes, e.g. "parallel+vote",
	// "sequential+remote" (schema v6); "" for a run recorded before (the
	// case was not recorded: Formation alone cannot tell the catalog's
	// variants of one formation apart).
	Case string
	// InvocationID names the CLI invocation (one `assay matrix run`,
	// `assay resume` or `assay replay verify`) that opened the run, e.g.
	// "inv-20261201t215000-0a1b2c3d4e5f" (schema v6); "" when none was
	// recorded. It is identity, not authority: a resume is a new invocation
	// and is not compared on it.
	InvocationID string
	// Task is the team task the run executes, e.g. "double" (the built-in
	// task) (schema v7); "" for a run recorded before (task not recorded).
	Task string
	// Repeat is the run's repeat index within its matrix cell, 1-based
	// (`repeat: N` of a matrix file gives 1..N) (schema v7); 0 when the run
	// is not a repeat run or was recorded before. Each repeat is its own
	// run with its own verdict, never a retry of another.
	Repeat int
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

// ValidID reports whether id is a well-formed run or invocation id: 1..128
// chars of [A-Za-z0-9._-] (what OpenRun accepts).
func ValidID(id string) bool { return validRunID(id) }

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
		{"task_profile", e.TaskProfile}, {"language", e.Language}, {"case", e.Case}, {"task", e.Task},
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
	if e.InvocationID != "" && !validRunID(e.InvocationID) {
		return bad("invocation_id", "%q is not 1..128 characters of [A-Za-z0-9._-]", e.InvocationID)
	}
	if e.Repeat < 0 {
		return bad("repeat", "%d is negative (1-based; 0 = not a repeat run)", e.Repeat)
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
		formation, task_profile, language, case_name, invocation_id, task_name, repeat_index)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		runID, env.Tenant, env.ManifestDigest, env.Mode, env.PolicyDigest, env.DatasetDigest,
		env.EnvironmentFingerprint, sources, env.ReplayTolerance, env.Provider, env.BaseURL, env.Model,
		env.Formation, env.TaskProfile, env.Language, nullIfEmpty(env.Case), nullIfEmpty(env.InvocationID),
		nullIfEmpty(env.Task), sql.NullInt64{Int64: int64(env.Repeat), Valid: env.Repeat != 0}); err != nil {
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

// nullIfEmpty stores "" as NULL: a column added by a migration is NULL for
// the rows recorded before it, and a new row that has nothing to record
// reads the same way.
func nullIfEmpty(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

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
