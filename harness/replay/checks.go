package replay

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/event"
)

// compareChecks compares the recorded checks and verdict of run with the re-derived ones: a check
// whose status or requiredness differs, one on one side only, or another verdict is a divergence
// on the verdict, naming the check. Details are kept side by side; they carry measurements (a
// window's request count, a test's time) and do not decide acceptance.
func compareChecks(run evidence.RunSummary, rederived []evidence.Check, verdict evidence.Verdict) ([]event.ReplayCheck, []divergence) {
	byName := map[string]evidence.Check{}
	for _, c := range rederived {
		byName[c.Name] = c
	}
	var out []event.ReplayCheck
	var divs []divergence
	seen := map[string]bool{}
	add := func(name string, was, now *evidence.Check) {
		rc := event.ReplayCheck{Name: name}
		if was != nil {
			rc.RecordedRequired, rc.RecordedStatus, rc.RecordedDetail = was.Required, was.Status, was.Detail
		}
		if now != nil {
			rc.RederivedRequired, rc.RederivedStatus, rc.RederivedDetail = now.Required, now.Status, now.Detail
		}
		out = append(out, rc)
		if rc.RecordedStatus != rc.RederivedStatus || rc.RecordedRequired != rc.RederivedRequired {
			field, a, b := "/status", rc.RecordedStatus, rc.RederivedStatus
			if rc.RecordedStatus == rc.RederivedStatus {
				field, a, b = "/required", fmt.Sprint(rc.RecordedRequired), fmt.Sprint(rc.RederivedRequired)
			}
			divs = append(divs, divergence{order: 1<<63 - 1, rank: rankVerdict, d: event.ReplayDivergence{RunID: run.RunID, Check: name,
				Pointer: field, Recorded: quoteOrNull(a, was != nil), Replayed: quoteOrNull(b, now != nil),
				Detail: fmt.Sprintf("check %s: recorded %s, re-derived %s (%s)", name, labelEmpty(rc.RecordedStatus), labelEmpty(rc.RederivedStatus), clipText(rc.RederivedDetail))}})
		}
	}
	for i := range run.Checks {
		c := run.Checks[i]
		seen[c.Name] = true
		now, ok := byName[c.Name]
		if ok {
			add(c.Name, &c, &now)
		} else {
			add(c.Name, &c, nil)
		}
	}
	for _, c := range rederived {
		if !seen[c.Name] {
			c := c
			add(c.Name, nil, &c)
		}
	}
	recorded := ""
	if run.Verdict != nil {
		recorded = run.Verdict.Verdict
	}
	if recorded != verdict.Verdict {
		divs = append(divs, divergence{order: 1<<63 - 1, rank: rankVerdict, d: event.ReplayDivergence{RunID: run.RunID, Check: "verdict",
			Pointer: "/verdict", Recorded: quoteOrNull(recorded, run.Verdict != nil), Replayed: quoteOrNull(verdict.Verdict, true),
			Detail: fmt.Sprintf("the recorded verdict is %s, the re-derived one %s (%s)", labelEmpty(recorded), verdict.Verdict, strings.Join(verdict.Reasons, "; "))}})
	}
	return out, divs
}

func quoteOrNull(s string, present bool) json.RawMessage {
	if !present {
		return nil
	}
	b, _ := json.Marshal(s)
	return b
}

func clipText(s string) string {
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}
