package reports

import (
	"encoding/json"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// ReportSchemaVersion is the version of the report model as `assay report --format json` writes it
// (Report.SchemaVersion). It changes when a key is removed or changes meaning.
const ReportSchemaVersion = 1

// NotRecorded is the text a renderer shows for a fact the evidence does not hold (a run recorded
// before the store kept it). It is never rendered as zero or as an empty cell.
const NotRecorded = "not recorded"

// CaseNotRecorded is what a run recorded before schema v6 shows as its case name: its envelope
// kept only the formation, which cannot tell a formation's catalog variants apart.
const CaseNotRecorded = "case not recorded"

// Report is everything a report renders, read only from the evidence store (Load) and the files
// the out directory holds. It is plain data: every renderer (Markdown, JSON, JUnit, HTML) reads the
// same value and decides nothing about acceptance itself. JSON keys are snake_case; durations are
// seconds; hashes are full SHA-256 hex (64 chars), never truncated.
type Report struct {
	// SchemaVersion is ReportSchemaVersion.
	SchemaVersion int `json:"schema_version"`
	// GeneratedAt is when the report was built (UTC).
	GeneratedAt time.Time `json:"generated_at"`
	// StorePath is the evidence store the report was read from.
	StorePath string `json:"store_path"`
	// Selection is what was asked for, in words, e.g. "the latest invocation", "all runs".
	Selection string `json:"selection"`
	// Verified is true when Load recomputed every selected run's evidence (Case.Verification);
	// false with Selection.NoVerify: the verdicts are then shown as recorded, unverified.
	Verified bool `json:"verified"`
	// StoreFindings are what that recomputation found outside the selected runs: a run deleted from
	// the store, a broken store-wide chain (admissions, finalizations, writers), damage. Any
	// finding means the store itself does not verify, whatever the selected runs say; renderers
	// put it first and JUnit fails on it. Empty when none (or not verified).
	StoreFindings []string `json:"store_findings"`
	// OutDir is the out directory (the store's directory, absolute) the evidence files are under.
	OutDir string `json:"out_dir"`
	// LinkBase is the directory every Link.Path is relative to: OutDir as Load returns the report,
	// the report file's directory after Rebase. Renderers print Link values as they are.
	LinkBase string `json:"link_base"`
	// Totals are over every case of the report.
	Totals Totals `json:"totals"`
	// Invocations are the CLI invocations the selected runs belong to, the latest first; runs
	// recorded before schema v6 (no invocation id) are grouped in one invocation whose ID is "".
	Invocations []Invocation `json:"invocations"`
	// GroupBy is the axis the cases are also grouped by (Selection.GroupBy: provider, model, task,
	// language, profile, case or repeat); "" when not grouped.
	GroupBy string `json:"group_by"`
	// Groups are every case of the report grouped by GroupBy, keys ascending; empty when not grouped.
	Groups []Group `json:"groups"`
}

// Invocation is one `assay matrix run`, `assay resume` or `assay replay verify` (its runs share
// evidence.Envelope.InvocationID).
type Invocation struct {
	// ID is the invocation id; "" for runs whose envelope recorded none (before schema v6).
	ID string `json:"id"`
	// StartedAt is the earliest run's creation; EndedAt the latest finalization, nil while a run of
	// it is neither finalized nor sealed.
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// WallSeconds is EndedAt - StartedAt; nil when EndedAt is.
	WallSeconds *float64 `json:"wall_seconds"`
	// Providers are the distinct provider identities of its runs (envelope provider and base URL).
	Providers []Provider `json:"providers"`
	// Reference is true when any run used the embedded reference provider (provider "reference",
	// model "assay-reference-1", or no base URL on a run that is not a replay): its results are
	// reference results, not a language model's.
	Reference bool `json:"reference"`
	// Environments are the distinct environment fingerprints of its runs, each with its preimage.
	Environments []Environment `json:"environments"`
	// PolicyDigests are the distinct policy digests (SHA-256 hex) of its runs; "" means no policy.
	PolicyDigests []string `json:"policy_digests"`
	// Modes are the distinct envelope modes (live, dry_run, observe).
	Modes []string `json:"modes"`
	// Totals are over this invocation's cases.
	Totals Totals `json:"totals"`
	// Cases are its runs, failures first (rejected, interrupted, non_certifiable, open, then
	// accepted), then by creation.
	Cases []Case `json:"cases"`
}

// Provider is where a run's responses came from.
type Provider struct {
	// Name is the envelope's provider: "reference" for the embedded reference provider, else the
	// upstream's label (its base URL), "replay" for a replay run's cassette.
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	// Reference marks the embedded reference provider (DESIGN.md): not a language model.
	Reference bool `json:"reference"`
}

// Environment is an environment fingerprint with what it covers.
type Environment struct {
	// Fingerprint is the envelope's environment fingerprint (SHA-256 hex).
	Fingerprint string `json:"fingerprint"`
	// Recorded is true when the run stored the fingerprint's preimage (evidence.EnvironmentArtifact,
	// schema v6 runs); the fields below are then read from it, else empty.
	Recorded bool `json:"recorded"`
	// Matches is whether SHA-256 of the stored preimage equals Fingerprint: nil when no preimage was
	// recorded or it cannot be read (unknown), false when it does not re-derive (the report then
	// says so).
	Matches *bool `json:"matches"`
	// PreimageUnreadable is why the store could not give back the recorded preimage (its payload is
	// missing or does not hash to its digest); "" when it was read or none was recorded. The run's
	// other evidence is reported as usual: one unreadable artifact does not stop a report.
	PreimageUnreadable string `json:"preimage_unreadable,omitempty"`
	// FingerprintVersion is the preimage's definition (1 or 2); 0 when not recorded.
	FingerprintVersion int    `json:"fingerprint_version"`
	AssayVersion       string `json:"assay_version"`
	// Commit, CommitTime and Modified are the build's vcs.revision, vcs.time and vcs.modified;
	// "" / nil when the build did not record them (unknown, not clean).
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time"`
	Modified   *bool  `json:"modified"`
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	// Runs counts the runs recorded under this fingerprint.
	Runs int `json:"runs"`
}

// Totals counts cases and sums what they cost.
type Totals struct {
	// Cases is the number of runs; ByVerdict counts them by verdict ("accepted", "rejected",
	// "non_certifiable") and, for runs without one, by status ("open", "interrupted").
	Cases     int            `json:"cases"`
	ByVerdict map[string]int `json:"by_verdict"`
	// Tokens sums total tokens by usage source (store, wire, gateway). A source whose reading is
	// unknown for any member has Known false and Tokens the sum of the known part only: a renderer
	// shows it as "at least N (some unknown)", never as a complete figure.
	Tokens []SourceTokens `json:"tokens"`
	// WallSeconds sums each case's wall time (creation to finalization) where known; UnknownWall
	// counts cases without one.
	WallSeconds float64 `json:"wall_seconds"`
	UnknownWall int     `json:"unknown_wall"`
}

// SourceTokens is the token total of one usage source.
type SourceTokens struct {
	Source string `json:"source"`
	Tokens int64  `json:"tokens"`
	// Known is false when some member's reading from this source was unknown or absent, and when
	// no member has a reading from it at all (no usage recorded is unknown, never 0 tokens).
	Known bool `json:"known"`
}

// VerificationFailed reports whether the store's recomputation of c's evidence failed: its
// recorded verdict cannot be presented as evidence of anything.
func (c Case) VerificationFailed() bool {
	switch c.Verification {
	case evidence.VerifyOK, evidence.VerifyInterrupted, evidence.VerifyUnfinalized, "":
		return false // "": a Case built without Load, which verifies every case it loads
	}
	return true
}

// DoesNotVerify is the totals key of cases whose evidence does not verify (Case.VerificationFailed).
const DoesNotVerify = "does_not_verify"

// Case is one run: a case of the catalog as one invocation ran it.
type Case struct {
	// Name is the catalog case (e.g. "parallel+vote"); CaseNotRecorded for runs before schema v6.
	Name string `json:"name"`
	// NameRecorded is false when Name is CaseNotRecorded.
	NameRecorded bool   `json:"name_recorded"`
	Formation    string `json:"formation"`
	Profile      string `json:"profile"`
	Language     string `json:"language"`
	RunID        string `json:"run_id"`
	// Kind is "case", "resume" (continues a run from its checkpoint), "replay" (a replay run) or
	// "correction" (a reconciliation's correction run).
	Kind   string `json:"kind"`
	Tenant string `json:"tenant"`
	Mode   string `json:"mode"`
	// Status is the run status (open, finalized, interrupted); Interrupted is true when the run was
	// interrupted (sealed or still open without a writer).
	Status      string `json:"status"`
	Interrupted bool   `json:"interrupted"`
	// Verdict is accepted, rejected or non_certifiable; "" while not finalized. Reasons are the
	// verdict's reasons (failed checks named), in order.
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
	// Verification is the store's own recomputation of the run's evidence when the report was
	// built (evidence.Store.VerifyWith: hash chain, event count, terminal hash, envelope digest,
	// artifacts, bindings): "ok", "interrupted", "unfinalized", or a failure — "tampered",
	// "damaged", "missing_payload", "corrupt_payload". A failed run's recorded verdict is shown
	// with "evidence does not verify", counted as does_not_verify and never passes in JUnit.
	// VerificationDetail says what failed ("" when nothing did).
	Verification       string `json:"verification"`
	VerificationDetail string `json:"verification_detail"`
	// Task is the team task the envelope records ("double"); "" for a run recorded before schema v7
	// (not recorded). Repeat is the repeat index, 1-based; 0 when the run is not a repeat run.
	Task   string `json:"task"`
	Repeat int    `json:"repeat"`
	// TaskFile is the task file the run was bound to, re-read from its stored manifest and
	// task.yaml (full SHA-256, and whether the stored bytes still hash to it).
	TaskFile TaskFile `json:"task_file"`
	// Provider, Model and Reference are the envelope's.
	Provider  string `json:"provider"`
	BaseURL   string `json:"base_url"`
	Model     string `json:"model"`
	Reference bool   `json:"reference"`
	// CreatedAt is when the run was opened; FinalizedAt when finalized or sealed (nil: not).
	CreatedAt   time.Time  `json:"created_at"`
	FinalizedAt *time.Time `json:"finalized_at"`
	// WallSeconds is FinalizedAt - CreatedAt; nil when not finalized.
	WallSeconds *float64 `json:"wall_seconds"`
	// Hashes are full SHA-256 hex values.
	TerminalHash           string `json:"terminal_hash"`
	TerminalVersion        int    `json:"terminal_version"`
	ManifestDigest         string `json:"manifest_digest"`
	EnvelopeDigest         string `json:"envelope_digest"`
	PolicyDigest           string `json:"policy_digest"`
	EnvironmentFingerprint string `json:"environment_fingerprint"`
	EventCount             int64  `json:"event_count"`
	InvocationID           string `json:"invocation_id"`
	// Checks are every acceptance check recorded, by name, with full detail.
	Checks []Check `json:"checks"`
	// Members are the members seen in the run's usage, events and sessions, by member id.
	Members []Member `json:"members"`
	// Phases are the timings derived from the event log, in order; a phase the log does not let
	// the loader derive is present with Seconds nil and Note saying why.
	Phases []Phase `json:"phases"`
	// Approvals are the approvals the run consumed, in order of use.
	Approvals []Approval `json:"approvals"`
	// Reconciliations are the effects in state unknown and how they were reconciled.
	Reconciliations []Reconciliation `json:"reconciliations"`
	// Lineage links this run to others.
	Lineage Lineage `json:"lineage"`
	// Replay is set for a replay run: the run it replays and its replay verdict.
	Replay *ReplayResult `json:"replay"`
	// Links are relative paths (from Report.LinkBase) to evidence files on disk, each existing when
	// the report was built.
	Links []Link `json:"links"`
}

// Check is one acceptance check of a run.
type Check struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	// Status is passed, failed, unknown, skipped, simulated or not_enforced (evidence.Check*).
	Status string `json:"status"`
	// Detail is the check's full detail as recorded (never truncated).
	Detail string `json:"detail"`
	// Evidence is the check's structured evidence rendered readably: one "key: value" line per
	// field, nested values as JSON (never Go map syntax), in the output convention of docs/json.md
	// (snake_case keys, durations in seconds); "" when none.
	Evidence string `json:"evidence_text"`
	// EvidenceJSON is the same evidence as JSON in that convention (internal/jsonconv); the store
	// keeps the recorded bytes. null when the check recorded none.
	EvidenceJSON json.RawMessage `json:"evidence"`
}

