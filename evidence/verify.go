package evidence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Verification statuses, most severe first.
const (
	VerifyTampered       = "tampered"        // hash chain, sequence, event count, envelope or terminal hash does not verify
	VerifyCorruptPayload = "corrupt_payload" // an artifact's payload no longer hashes to its digest
	VerifyMissingPayload = "missing_payload" // an artifact's payload is gone
	VerifyUnfinalized    = "unfinalized"     // the evidence verifies so far, but the run is not finalized
	VerifyOK             = "ok"              // finalized and everything verifies
)

// RunVerification is Verify's finding for one run. Status is the most severe
// finding; Detail lists every finding.
type RunVerification struct {
	RunID       string
	Status      string // "ok" | "tampered" | "unfinalized" | "missing_payload" | "corrupt_payload"
	FirstBadSeq int64  // first sequence number whose hash (or sequence) does not verify; 0 when n/a
	Detail      string // what failed, e.g. "event 3: hash mismatch; terminal hash mismatch; event count 5 != 6"
}

func severity(status string) int {
	switch status {
	case VerifyTampered:
		return 4
	case VerifyCorruptPayload:
		return 3
	case VerifyMissingPayload:
		return 2
	case VerifyUnfinalized:
		return 1
	}
	return 0
}

type finding struct {
	status string
	detail string
}

// runEvidence is everything stored about one run, as read for verification.
type runEvidence struct {
	summary     RunSummary
	events      []StoredEvent
	status      string
	storedCount sql.NullInt64
	terminal    sql.NullString
	finalizedAt sql.NullTime
	hasEnvelope bool
}

func loadRunEvidence(ctx context.Context, q queryer, runID string) (*runEvidence, error) {
	re := &runEvidence{}
	err := q.QueryRowContext(ctx, `SELECT status, event_count, terminal_hash, finalized_at,
			(SELECT count(*) FROM envelopes e WHERE e.run_id = r.run_id) > 0
		FROM runs r WHERE run_id = ?`, runID).Scan(&re.status, &re.storedCount, &re.terminal, &re.finalizedAt, &re.hasEnvelope)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: load run %s: %w", runID, err)
	}
	runs, err := loadRuns(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	if len(runs) != 1 {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	re.summary = runs[0]
	if re.events, err = loadEvents(ctx, q, runID); err != nil {
		return nil, err
	}
	return re, nil
}

// lastHash is the stored hash of the last event, ZeroHash for an empty trace.
func (re *runEvidence) lastHash() string {
	if len(re.events) == 0 {
		return ZeroHash
	}
	return re.events[len(re.events)-1].Hash
}

func (re *runEvidence) terminalRecord(v Verdict) TerminalRecord {
	return TerminalRecord{
		RunID:          re.summary.RunID,
		CorrectsRunID:  re.summary.CorrectsRunID,
		EnvelopeDigest: re.summary.EnvelopeDigest,
		LastEventHash:  re.lastHash(),
		EventCount:     int64(len(re.events)),
		Artifacts:      re.summary.Artifacts,
		Checks:         re.summary.Checks,
		Usage:          re.summary.Usage,
		UsageVerdicts:  re.summary.UsageVerdicts,
		Verdict:        v,
	}
}

// verifyChain recomputes the hash chain and sequence continuity. It returns
// the first bad seq (0 when the chain verifies) and what failed there.
func verifyChain(events []StoredEvent) (int64, string) {
	prev := ZeroHash
	for i, e := range events {
		want := int64(i + 1)
		switch {
		case e.Seq > want:
			return want, fmt.Sprintf("event %d: missing (sequence gap, next stored seq is %d)", want, e.Seq)
		case e.Seq < want:
			return want, fmt.Sprintf("event %d: duplicate or out-of-order seq %d", want, e.Seq)
		case e.PrevHash != prev:
			return want, fmt.Sprintf("event %d: prev_hash does not link to event %d", want, want-1)
		case e.Parent < 0 || e.Parent >= e.Seq:
			return want, fmt.Sprintf("event %d: parent %d is not an earlier event", want, e.Parent)
		}
		h, err := EventHash(prev, e)
		if err != nil {
			return want, fmt.Sprintf("event %d: cannot recompute hash: %v", want, err)
		}
		if h != e.Hash {
			return want, fmt.Sprintf("event %d: hash mismatch", want)
		}
		prev = h
	}
	return 0, ""
}

// integrityFindings checks what must hold for any run, finalized or not: the
// envelope digest, the hash chain and the artifact payloads.
func (s *Store) integrityFindings(ctx context.Context, q queryer, re *runEvidence) ([]finding, error) {
	var out []finding
	if !re.hasEnvelope {
		out = append(out, finding{VerifyTampered, "envelope missing"})
	} else if d, err := re.summary.Envelope.Digest(); err != nil || d != re.summary.EnvelopeDigest {
		out = append(out, finding{VerifyTampered, "envelope digest mismatch"})
	}
	if seq, detail := verifyChain(re.events); seq != 0 {
		out = append(out, finding{VerifyTampered, detail})
	}
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

// finalizationFindings checks a run's finalization record against its evidence.
func finalizationFindings(re *runEvidence) []finding {
	var out []finding
	s := re.summary
	if re.status != StatusFinalized {
		if re.terminal.Valid || re.storedCount.Valid || re.finalizedAt.Valid || s.Verdict != nil {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run status is %s but it carries a finalization record", re.status)})
		}
		return append(out, finding{VerifyUnfinalized, fmt.Sprintf("run is %s, not finalized", re.status)})
	}
	actual := int64(len(re.events))
	switch {
	case !re.storedCount.Valid:
		out = append(out, finding{VerifyTampered, "event count missing"})
	case re.storedCount.Int64 != actual:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("event count %d != %d", re.storedCount.Int64, actual)})
	}
	if s.Verdict == nil {
		out = append(out, finding{VerifyTampered, "verdict missing"})
		return out
	}
	if !re.terminal.Valid {
		out = append(out, finding{VerifyTampered, "terminal hash missing"})
	} else if th, err := TerminalHash(re.terminalRecord(*s.Verdict)); err != nil || th != re.terminal.String {
		out = append(out, finding{VerifyTampered, "terminal hash mismatch"})
	}
	if s.Verdict.Verdict == VerdictAccepted {
		// Re-apply Finalize's rules: an accepted verdict the evidence does not
		// support was not written by Finalize.
		if s.Envelope.Mode != ModeLive {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("verdict accepted contradicts envelope mode %q", s.Envelope.Mode)})
		}
		for _, p := range checkProblems(s.Checks) {
			out = append(out, finding{VerifyTampered, "verdict accepted contradicts " + p})
		}
	}
	return out
}

