package evidence

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Check statuses. Only CheckPassed counts towards acceptance; the others say what happened
// instead of claiming a pass.
const (
	CheckPassed  = "passed"
	CheckFailed  = "failed"
	CheckUnknown = "unknown"
	// CheckSimulated: what the check establishes was only simulated (dry_run effects).
	CheckSimulated = "simulated"
	// CheckNotEnforced: the check depended on a policy the run did not enforce (observe mode).
	CheckNotEnforced = "not_enforced"
)

// CheckStatuses returns every check status, in the order above; a new slice on every call.
func CheckStatuses() []string {
	return []string{CheckPassed, CheckFailed, CheckUnknown, CheckSimulated, CheckNotEnforced}
}

// Acceptance verdicts (DESIGN.md vocabulary).
const (
	VerdictAccepted       = "accepted"
	VerdictRejected       = "rejected"
	VerdictNonCertifiable = "non_certifiable"
)

// Check is the result of one independent acceptance check of a run.
type Check struct {
	Name     string          `json:"name"`               // 1..128 chars of [A-Za-z0-9_.:/-], e.g. "files_exist", "tests", "oracle", "sessions", "usage"
	Required bool            `json:"required"`           // whether acceptance requires it to pass
	Status   string          `json:"status"`             // one of CheckStatuses: "passed" | "failed" | "unknown" | "simulated" | "not_enforced"
	Detail   string          `json:"detail"`             // human-readable outcome
	Evidence json.RawMessage `json:"evidence,omitempty"` // optional JSON object; stored in RFC 8785 canonical form
}

// Verdict is an acceptance verdict with its reasons.
type Verdict struct {
	Verdict string   `json:"verdict"` // "accepted" | "rejected" | "non_certifiable"
	Reasons []string `json:"reasons"` // why; for rejected, each required check not passed is named
}

// Finalized is what Finalize fixed: the effective verdict and the trace's
// terminal hash and event count.
type Finalized struct {
	RunID        string
	Verdict      Verdict // the effective verdict, which may be weaker than requested
	EventCount   int64
	TerminalHash string // SHA-256 hex, see TerminalHash
}

func validCheckName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

// RecordCheck records check c for run runID. Each check name is recorded
// once per run: a check result is evidence and is never overwritten. In the
// same transaction it appends a check_recorded event (EventCheckRecorded) to
// the run's hash chain, so the chain — not only the terminal hash — covers
// the check, and Verify compares the checks table with those events.
//
// Errors: *FieldError (ErrInvalidArgument) naming "name", "status", "detail"
// or "evidence" (not a JSON object); ErrCheckExists; ErrNoRun; ErrFinalized;
// ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) RecordCheck(ctx context.Context, runID string, c Check) error {
	if !validCheckName(c.Name) {
		return fieldErr(ErrInvalidArgument, "name", "%q is not 1..128 chars of [A-Za-z0-9_.:/-]", c.Name)
	}
	if !slices.Contains(CheckStatuses(), c.Status) {
		return fieldErr(ErrInvalidArgument, "status", "%q is not one of %s", c.Status, strings.Join(CheckStatuses(), ", "))
	}
	if !utf8.ValidString(c.Detail) {
		return fieldErr(ErrInvalidArgument, "detail", "not valid UTF-8")
	}
	var evidence any
	if len(bytes.TrimSpace(c.Evidence)) > 0 {
		canon, reason := canonicalObject(c.Evidence)
		if reason != "" {
			return fieldErr(ErrInvalidArgument, "evidence", "%s", reason)
		}
		evidence = string(canon)
	}
	if err := s.beginWrite(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: record check %s in run %s: %w", c.Name, runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM checks WHERE run_id = ? AND name = ?`, runID, c.Name).Scan(&n); err != nil {
		return fmt.Errorf("evidence: record check %s in run %s: %w", c.Name, runID, err)
	}
	if n > 0 {
		return fmt.Errorf("evidence: run %s check %s: %w", runID, c.Name, ErrCheckExists)
	}
	// The row's recorded_at is its check_recorded event's time, which the
	// run's hash chain covers.
	now := utcMicro(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO checks (run_id, name, required, status, detail, evidence, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, runID, c.Name, c.Required, c.Status, c.Detail, evidence, now); err != nil {
		return fmt.Errorf("evidence: record check %s in run %s: %w", c.Name, runID, err)
	}
	stored := c
	stored.Evidence = nil
	if evidence != nil {
		stored.Evidence = json.RawMessage(evidence.(string))
	}
	_, head, err := s.appendStoreEvent(ctx, tx, runID, EventCheckRecorded, checkRecordedOf(stored), now)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: record check %s in run %s: %w", c.Name, runID, err)
	}
	s.chains[runID] = head
	return nil
}