// Member is one member of a run.
type Member struct {
	ID string `json:"id"`
	// SessionID is the session id sent on the wire ("" when not recorded).
	SessionID string `json:"session_id"`
	// Usage is one reading per usage source (store, wire, gateway) the run recorded for the member.
	Usage []Usage `json:"usage"`
	// Conservation is the member's usage verdict (conserved, mismatch, unknown); "" when the run
	// recorded none.
	Conservation string `json:"conservation"`
	// ConservationDetail is the usage verdict's detail.
	ConservationDetail string `json:"conservation_detail"`
}

// Usage is one source's token reading for one member. Token fields are nil when that source's
// reading is unknown: unknown is never zero.
type Usage struct {
	Source string `json:"source"`
	// State is the reading's state as recorded (e.g. reported, missing, suspect_zero).
	State            string `json:"state"`
	Requests         *int64 `json:"requests"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	TotalTokens      *int64 `json:"total_tokens"`
}

// Phase is one timed part of a run, derived from its recorded events' timestamps.
type Phase struct {
	// Name is one of "team", "tests", "oracle", "checks", "finalize".
	Name string `json:"name"`
	// Seconds is nil when the event log does not let the loader derive the phase; Note then says why.
	Seconds *float64 `json:"seconds"`
	Note    string   `json:"note"`
}

// Approval is one approval a run consumed.
type Approval struct {
	// Approver is who granted it, as recorded ("" when not recorded).
	Approver string `json:"approver"`
	// PayloadSHA256 is the exact payload's canonical hash the approval is bound to.
	PayloadSHA256 string `json:"payload_sha256"`
	Tool          string `json:"tool"`
	CallID        string `json:"call_id"`
	// At is when it was granted or used; nil when not recorded.
	At *time.Time `json:"at"`
}

// Reconciliation is one effect whose outcome was unknown and what decided it.
type Reconciliation struct {
	IdempotencyKey string `json:"idempotency_key"`
	Tool           string `json:"tool"`
	// Outcome is the reconciled state (succeeded, failed) or "unknown" while unreconciled.
	Outcome string `json:"outcome"`
	// Source is how it was decided ("reconciliation": a receipt; "operator"), "" while unreconciled;
	// RecordedInRunID is the run whose trace holds the decision (this run, or a correction run).
	Source          string `json:"source"`
	RecordedInRunID string `json:"recorded_in_run_id"`
	// Note is the operator's note, when one was given.
	Note string `json:"note"`
}

// Lineage is how a run is linked to others.
type Lineage struct {
	// ResumesRunID is the run this one continues from its checkpoint (run_resumed event);
	// CheckpointSeq the checkpoint's event.
	ResumesRunID  string `json:"resumes_run_id"`
	CheckpointSeq *int64 `json:"checkpoint_seq"`
	// ResumedByRunID is the run that continued this one ("" when none).
	ResumedByRunID string `json:"resumed_by_run_id"`
	// CorrectsRunID is the run this one is linked to (evidence CorrectsRunID); CorrectedBy the runs
	// linked to this one that are neither its resume nor its replays.
	CorrectsRunID string   `json:"corrects_run_id"`
	CorrectedBy   []string `json:"corrected_by"`
	// ReplayedBy are the replay runs of this run, each with its verdict.
	ReplayedBy []ReplayRef `json:"replayed_by"`
}

// ReplayRef is a replay run of a run and its verdict.
type ReplayRef struct {
	RunID string `json:"run_id"`
	// Verdict is exact, within_tolerance, mismatch, refused or non_certifiable; "" when the replay
	// recorded none (it stopped).
	Verdict string `json:"verdict"`
}

// ReplayResult is what a replay run recorded.
type ReplayResult struct {
	ReplaysRunID string `json:"replays_run_id"`
	Tolerance    string `json:"tolerance"`
	// Verdict and Reason as in its replay_verdict event; Verdict "" when it recorded none.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Link is one evidence file of a run on disk.
type Link struct {
	// Label says what it is, e.g. "case directory", "test log exec-1", "oracle report exec-1".
	Label string `json:"label"`
	// Path is relative to Report.LinkBase, with forward slashes.
	Path string `json:"path"`
}

// Selection chooses the runs of a report. With RunIDs, exactly those runs (each must exist);
// otherwise Latest (the runs of the last invocation) or All or Since (runs created at or after it);
// with none of these, Latest. Formations, Cases and Verdicts then keep only runs matching any of
// their values (an empty list keeps all); Cases match Case.Name, Verdicts the verdict or, for runs
// without one, the status.
type Selection struct {
	RunIDs     []string
	Latest     bool
	All        bool
	Since      time.Time
	Formations []string
	Cases      []string
	Verdicts   []string
	// Bindings recompute the records outside the store the runs are bound to (the gateway's usage
	// database, the effect service's receipts: harness.BindingCheckers) when Load verifies the
	// selected runs; nil verifies only their hashes, as part of the terminal hash.
	Bindings []evidence.BindingChecker
	// GroupBy names a GroupAxes axis to group the selected cases by (Report.Groups); "" groups them
	// by invocation only, as always. Load refuses an unknown axis.
	GroupBy string
	// NoVerify skips the store's recomputation of the selected runs (it costs about as much as
	// `assay verify` of them): every case's Verification is then "" and the report says in its
	// header that its verdicts are as recorded, not verified.
	NoVerify bool
}