// Verify recomputes each named run's (every run's, in creation order, when
// none is named) envelope digest, hash chain, sequence continuity, event
// count, terminal hash, verdict consistency and artifact digests, and reports
// one RunVerification per run. It works on a read-only store and changes
// nothing.
//
// Detection is against accidental corruption and against edits that do not
// also recompute every downstream hash: the hashes are unkeyed, so someone
// able to rewrite the whole file consistently is out of its reach.
//
// Errors: ErrNoRun when a named run does not exist; ErrClosed; database errors.
func (s *Store) Verify(ctx context.Context, runIDs ...string) ([]RunVerification, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if len(runIDs) == 0 {
		rows, err := s.db.QueryContext(ctx, `SELECT run_id FROM runs ORDER BY ordinal`)
		if err != nil {
			return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
			}
			runIDs = append(runIDs, id)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
		}
	}
	out := make([]RunVerification, 0, len(runIDs))
	for _, id := range runIDs {
		v, err := s.verifyRun(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Store) verifyRun(ctx context.Context, runID string) (RunVerification, error) {
	re, err := loadRunEvidence(ctx, s.db, runID)
	if err != nil {
		return RunVerification{}, err
	}
	findings, err := s.integrityFindings(ctx, s.db, re)
	if err != nil {
		return RunVerification{}, err
	}
	findings = append(findings, finalizationFindings(re)...)
	v := RunVerification{RunID: runID, Status: VerifyOK}
	v.FirstBadSeq, _ = verifyChain(re.events)
	var details []string
	for _, f := range findings {
		if severity(f.status) > severity(v.Status) {
			v.Status = f.status
		}
		details = append(details, f.detail)
	}
	if len(details) == 0 {
		v.Detail = fmt.Sprintf("%d events, %d artifacts, terminal hash verified", len(re.events), len(re.summary.Artifacts))
	} else {
		v.Detail = strings.Join(details, "; ")
	}
	return v, nil
}
