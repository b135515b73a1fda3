package evidence

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// finalizationFindings checks a run's status and finalization record
// against its evidence: an open run is live (unfinalized, to its own writer)
// or interrupted; an interrupted run is sealed or waiting for the next writer
// to seal it; a finalized or sealed run has an event count, a verdict, a
// terminal hash and an entry in the finalizations chain that all verify. A
// status that says open or interrupted while anything records a finalization
// is a status change on a finalized run: tampering, not a crash. live
// reports whether the caller is the writer that opened the run.
func finalizationFindings(re *runEvidence, live bool) []finding {
	out := finalizedEventFindings(re)
	s := re.summary
	var last *StatusChange
	if n := len(s.StatusChanges); n > 0 {
		last = &s.StatusChanges[n-1]
	}
	recorded := re.finalizationRecorded()
	switch {
	case re.status == StatusOpen && recorded:
		return append(out, finding{VerifyTampered, "run status is open, but the run was finalized (" + finalizationTraces(re) +
			"): a status change on a finalized run"})
	case re.status == StatusOpen && last != nil:
		return append(out, finding{VerifyTampered, fmt.Sprintf("run status is open, but status change %d says it became %s: %s", len(s.StatusChanges), last.To, last.Reason)})
	case re.status == StatusOpen && live:
		return append(out, finding{VerifyUnfinalized, "run is open, not finalized"})
	case re.status == StatusOpen:
		who := "its writer"
		if w := re.writer; w != nil {
			who = fmt.Sprintf("its writer (session %d)", w.WriterID)
		}
		return append(out, finding{VerifyInterrupted, fmt.Sprintf("interrupted: the run is open but no writer holds the store: %s ended without finalizing it; "+
			"its %d recorded events verify; the next writer seals it", who, re.chain.count)})
	case re.status == StatusInterrupted && (last == nil || last.To != StatusInterrupted):
		return append(out, finding{VerifyTampered, "run is interrupted but no status change records its interruption"})
	case re.status == StatusInterrupted && !recorded:
		return append(out, finding{VerifyInterrupted, fmt.Sprintf("%s at %s, not sealed yet (the next writer seals it); its %d recorded events verify",
			last.Reason, last.At.Format(time.RFC3339), re.chain.count)})
	case re.status != StatusInterrupted && re.status != StatusFinalized:
		return append(out, finding{VerifyTampered, fmt.Sprintf("run status %q is not a status", re.status)})
	}
	// Finalized, or sealed as interrupted.
	actual := re.chain.count
	switch {
	case !re.storedCount.Valid:
		out = append(out, finding{VerifyTampered, "event count missing"})
	case re.storedCount.Int64 != actual:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("event count %d != %d", re.storedCount.Int64, actual)})
	}
	if !re.finalizedAt.Valid {
		out = append(out, finding{VerifyTampered, "finalization time missing"})
	}
	if s.Verdict == nil {
		return append(out, finding{VerifyTampered, "verdict missing"})
	}
	version := s.TerminalVersion
	switch {
	case !re.terminal.Valid:
		out = append(out, finding{VerifyTampered, "terminal hash missing"})
	case version != TerminalV1 && version != TerminalV2 && version != TerminalV3 && version != TerminalV5:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("terminal hash version %d unknown", version)})
	default:
		if th, err := TerminalHash(re.terminalRecord(*s.Verdict, version)); err != nil || th != re.terminal.String {
			out = append(out, finding{VerifyTampered, "terminal hash mismatch"})
		}
	}
	out = append(out, finalizationEntryFindings(re)...)
	if version == TerminalV5 {
		out = append(out, timeFindings(re)...)
	}
	if re.status == StatusInterrupted {
		switch {
		case version != TerminalV5:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run is sealed as interrupted with terminal version %d; seals are version %d", version, TerminalV5)})
		case s.Verdict.Verdict != VerdictRejected || len(s.Verdict.Reasons) == 0 || s.Verdict.Reasons[0] != ReasonInterrupted:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run is sealed as interrupted, but its verdict is %s (%s), not rejected for the reason %q",
				s.Verdict.Verdict, strings.Join(s.Verdict.Reasons, "; "), ReasonInterrupted)})
		}
		sealedBy := "a later writer"
		if re.finalization != nil && re.finalization.WriterID != nil {
			sealedBy = fmt.Sprintf("writer %d", *re.finalization.WriterID)
		}
		out = append(out, finding{VerifyInterrupted, fmt.Sprintf("%s; sealed by %s at %s: rejected, %d events, terminal hash verified",
			last.Reason, sealedBy, re.finalizedAt.Time.UTC().Format(time.RFC3339), actual)})
	}
	if s.Verdict.Verdict == VerdictAccepted {
		// Re-apply Finalize's rules: an accepted verdict the evidence does not
		// support was not written by Finalize.
		if re.status != StatusFinalized {
			out = append(out, finding{VerifyTampered, "verdict accepted on a run that is not finalized"})
		}
		if s.Envelope.Mode != ModeLive {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("verdict accepted contradicts envelope mode %q", s.Envelope.Mode)})
		}
		for _, p := range checkProblems(s.Checks) {
			out = append(out, finding{VerifyTampered, "verdict accepted contradicts " + p})
		}
		if version != TerminalV1 {
			for _, p := range reconcileProblems(re) {
				out = append(out, finding{VerifyTampered, "verdict accepted contradicts: " + p})
			}
		}
	}
	return out
}