// checkRecordedPayload is the payload of an EventCheckRecorded event: what
// the run's hash chain says about one row of the checks table.
type checkRecordedPayload struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Status   string `json:"status"`
	// DetailSHA256 is the SHA-256 hex of the detail's UTF-8 bytes.
	DetailSHA256 string `json:"detail_sha256"`
	// EvidenceSHA256 is the SHA-256 hex of the stored (canonical) evidence
	// JSON; nil when the check has no evidence.
	EvidenceSHA256 *string `json:"evidence_sha256"`
}

// checkRecordedOf is the check_recorded payload of c as stored (Evidence in
// the canonical form the checks table holds).
func checkRecordedOf(c Check) checkRecordedPayload {
	p := checkRecordedPayload{Name: c.Name, Required: c.Required, Status: c.Status, DetailSHA256: sha256Hex([]byte(c.Detail))}
	if len(c.Evidence) > 0 {
		d := sha256Hex(c.Evidence)
		p.EvidenceSHA256 = &d
	}
	return p
}

// runFinalizedPayload is the payload of an EventRunFinalized event: the
// verdicts row as Finalize wrote it and (schema v5) the status the run was
// finalized with: finalized, or interrupted for a sealed run.
type runFinalizedPayload struct {
	Verdict          string   `json:"verdict"`
	RequestedVerdict string   `json:"requested_verdict"`
	Reasons          []string `json:"reasons"`
	Status           string   `json:"status,omitempty"`
}

// checkProblems names why checks do not support acceptance: each required
// check not passed, or the absence of any (required) check. nil means every
// required check passed and there is at least one.
func checkProblems(checks []Check) []string {
	if len(checks) == 0 {
		return []string{"no checks recorded"}
	}
	var problems []string
	required := 0
	for _, c := range checks {
		if !c.Required {
			continue
		}
		required++
		if c.Status != CheckPassed {
			problems = append(problems, fmt.Sprintf("required check %s %s", c.Name, c.Status))
		}
	}
	if required == 0 {
		problems = append(problems, "no required checks recorded")
	}
	return problems
}

// decideVerdict applies the acceptance rules: a run whose mode is not live is
// non_certifiable; a requested acceptance becomes rejected when its evidence
// does not verify or reconcile (problems), or unless at least one required
// check was recorded and every required check passed; a requested rejection
// or non_certifiable verdict is kept. Reasons keep the caller's, plus each
// rule that applied.
func decideVerdict(mode string, checks []Check, problems []string, req Verdict) Verdict {
	var reasons []string
	seen := map[string]bool{}
	add := func(rs ...string) {
		for _, r := range rs {
			if !seen[r] {
				seen[r] = true
				reasons = append(reasons, r)
			}
		}
	}
	checkProbs := checkProblems(checks)
	verdict := req.Verdict
	switch {
	case mode != ModeLive:
		verdict = VerdictNonCertifiable
		add(fmt.Sprintf("envelope mode %q cannot certify (only live can)", mode))
	case req.Verdict == VerdictAccepted && (len(problems) > 0 || len(checkProbs) > 0):
		verdict = VerdictRejected
	}
	add(problems...)
	add(req.Reasons...)
	if verdict == VerdictRejected {
		add(checkProbs...)
	}
	if reasons == nil {
		reasons = []string{}
	}
	return Verdict{Verdict: verdict, Reasons: reasons}
}

// Finalize makes run runID immutable and records its verdict, event count and
// terminal hash (see TerminalHash, version TerminalV5), and chains the
// finalization into the store-wide finalizations chain. Before computing the
// terminal hash it appends a run_finalized event (EventRunFinalized: the
// effective verdict, the requested one, the reasons and the status) as the
// run's last event, so the verdict is in the run's own hash chain; the run's
// finalized_at and its verdict's decided_at are that event's time.
//
// The store decides the effective verdict itself (see the returned
// Finalized.Verdict): a run whose envelope mode is not "live" becomes
// "non_certifiable"; a requested "accepted" becomes "rejected" when the
// run's hash chain, envelope digest, admission, artifacts or checkpoints do
// not verify or a check disagrees with its check_recorded event, when its
// evidence does not reconcile (an event references an artifact not linked to
// the run; usage recorded but not reconciled, or a stored usage verdict its
// recorded usage does not support), or — with reasons naming each required
// check not passed, or "no checks recorded" — unless at least one required
// check was recorded and every required check passed. A run is never
// accepted on weaker evidence than that.
//
// Errors: *FieldError (ErrInvalidArgument) for an unknown verdict; ErrNoRun;
// ErrFinalized (already finalized); ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) Finalize(ctx context.Context, runID string, v Verdict) (Finalized, error) {
	if v.Verdict != VerdictAccepted && v.Verdict != VerdictRejected && v.Verdict != VerdictNonCertifiable {
		return Finalized{}, fieldErr(ErrInvalidArgument, "verdict", "%q is not one of accepted, rejected, non_certifiable", v.Verdict)
	}
	for i, r := range v.Reasons {
		if !utf8.ValidString(r) {
			return Finalized{}, fieldErr(ErrInvalidArgument, fmt.Sprintf("reasons[%d]", i), "not valid UTF-8")
		}
	}
	if err := s.beginWrite(ctx); err != nil {
		return Finalized{}, err
	}
	defer s.mu.Unlock()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return Finalized{}, fmt.Errorf("evidence: finalize run %s: %w", runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return Finalized{}, err
	}
	re, err := s.loadRunEvidence(ctx, tx, runID)
	if err != nil {
		return Finalized{}, err
	}
	integrity, err := s.integrityFindings(ctx, tx, re)
	if err != nil {
		return Finalized{}, err
	}
	var problems []string
	for _, f := range integrity {
		problems = append(problems, "evidence does not verify: "+f.detail)
	}
	for _, p := range reconcileProblems(re) {
		problems = append(problems, "evidence does not reconcile: "+p)
	}
	effective := decideVerdict(re.summary.Envelope.Mode, re.summary.Checks, problems, v)
	fin, err := s.fixFinalization(ctx, tx, re, v.Verdict, effective, StatusFinalized)
	if err != nil {
		return Finalized{}, err
	}
	if err := tx.Commit(); err != nil {
		return Finalized{}, fmt.Errorf("evidence: finalize run %s: %w", runID, err)
	}
	delete(s.chains, runID) // immutable now: nothing appends to it again
	return fin, nil
}

