package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// integrityFindings checks what must hold for any run, finalized or not: the
// envelope digest, the run's admission, the hash chain, the checks table
// against the chained check_recorded events, checkpoints and the artifact
// payloads.
func (s *Store) integrityFindings(ctx context.Context, q queryer, re *runEvidence) ([]finding, error) {
	var out []finding
	if !re.hasEnvelope {
		out = append(out, finding{VerifyTampered, "envelope missing"})
	} else if d, err := re.summary.Envelope.Digest(); err != nil || d != re.summary.EnvelopeDigest {
		out = append(out, finding{VerifyTampered, "envelope digest mismatch"})
	}
	out = append(out, admissionFindings(re)...)
	if re.chain.firstBad != 0 {
		out = append(out, finding{VerifyTampered, re.chain.detail})
	}
	if re.chained() {
		out = append(out, checkEventFindings(re)...)
	} else {
		out = append(out, backfilledEventFindings(re)...)
	}
	cps, err := checkpointFindings(ctx, q, re)
	if err != nil {
		return nil, err
	}
	out = append(out, cps...)
	checked := map[string]error{}
	for _, l := range re.summary.Artifacts {
		err, done := checked[l.Digest]
		if !done {
			_, err = s.readArtifact(ctx, q, l.Digest)
			checked[l.Digest] = err
		}
		if err == nil {
			continue
		}
		var ae *ArtifactError
		switch {
		case errors.As(err, &ae) && errors.Is(err, ErrArtifactCorrupt):
			out = append(out, finding{VerifyCorruptPayload, fmt.Sprintf("artifact %s: %v", l.Name, err)})
		case errors.As(err, &ae):
			out = append(out, finding{VerifyMissingPayload, fmt.Sprintf("artifact %s: %v", l.Name, err)})
		default:
			return nil, err
		}
	}
	return out, nil
}

// checkpointFindings recomputes each checkpoint's hash from its stored state
// and checks the event it follows still has the hash recorded with it.
func checkpointFindings(ctx context.Context, q queryer, re *runEvidence) ([]finding, error) {
	rows, err := q.QueryContext(ctx, `SELECT c.seq, CAST(c.state AS VARCHAR), c.hash, coalesce(c.event_hash, ''),
			CASE WHEN c.seq = 0 THEN ? ELSE e.hash END
		FROM checkpoints c LEFT JOIN events e ON e.run_id = c.run_id AND e.seq = c.seq
		WHERE c.run_id = ? ORDER BY c.seq`, ZeroHash, re.summary.RunID)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify checkpoints of run %s: %w", re.summary.RunID, err)
	}
	defer rows.Close()
	var out []finding
	for rows.Next() {
		var seq int64
		var state, hash, eventHash string
		var current sql.NullString
		if err := rows.Scan(&seq, &state, &hash, &eventHash, &current); err != nil {
			return nil, fmt.Errorf("evidence: verify checkpoints of run %s: %w", re.summary.RunID, err)
		}
		if h, err := CheckpointHash(re.summary.RunID, seq, eventHash, re.summary.EnvelopeDigest, json.RawMessage(state)); err != nil || h != hash {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("checkpoint after event %d: hash mismatch", seq)})
		} else if current.String != eventHash {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("checkpoint after event %d: the event it follows has changed", seq)})
		}
	}
	return out, rows.Err()
}

// reconcileProblems names where a run's events, artifacts and usage do not
// reconcile with each other (evidence that verifies byte for byte but does
// not describe one consistent history): an event payload referencing (under
// a key "artifact" or "*_artifact") an artifact digest not linked to the run;
// usage recorded for a session without a usage verdict; a stored usage
// verdict that differs from what the run's recorded usage reconciles to.
func reconcileProblems(re *runEvidence) []string {
	var out []string
	linked := map[string]bool{}
	for _, l := range re.summary.Artifacts {
		linked[l.Digest] = true
	}
	var digests []string
	for d := range re.chain.refs {
		if !linked[d] {
			digests = append(digests, d)
		}
	}
	sort.Strings(digests)
	for _, d := range digests {
		out = append(out, fmt.Sprintf("event %d references artifact sha256:%s, which is not linked to the run", re.chain.refs[d][0], d))
	}
	recomputed := ReconcileUsageCalls(re.summary.UsageCalls, re.summary.Usage)
	stored := map[string]UsageVerdict{}
	for _, v := range re.summary.UsageVerdicts {
		stored[v.SessionID] = v
	}
	for _, rv := range recomputed {
		sv, ok := stored[rv.SessionID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("usage of session %s recorded but never reconciled", rv.SessionID))
		case sv.Verdict != rv.Verdict:
			out = append(out, fmt.Sprintf("usage verdict of session %s is %s but its recorded usage reconciles to %s", rv.SessionID, sv.Verdict, rv.Verdict))
		}
	}
	return out
}

// verifyRun verifies one run, reading what pre does not hold; store holds the store-wide findings about it
// (its place in the admissions and finalizations chains) and damage the
// damage scan found that concerns it.
func (s *Store) verifyRun(ctx context.Context, runID string, pre runReads, store []finding, damage []string, req VerifyRequest,
	checkers map[string]BindingChecker) (RunVerification, error) {
	re, err := s.loadRunEvidenceWith(ctx, s.conn, runID, pre)
	if err != nil {
		return RunVerification{}, err
	}
	findings, err := s.integrityFindings(ctx, s.conn, re)
	if err != nil {
		return RunVerification{}, err
	}
	for _, d := range damage {
		findings = append(findings, finding{VerifyDamaged, d})
	}
	findings = append(findings, store...)
	live := s.writerID != 0 && re.summary.WriterID == s.writerID
	findings = append(findings, finalizationFindings(re, live)...)
	bf, notes, err := s.bindingFindings(ctx, re, req.Bindings != nil, checkers)
	if err != nil {
		return RunVerification{}, err
	}
	findings = append(findings, bf...)
	if req.WorkingCopy != nil {
		notes = append(notes, s.workingCopyNotes(ctx, re, req.WorkingCopy)...)
	}
	v := RunVerification{RunID: runID, Status: VerifyOK, Events: re.chain.count, TerminalHash: re.terminal.String, Notes: notes}
	v.FirstBadSeq = re.chain.firstBad
	var details []string
	for _, f := range findings {
		if severity(f.status) > severity(v.Status) {
			v.Status = f.status
		}
		details = append(details, f.detail)
	}
	if len(details) == 0 {
		v.Detail = fmt.Sprintf("%d events, %d artifacts, terminal hash verified", re.chain.count, len(re.summary.Artifacts))
	} else {
		v.Detail = strings.Join(details, "; ")
	}
	return v, nil
}