// finalizationTraces names what records a finalization of the run.
func finalizationTraces(re *runEvidence) string {
	var parts []string
	if re.terminal.Valid {
		parts = append(parts, "a terminal hash")
	}
	if re.storedCount.Valid {
		parts = append(parts, "an event count")
	}
	if re.finalizedAt.Valid {
		parts = append(parts, "a finalization time")
	}
	if re.summary.Verdict != nil {
		parts = append(parts, "a verdict")
	}
	if re.finalization != nil {
		parts = append(parts, fmt.Sprintf("finalization %d", re.finalization.Ordinal))
	}
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized {
			parts = append(parts, fmt.Sprintf("a run_finalized event (seq %d)", e.seq))
			break
		}
	}
	return strings.Join(parts, ", ")
}

// finalizationEntryFindings compares a finalized or sealed run with its
// entry in the finalizations chain.
func finalizationEntryFindings(re *runEvidence) []finding {
	f := re.finalization
	if f == nil {
		return []finding{{VerifyTampered, "no entry in the finalizations chain records the run's finalization"}}
	}
	var diffs []string
	if f.Status != re.status {
		diffs = append(diffs, fmt.Sprintf("status %s (runs.status %s)", f.Status, re.status))
	}
	if f.TerminalHash != re.terminal.String {
		diffs = append(diffs, "terminal hash")
	}
	if !re.finalizedAt.Valid || !f.FinalizedAt.Equal(re.finalizedAt.Time) {
		diffs = append(diffs, "finalization time (runs.finalized_at)")
	}
	var out []finding
	if len(diffs) > 0 {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d differs from the runs row in %s", f.Ordinal, strings.Join(diffs, ", "))})
	}
	if h, err := FinalizationHash(f.PrevHash, *f); err != nil || h != f.Hash {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d: hash mismatch", f.Ordinal)})
	}
	switch v := re.summary.TerminalVersion; {
	case v == TerminalV5 && f.Backfilled:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d is marked backfilled, but the run was finalized under schema 5", f.Ordinal)})
	case v != TerminalV5 && !f.Backfilled:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d was chained under schema 5, but the run's terminal version is %d, not %d",
			f.Ordinal, v, TerminalV5)})
	}
	return out
}

// timeFindings checks, for a run finalized under terminal version 5, that the
// times other tables record are the ones its hash chain covers:
// runs.finalized_at and verdicts.decided_at are the run_finalized event's
// time, and (for a run its writer admitted under schema 5) each check's
// recorded_at is its check_recorded event's time.
func timeFindings(re *runEvidence) []finding {
	var out []finding
	if re.finalizedAt.Valid && (!re.decidedAt.Valid || !re.decidedAt.Time.Equal(re.finalizedAt.Time)) {
		out = append(out, finding{VerifyTampered, "verdicts.decided_at differs from runs.finalized_at"})
	}
	if !re.chained() {
		return out
	}
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized && re.finalizedAt.Valid && !e.time.Equal(re.finalizedAt.Time) {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("runs.finalized_at differs from the time of its run_finalized event (seq %d)", e.seq)})
		}
	}
	if re.writer == nil || re.writer.Backfilled {
		return out
	}
	for _, e := range re.chain.storeEvents {
		if e.typ != EventCheckRecorded {
			continue
		}
		var p checkRecordedPayload
		if json.Unmarshal([]byte(e.payload), &p) != nil {
			continue
		}
		if at, ok := re.checkTimes[p.Name]; ok && !at.Equal(e.time) {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: recorded_at differs from the time of its check_recorded event (seq %d)", p.Name, e.seq)})
		}
	}
	return out
}
