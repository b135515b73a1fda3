package harness

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime/tool"
)

// The checks of what went over the wire: members (here: each member's replies as recorded), sessions
// (checks_sessions.go: every request of the case's window accounted for), routing (checks_routing.go:
// the model that answered) and usage (checks_usage.go: three independent readings, call by call).
// Each reads the trace and the gateway's records that prepareEvidence loaded; none reads another
// check's result.

var memberOutcomes = Check{
	Name: "members",
	Doc: "every member that had to run ran, and each member's last turn ended in a reply that satisfies the contract its " +
		"request stated, read from the recorded response bytes (not from what the runtime concluded); the runtime's account " +
		"of every turn (its member events: success and output) and the results it returned agree with those bytes; no unknown member ran",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.teamErr != nil {
			return statusFailed, "team did not run: " + s.teamErr.Error(), nil
		}
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		t := s.trace
		d := newDerivation(s, t)
		failed := slices.Clone(t.problems)
		if s.journalErr != nil {
			return statusUnknown, "the tool journal is unavailable: " + s.journalErr.Error(), nil
		}
		outcomes := map[string][]string{} // member + " " + call id -> what each recorded outcome showed the model
		for _, r := range s.journal {
			if o := r.Outcome; o != nil {
				shown := o.Result
				if o.State != tool.StateSucceeded {
					shown = "error: " + o.Error
				}
				outcomes[o.MemberID+" "+o.CallID] = append(outcomes[o.MemberID+" "+o.CallID], shown)
			}
		}
		planned := map[string]bool{}
		returned := map[string]bool{}
		for _, r := range s.result.Members {
			returned[r.MemberID] = r.Success
		}
		for _, p := range s.plans {
			id := p.Spec.ID
			planned[id] = true
			ts := t.turns[id]
			if len(ts) == 0 {
				if !p.Optional {
					failed = append(failed, id+": did not run")
				}
				if ok, ran := returned[id]; ran {
					failed = append(failed, fmt.Sprintf("%s: the runtime returned a result (success=%v) for a member with no recorded turn", id, ok))
				}
				continue
			}
			for _, mt := range ts {
				o := d.outcome(mt)
				switch {
				case mt.ClaimedSuccess && !o.OK:
					failed = append(failed, fmt.Sprintf("%s invocation %d: the runtime recorded success (%s), but %s", id, mt.Invocation, d.at(mt.End), o.Why))
				case mt.ClaimedSuccess && mt.ClaimedOutput != o.Reply:
					failed = append(failed, fmt.Sprintf("%s invocation %d: the runtime recorded the output %q (%s), the recorded reply is %q (%s)",
						id, mt.Invocation, truncateText(mt.ClaimedOutput, 80), d.at(mt.End), truncateText(o.Reply, 80), o.X.where()))
				}
			}
			for _, mt := range ts {
				failed = append(failed, exchangeClaims(mt, outcomes)...)
			}
			last := ts[len(ts)-1]
			o := d.outcome(last)
			if !o.OK {
				why := id + ": " + o.Why
				if last.ClaimedError != "" {
					// The runtime's account of a failure explains it (a budget, a pause); the
					// recorded bytes decide it.
					why = fmt.Sprintf("%s: failed: %s (the recorded bytes: %s)", id, last.ClaimedError, o.Why)
				}
				failed = append(failed, why)
			}
			switch ok, ran := returned[id]; {
			case !ran:
				failed = append(failed, id+": ran, but the runtime returned no result for it")
			case ok && !o.OK:
				failed = append(failed, fmt.Sprintf("%s: the runtime returned success, its recorded reply does not satisfy its contract", id))
			case !ok && o.OK:
				// A formation may fail a member whose reply was valid (a transcript over its limit):
				// not a contradiction, but a member that failed.
				failed = append(failed, fmt.Sprintf("%s: failed: %s (its recorded reply satisfies its contract; the formation failed it)", id, labelOr(last.ClaimedError, "no reason recorded")))
			}
		}
		for id := range t.turns {
			if !planned[id] {
				failed = append(failed, id+": not a member of the case")
			}
		}
		for id := range returned {
			if !planned[id] {
				failed = append(failed, id+": the runtime returned a result for a member the case does not have")
			}
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			return statusFailed, strings.Join(failed, "; "), nil
		}
		n := 0
		for _, p := range s.plans {
			if len(t.turns[p.Spec.ID]) > 0 {
				n++
			}
		}
		return statusPassed, fmt.Sprintf("%d succeeded, each by its recorded reply", n), nil
	},
}

// exchangeClaims compares the runtime's account of each exchange of a turn with its recorded bytes:
// the finish reason and tool-call count it recorded, the turn ending at its first final reply (no
// silent retry of a reply that broke its contract), and every tool result the next request showed
// the model being one the tool journal recorded for that call.
func exchangeClaims(mt *memberTurn, outcomes map[string][]string) []string {
	var problems []string
	name := func(x *exchangeRec) string { return fmt.Sprintf("%s request %d (%s)", mt.Member, x.P.Seq, x.where()) }
	for k, x := range mt.Exchanges {
		if x.ReplyErr != nil {
			continue
		}
		if x.P.FinishReason != x.Reply.FinishReason || x.P.ToolCalls != len(x.Reply.ToolCalls) {
			problems = append(problems, fmt.Sprintf("%s: the runtime recorded finish_reason %q with %d tool call(s), the response says %q with %d",
				name(x), x.P.FinishReason, x.P.ToolCalls, x.Reply.FinishReason, len(x.Reply.ToolCalls)))
		}
		if k == len(mt.Exchanges)-1 {
			continue
		}
		if len(x.Reply.ToolCalls) == 0 {
			problems = append(problems, fmt.Sprintf("%s: a final reply, yet the turn asked the model again (a turn ends at its first final reply; no silent retry)", name(x)))
			continue
		}
		next := mt.Exchanges[k+1]
		req, err := parseWireRequest(next.Request)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", name(next), err))
			continue
		}
		shown := req.toolResults()
		seen := map[string]bool{}
		for _, tc := range x.Reply.ToolCalls {
			if seen[tc.ID] {
				problems = append(problems, fmt.Sprintf("%s: the response carried tool call id %q twice", name(x), tc.ID))
				continue
			}
			seen[tc.ID] = true
			got, ok := shown[tc.ID]
			recorded := outcomes[mt.Member+" "+wireCallID(x.P.Seq, tc.ID)]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("%s: the model was not shown the result of its tool call %s", name(next), tc.ID))
			case len(recorded) == 0:
				problems = append(problems, fmt.Sprintf("%s: the model was shown a result for tool call %s (%s) that the tool journal does not hold: no outcome was recorded for it", name(next), tc.ID, tc.Name))
			case !slices.Contains(recorded, got):
				problems = append(problems, fmt.Sprintf("%s: the model was shown %q for tool call %s, the tool journal recorded %q", name(next), truncateText(got, 80), tc.ID, truncateText(recorded[len(recorded)-1], 80)))
			}
		}
	}
	return problems
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
