package evidence

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// checkEventFindings compares the checks table of a run admitted under
// schema v3 with the check_recorded events RecordCheck chained for it: each
// row needs exactly one event recording the same name, required flag,
// status, detail digest and evidence digest, and each event a row.
func checkEventFindings(re *runEvidence) []finding {
	var out []finding
	recorded := map[string][]int64{}
	payloads := map[int64]checkRecordedPayload{}
	for _, e := range re.chain.storeEvents {
		if e.typ != EventCheckRecorded {
			continue
		}
		var p checkRecordedPayload
		if err := json.Unmarshal([]byte(e.payload), &p); err != nil || p.Name == "" {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("event %d: check_recorded payload does not name a check", e.seq)})
			continue
		}
		recorded[p.Name] = append(recorded[p.Name], e.seq)
		payloads[e.seq] = p
	}
	rows := map[string]bool{}
	for _, c := range re.summary.Checks {
		rows[c.Name] = true
		seqs := recorded[c.Name]
		switch len(seqs) {
		case 0:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: no check_recorded event records it (not written by RecordCheck)", c.Name)})
			continue
		case 1:
		default:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: %d check_recorded events (seqs %v) record it", c.Name, len(seqs), seqs)})
			continue
		}
		got, want := payloads[seqs[0]], checkRecordedOf(c)
		var diffs []string
		if got.Status != want.Status {
			diffs = append(diffs, fmt.Sprintf("status %s but its check_recorded event (seq %d) says %s", want.Status, seqs[0], got.Status))
		}
		if got.Required != want.Required {
			diffs = append(diffs, fmt.Sprintf("required %v but its check_recorded event (seq %d) says %v", want.Required, seqs[0], got.Required))
		}
		if got.DetailSHA256 != want.DetailSHA256 {
			diffs = append(diffs, fmt.Sprintf("detail differs from the one its check_recorded event (seq %d) recorded", seqs[0]))
		}
		if !equalDigest(got.EvidenceSHA256, want.EvidenceSHA256) {
			diffs = append(diffs, fmt.Sprintf("evidence differs from the one its check_recorded event (seq %d) recorded", seqs[0]))
		}
		for _, d := range diffs {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: %s", c.Name, d)})
		}
	}
	var gone []string
	for name := range recorded {
		if !rows[name] {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: its check_recorded event (seq %d) has no row in checks: the row was deleted",
			name, recorded[name][0])})
	}
	return out
}

// backfilledEventFindings reports store-written events in a run admitted
// before schema v3: the store never wrote them then (and the migration
// refuses a v2 file holding events of those types), so they mean the run's
// admission was re-marked as backfilled to escape the comparisons above.
func backfilledEventFindings(re *runEvidence) []finding {
	if len(re.chain.storeEvents) == 0 {
		return nil
	}
	e := re.chain.storeEvents[0]
	return []finding{{VerifyTampered, fmt.Sprintf("event %d is a %s event, which the store writes only for runs admitted under schema 3, but the run's admission is marked backfilled",
		e.seq, e.typ)}}
}

func equalDigest(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// finalizedEventFindings checks a finalized or sealed run's run_finalized
// events (finalizationFindings reports one on a run that is neither): for a
// run admitted under schema v3 or later, terminal version 3 or 5 and exactly
// one run_finalized event, the last of the trace, recording the verdicts row
// (verdict, requested verdict, reasons) and, under version 5, the run's
// status; for a run admitted before v3 (backfilled), no terminal version 3,
// and version 5 only for a seal.
func finalizedEventFindings(re *runEvidence) []finding {
	if re.status != StatusFinalized && !re.sealed() {
		return nil
	}
	var events []storeEvent
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized {
			events = append(events, e)
		}
	}
	version := re.summary.TerminalVersion
	if !re.chained() {
		if version == TerminalV3 || (version == TerminalV5 && re.status != StatusInterrupted) {
			return []finding{{VerifyTampered, fmt.Sprintf("terminal version %d on a run admitted before schema 3 (its admission is backfilled)", version)}}
		}
		return nil
	}
	var out []finding
	if version != TerminalV3 && version != TerminalV5 {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("terminal version %d, but the run was admitted under schema 3 or later, which finalizes with terminal version %d or %d",
			version, TerminalV3, TerminalV5)})
	}
	switch len(events) {
	case 0:
		return append(out, finding{VerifyTampered, "no run_finalized event records the verdict"})
	case 1:
	default:
		return append(out, finding{VerifyTampered, fmt.Sprintf("%d run_finalized events record a verdict", len(events))})
	}
	e := events[0]
	if e.seq != re.chain.maxSeq {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("run_finalized event (seq %d) is not the last event (seq %d): events were added after finalization", e.seq, re.chain.maxSeq)})
	}
	var p runFinalizedPayload
	if err := json.Unmarshal([]byte(e.payload), &p); err != nil {
		return append(out, finding{VerifyTampered, fmt.Sprintf("event %d: run_finalized payload is malformed", e.seq)})
	}
	if version == TerminalV5 && p.Status != re.status {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("run status is %s but its run_finalized event (seq %d) says %s", re.status, e.seq, p.Status)})
	}
	v := re.summary.Verdict
	if v == nil {
		return out // "verdict missing" is reported by finalizationFindings
	}
	if v.Verdict != p.Verdict {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("verdict %s but its run_finalized event (seq %d) says %s", v.Verdict, e.seq, p.Verdict)})
	}
	if re.requested.String != p.RequestedVerdict {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("requested verdict %s but its run_finalized event (seq %d) says %s", re.requested.String, e.seq, p.RequestedVerdict)})
	}
	if !slices.Equal(v.Reasons, p.Reasons) && !(len(v.Reasons) == 0 && len(p.Reasons) == 0) {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("verdict reasons differ from those its run_finalized event (seq %d) recorded", e.seq)})
	}
	return out
}