// fixFinalization makes the run of re immutable inside tx: it appends the
// run_finalized event recording effective, requested and status (not for a
// run admitted before schema 3, whose chain never carries store events),
// sets runs.finalized_at and verdicts.decided_at to that event's time,
// records the verdict, computes the terminal hash (version 5) and chains it
// into finalizations. status is StatusFinalized (Finalize) or
// StatusInterrupted (a seal, which leaves the status as it is).
func (s *Store) fixFinalization(ctx context.Context, tx *sql.Tx, re *runEvidence, requested string, effective Verdict, status string) (Finalized, error) {
	runID := re.summary.RunID
	at := utcMicro(time.Now())
	if re.chained() {
		// The verdict enters the run's own hash chain as its last event, so
		// the verdicts row cannot be changed by recomputing the terminal hash
		// alone.
		fe, _, err := s.appendStoreEvent(ctx, tx, runID, EventRunFinalized,
			runFinalizedPayload{Verdict: effective.Verdict, RequestedVerdict: requested, Reasons: effective.Reasons, Status: status}, at)
		if err != nil {
			return Finalized{}, err
		}
		re.chain.count++
		re.chain.lastHash, re.chain.maxSeq = fe.Hash, fe.Seq
	}
	rec := re.terminalRecord(effective, TerminalV5)
	rec.Status, rec.FinalizedAt, rec.RequestedVerdict = status, at, requested
	terminal, err := TerminalHash(rec)
	if err != nil {
		return Finalized{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, finalized_at = ?, event_count = ?, terminal_hash = ?,
		terminal_version = ? WHERE run_id = ?`, status, at, rec.EventCount, terminal, TerminalV5, runID); err != nil {
		return Finalized{}, fmt.Errorf("evidence: finalize run %s: %w", runID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO verdicts (run_id, verdict, requested_verdict, reasons, decided_at) VALUES (?, ?, ?, ?, ?)`,
		runID, effective.Verdict, requested, effective.Reasons, at); err != nil {
		return Finalized{}, fmt.Errorf("evidence: finalize run %s: record verdict: %w", runID, err)
	}
	wid := s.writerID
	if _, err := appendFinalization(ctx, tx, Finalization{RunID: runID, Status: status, TerminalHash: terminal, WriterID: &wid, FinalizedAt: at}); err != nil {
		return Finalized{}, err
	}
	return Finalized{RunID: runID, Verdict: effective, EventCount: rec.EventCount, TerminalHash: terminal}, nil
}

// ReasonInterrupted is the first reason of the verdict of a sealed run: a
// run its writer left unfinished, finalized rejected by the next writer.
const ReasonInterrupted = "interrupted"

// sealInterrupted finalizes the interrupted run runID inside tx (startWriter):
// verdict rejected, reasons "interrupted", why, and what of its evidence does
// not verify; status stays interrupted. Must be called with s.mu held and
// s.writerID set.
func (s *Store) sealInterrupted(ctx context.Context, tx *sql.Tx, runID, why string) error {
	re, err := s.loadRunEvidence(ctx, tx, runID)
	if err != nil {
		return err
	}
	integrity, err := s.integrityFindings(ctx, tx, re)
	if err != nil {
		return err
	}
	reasons := []string{ReasonInterrupted, why}
	for _, f := range integrity {
		reasons = append(reasons, "evidence does not verify: "+f.detail)
	}
	effective := Verdict{Verdict: VerdictRejected, Reasons: reasons}
	if _, err := s.fixFinalization(ctx, tx, re, VerdictRejected, effective, StatusInterrupted); err != nil {
		return fmt.Errorf("evidence: seal interrupted run %s: %w", runID, err)
	}
	delete(s.chains, runID)
	return nil
}
