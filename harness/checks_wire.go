package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/runtime/tool"
)

// The checks of what went over the wire: members (each member's replies as recorded), sessions
// (every request of the case's window accounted for), routing (the model that answered) and usage
// (three independent readings, call by call). Each reads the trace and the gateway's records that
// prepareEvidence loaded; none reads another check's result.

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

// expectedRequests returns, per session, the HTTP requests the runtime recorded sending (the sum
// of its provider exchanges' attempts over the lineage), and the session each member used.
func expectedRequests(t *caseTrace) (map[string]int, map[string]string) {
	requests, sessionOf := map[string]int{}, map[string]string{}
	for member, ts := range t.turns {
		for _, mt := range ts {
			if _, ok := sessionOf[member]; !ok {
				sessionOf[member] = mt.Session
			}
			requests[mt.Session] += 0
			for _, x := range mt.Exchanges {
				requests[mt.Session] += x.P.Attempts
			}
		}
	}
	return requests, sessionOf
}

// unattributed returns the window's records whose session belongs to no case of this matrix run.
func (s *caseState) unattributed() []gateway.Record {
	var out []gateway.Record
	for _, r := range s.window {
		if s.owned == nil || !s.owned(r.SessionID, r.ID) {
			out = append(out, r)
		}
	}
	return out
}

// describeUnattributed names the records' count, sessions, times and tokens.
func describeUnattributed(recs []gateway.Record) string {
	bySession := map[string]int{}
	var tokens int64
	unknown := 0
	for _, r := range recs {
		bySession[r.SessionID]++
		if r.TotalTokens != nil {
			tokens += *r.TotalTokens
		} else {
			unknown++
		}
	}
	var parts []string
	for _, sid := range slices.Sorted(func(yield func(string) bool) {
		for k := range bySession {
			if !yield(k) {
				return
			}
		}
	}) {
		name := strconv.Quote(sid)
		if sid == "" {
			name = "no session id"
		}
		parts = append(parts, fmt.Sprintf("%s x%d", name, bySession[sid]))
	}
	tok := fmt.Sprintf("%d tokens", tokens)
	if unknown > 0 {
		tok += fmt.Sprintf(" (and %d request(s) of unknown usage)", unknown)
	}
	return fmt.Sprintf("%d request(s) during the case belong to no member session (%s) between %s and %s, consuming %s",
		len(recs), strings.Join(parts, ", "), recs[0].StartedAt.Format("15:04:05.000"), recs[len(recs)-1].StartedAt.Format("15:04:05.000"), tok)
}

var sessions = Check{
	Name: "sessions",
	Doc: "member session ids are distinct and each is {run_id}-{member_id}; the gateway saw exactly those sessions for this " +
		"team run (a resumed run: the ids of the run it continues), with as many requests per session as the runtime recorded " +
		"sending, and a provider that echoed the session header echoed the one sent (the embedded reference provider, which " +
		"echoes every one, must echo it on every chat response); every stored request and response is the " +
		"bytes the gateway relayed; and every request that arrived at the gateway while the team ran was recorded and belongs " +
		"to a member session of a case of this matrix run whose team was running when it arrived (a request with no session " +
		"id, a foreign one, or a finished case's fails, with its count, time and tokens)",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		if s.windowErr != nil {
			return statusUnknown, "the gateway's records of the case's window are unavailable: " + s.windowErr.Error(), nil
		}
		records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
		if err != nil {
			return statusUnknown, "gateway records unavailable: " + err.Error(), nil
		}
		seen := map[string]int{}
		for _, r := range records {
			seen[r.SessionID]++
		}
		expected, sessionOf := expectedRequests(s.trace)
		var problems []string
		used := map[string]string{}
		for _, member := range slices.Sorted(mapKeys(sessionOf)) {
			sid := sessionOf[member]
			if want := s.team.RunID + "-" + member; sid != want {
				problems = append(problems, fmt.Sprintf("%s used session %q, want %q", member, sid, want))
			}
			if other, dup := used[sid]; dup {
				problems = append(problems, fmt.Sprintf("session %q shared by %s and %s", sid, other, member))
			}
			used[sid] = member
		}
		for _, m := range s.result.Members {
			if sid, ok := sessionOf[m.MemberID]; ok && m.SessionID != sid {
				problems = append(problems, fmt.Sprintf("the runtime returned session %q for %s, its events say %q", m.SessionID, m.MemberID, sid))
			}
		}
		for _, sid := range slices.Sorted(mapKeys(expected)) {
			if seen[sid] != expected[sid] {
				problems = append(problems, fmt.Sprintf("%s: gateway saw %d requests, the runtime recorded %d", sid, seen[sid], expected[sid]))
			}
		}
		for _, sid := range slices.Sorted(mapKeys(seen)) {
			if _, ok := expected[sid]; !ok {
				problems = append(problems, fmt.Sprintf("gateway saw unexpected session %q", sid))
			}
		}
		for _, r := range records {
			// A provider that echoes the session header states which session it attributed the
			// request (and its usage) to.
			if r.EchoedSession != "" && r.EchoedSession != r.SessionID {
				problems = append(problems, fmt.Sprintf("request %d of session %s: the provider echoed session %q", r.ID, r.SessionID, r.EchoedSession))
			}
			// The reference provider echoes every session header it receives on a chat response
			// (runtime/provider/reference): none coming back means the header never reached it, so
			// it cannot have attributed the request to the session the gateway recorded.
			if s.reference && r.EchoedSession == "" && r.SessionID != "" && r.Status != 0 && r.RelayError == "" &&
				strings.HasSuffix(r.Path, "/chat/completions") {
				problems = append(problems, fmt.Sprintf("request %d of session %s: the reference provider echoed no session (it echoes every one it receives): "+
					"the session header did not reach the provider", r.ID, r.SessionID))
			}
		}
		if len(sessionOf) == 0 {
			problems = append(problems, "no member ran")
		}
		foreign := s.unattributed()
		if len(foreign) > 0 {
			problems = append(problems, describeUnattributed(foreign))
		}
		// Every request that arrived while the team ran was recorded: the gateway numbers requests
		// on arrival, so a request relayed but not recorded leaves a gap.
		if arrived := s.gwTo - s.gwFrom; int64(len(s.window)) != arrived {
			problems = append(problems, fmt.Sprintf("%d request(s) arrived at the gateway while the team ran, %d were recorded", arrived, len(s.window)))
		}
		integrity, unverifiable := wireIntegrity(s.trace, records)
		problems = append(problems, integrity...)
		ev := map[string]any{"gateway_requests": seen, "runtime_requests": expected, "unattributed_requests": len(foreign)}
		if len(problems) > 0 {
			return statusFailed, strings.Join(problems, "; "), ev
		}
		if len(unverifiable) > 0 {
			return statusUnknown, "stored bytes cannot be compared with the relayed ones: " + strings.Join(unverifiable, "; "), ev
		}
		return statusPassed, fmt.Sprintf("%d distinct, matched on the wire, every stored request and response the bytes the gateway relayed; "+
			"all %d request(s) of the case's window attributed", len(expected), len(s.window)), ev
	},
}

// wireIntegrity checks every provider exchange's stored bytes are the bytes that crossed the wire:
// the request the runtime hashed was relayed by the gateway in the member's session, the stored
// request artifact is that request, and the stored response is a response the gateway relayed
// for it (its decoded digest: a client that decompresses stores the decoded body). An artifact
// holding the redaction mask cannot be compared: it is listed as unverifiable.
func wireIntegrity(t *caseTrace, records []gateway.Record) (problems, unverifiable []string) {
	byRequest := map[string][]gateway.Record{}
	for _, r := range records {
		byRequest[r.SessionID+" "+r.RequestSHA256] = append(byRequest[r.SessionID+" "+r.RequestSHA256], r)
	}
	for _, member := range slices.Sorted(mapKeys(t.turns)) {
		for _, mt := range t.turns[member] {
			for _, x := range mt.Exchanges {
				if x.P.RequestSHA256 == "" {
					continue // no request left the runtime (it failed before sending)
				}
				name := fmt.Sprintf("%s request %d", member, x.P.Seq)
				relayed := byRequest[mt.Session+" "+x.P.RequestSHA256]
				if len(relayed) == 0 {
					problems = append(problems, fmt.Sprintf("%s: the gateway relayed no request with its SHA-256 %s in session %s", name, x.P.RequestSHA256, mt.Session))
					continue
				}
				if x.P.RequestArtifact != x.P.RequestSHA256 {
					if x.Masked {
						unverifiable = append(unverifiable, name+" (request stored masked)")
					} else {
						problems = append(problems, fmt.Sprintf("%s: the stored request (artifact %s) is not the request sent (SHA-256 %s)", name, x.P.RequestArtifact, x.P.RequestSHA256))
					}
				}
				if x.P.ResponseArtifact == "" {
					continue
				}
				match := slices.ContainsFunc(relayed, func(r gateway.Record) bool {
					return r.ResponseDecodedSHA256 == x.P.ResponseSHA256 || r.ResponseSHA256 == x.P.ResponseSHA256
				})
				switch {
				case match:
				case x.Masked:
					unverifiable = append(unverifiable, name+" (response stored masked)")
				default:
					problems = append(problems, fmt.Sprintf("%s: the stored response (%s) is not a response the gateway relayed for it", name, x.where()))
				}
			}
		}
	}
	return problems, unverifiable
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

// datedSnapshot matches a model id's dated-snapshot suffix: -YYYY-MM-DD (OpenAI) or -YYYYMMDD.
var datedSnapshot = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// answeredBy reports whether answered may answer for requested: the same id, a dated snapshot of
// it (gpt-4o-mini-2024-07-18 for gpt-4o-mini), or an alias the operator declared. how says which.
func answeredBy(requested, answered string, aliases map[string]string) (ok bool, how string) {
	switch {
	case answered == requested:
		return true, ""
	case strings.HasPrefix(answered, requested) && datedSnapshot.MatchString(answered[len(requested):]):
		return true, fmt.Sprintf("%s (a dated snapshot of %s)", answered, requested)
	case aliases[requested] == answered && answered != "":
		return true, fmt.Sprintf("%s (declared alias of %s)", answered, requested)
	}
	return false, ""
}

var routing = Check{
	Name: "routing",
	Doc: "every request of this team run went to the chat-completions path asking for the configured model, and every " +
		"response names a model that may answer for it (the same id, a dated snapshot of it, or a declared --model-alias), " +
		"read both from the gateway's record of the relayed bytes and from the recorded response bytes; a response naming no " +
		"model leaves routing unknown",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
		if err != nil {
			return statusUnknown, "gateway records unavailable: " + err.Error(), nil
		}
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		if len(records) == 0 {
			return statusFailed, "the gateway saw no request for this run", nil
		}
		var problems, unknown []string
		answers := map[string]bool{}
		other := 0
		for _, r := range records {
			if r.Model != s.model || !strings.HasSuffix(r.Path, "/chat/completions") {
				problems = append(problems, fmt.Sprintf("request %d (%s): asked for model %q on path %s", r.ID, r.SessionID, r.Model, r.Path))
			}
			if r.Status != 200 {
				other++
				continue
			}
			if r.AnsweredModel == "" {
				unknown = append(unknown, fmt.Sprintf("request %d (%s): the response named no model", r.ID, r.SessionID))
				continue
			}
			if ok, how := answeredBy(s.model, r.AnsweredModel, s.modelAliases); !ok {
				problems = append(problems, fmt.Sprintf("request %d (%s): asked for %q, answered by %q (gateway record)", r.ID, r.SessionID, s.model, r.AnsweredModel))
			} else if how != "" {
				answers[how] = true
			}
		}
		for _, member := range slices.Sorted(mapKeys(s.trace.turns)) {
			for _, mt := range s.trace.turns[member] {
				for _, x := range mt.Exchanges {
					if x.ReplyErr != nil || x.P.Status != 200 {
						continue
					}
					if x.Reply.Model == "" {
						unknown = append(unknown, fmt.Sprintf("%s request %d: the recorded response names no model (%s)", member, x.P.Seq, x.where()))
					} else if ok, _ := answeredBy(s.model, x.Reply.Model, s.modelAliases); !ok {
						problems = append(problems, fmt.Sprintf("%s request %d: asked for %q, the recorded response names %q (%s)", member, x.P.Seq, s.model, x.Reply.Model, x.where()))
					}
				}
			}
		}
		switch {
		case len(problems) > 0:
			return statusFailed, strings.Join(problems, "; "), nil
		case len(unknown) > 0:
			return statusUnknown, "the model that answered is not known: " + strings.Join(unknown, "; "), nil
		}
		detail := fmt.Sprintf("%d requests to %s, answered by %s", len(records), s.model, s.model)
		if len(answers) > 0 {
			detail = fmt.Sprintf("%d requests to %s, answered by %s", len(records), s.model, strings.Join(slices.Sorted(mapKeys(answers)), ", "))
		}
		if other > 0 {
			detail += fmt.Sprintf(" (%d answered with a status other than 200)", other)
		}
		return statusPassed, detail, nil
	},
}

var usageConservation = Check{
	Name: "usage",
	Doc: "per member session, token usage is conserved call by call across three independent readings: the store (what the " +
		"runtime's client parsed, in its provider_exchange events), the wire (the harness's own parse of the raw response " +
		"bytes the runtime received) and the gateway (its records of the bytes it relayed; its usage endpoint's sums are " +
		"checked against them); with the reference provider, its documented counting rule is recomputed from the recorded " +
		"request and response bytes; requests of the case's window outside every member session fail it; usage a source did " +
		"not report is unknown, never zero",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		calls, problems, err := collectUsage(ctx, s)
		if err != nil {
			return statusUnknown, err.Error(), nil
		}
		if err := s.store.RecordUsageCalls(ctx, s.runID, calls...); err != nil {
			return statusFailed, "record usage calls: " + err.Error(), nil
		}
		verdicts := evidence.ReconcileUsageCalls(calls, nil)
		if err := s.store.RecordUsageVerdicts(ctx, s.runID, verdicts); err != nil {
			return statusFailed, "record usage verdicts: " + err.Error(), nil
		}
		if len(verdicts) == 0 {
			return statusUnknown, "no member usage to reconcile", nil
		}
		problems = append(problems, accumulation(s)...)
		if s.windowErr == nil {
			if foreign := s.unattributed(); len(foreign) > 0 {
				problems = append(problems, describeUnattributed(foreign)+": that usage is in no member's account")
			}
		}
		status, parts := statusPassed, []string{}
		for _, v := range verdicts {
			switch v.Verdict {
			case evidence.UsageConserved:
				parts = append(parts, v.MemberID+" conserved")
			case evidence.UsageVerdictUnknown:
				if status == statusPassed {
					status = statusUnknown
				}
				parts = append(parts, fmt.Sprintf("%s unknown (%s)", v.MemberID, v.Detail))
			default:
				status = statusFailed
				parts = append(parts, fmt.Sprintf("%s %s (%s)", v.MemberID, v.Verdict, v.Detail))
			}
		}
		if len(problems) > 0 {
			status = statusFailed
			parts = append(parts, problems...)
		}
		detail := strings.Join(parts, "; ")
		if !s.reference && status == statusPassed {
			detail += "; the counts are the provider's word (three readings agree; no counting rule to recompute)"
		} else if s.reference && status == statusPassed {
			detail += "; the reference provider's counting rule recomputed from the recorded bytes"
		}
		return status, detail, verdicts
	},
}

// collectUsage gathers the case's three usage readings, keyed by assay's own call ids
// ("{session}/{seq}"): store and wire per provider exchange of the lineage's trace, gateway per
// gateway record of the team run's sessions (matched to an exchange by request SHA-256, preferring
// the same session; an unmatched record is "gateway-record/<id>"). problems are disagreements the
// reconciliation does not see: the gateway's endpoint sums against its records, and, with the
// reference provider, its counting rule against what it reported. An error means a source could
// not be read.
func collectUsage(ctx context.Context, s *caseState) ([]evidence.UsageCall, []string, error) {
	var calls []evidence.UsageCall
	var problems []string
	byRequest := map[string][]int{}
	for _, member := range slices.Sorted(mapKeys(s.trace.turns)) {
		for _, mt := range s.trace.turns[member] {
			for _, x := range mt.Exchanges {
				id := storeCallID(mt.Session, x.P.Seq)
				msgs := requestMessages(x.Request)
				st := evidence.UsageCall{CallID: id, Source: evidence.SourceStore, SessionID: mt.Session, MemberID: member,
					RequestSHA256: x.P.RequestSHA256, Messages: msgs}
				if u := x.P.Usage; u != nil {
					st.PromptTokens, st.CompletionTokens, st.TotalTokens = ptr(u.PromptTokens), ptr(u.CompletionTokens), ptr(u.TotalTokens)
					st.CachedTokens, st.ReasoningTokens = u.CachedTokens, u.ReasoningTokens
				}
				wire := evidence.UsageCall{CallID: id, Source: evidence.SourceWire, SessionID: mt.Session, MemberID: member,
					RequestSHA256: x.P.RequestSHA256, Messages: msgs}
				if u := x.Reply.Usage; x.ReplyErr == nil && u != nil {
					wire.PromptTokens, wire.CompletionTokens, wire.TotalTokens = u.Prompt, u.Completion, u.Total
					wire.CachedTokens, wire.ReasoningTokens = u.Cached, u.Reasoning
					if s.reference {
						if p := referenceRule(x); p != "" {
							problems = append(problems, fmt.Sprintf("call %s: %s", id, p))
						}
					}
				}
				if x.P.RequestSHA256 != "" {
					byRequest[x.P.RequestSHA256] = append(byRequest[x.P.RequestSHA256], len(calls))
				}
				calls = append(calls, st, wire)
			}
		}
	}
	records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway records: %w", err)
	}
	nExchange := len(calls)
	used := map[int]bool{}
	bySession := map[string][]gateway.Record{}
	for _, r := range records {
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
		c := evidence.UsageCall{CallID: "gateway-record/" + strconv.FormatInt(r.ID, 10), Source: evidence.SourceGateway,
			SessionID: r.SessionID, RequestSHA256: r.RequestSHA256}
		if i, ok := matchCall(calls[:nExchange], byRequest[r.RequestSHA256], r.SessionID, used); ok {
			used[i] = true
			c.CallID, c.MemberID, c.Messages = calls[i].CallID, calls[i].MemberID, calls[i].Messages
		}
		if r.UsageState == gateway.UsageReported {
			c.PromptTokens, c.CompletionTokens, c.TotalTokens = r.PromptTokens, r.CompletionTokens, r.TotalTokens
			c.CachedTokens, c.ReasoningTokens = r.CachedTokens, r.ReasoningTokens
		}
		calls = append(calls, c)
	}
	// The gateway's usage endpoint is read over HTTP, as any client of it would, and must sum its
	// own records: an endpoint that reports other figures than it recorded is not evidence.
	for _, sid := range slices.Sorted(mapKeys(bySession)) {
		got, err := fetchGatewayUsage(ctx, s.gateway.URL(), sid)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway usage endpoint: %w", err)
		}
		want := gateway.SumUsage(sid, bySession[sid])
		if got.Requests != want.Requests || got.State != want.State || !sameCount(got.PromptTokens, want.PromptTokens) ||
			!sameCount(got.CompletionTokens, want.CompletionTokens) || !sameCount(got.TotalTokens, want.TotalTokens) {
			problems = append(problems, fmt.Sprintf("session %s: the gateway's usage endpoint reports %d request(s), %s total tokens (%s); its records sum to %d, %s (%s)",
				sid, got.Requests, countText(got.TotalTokens), got.State, want.Requests, countText(want.TotalTokens), want.State))
		}
	}
	return calls, problems, nil
}

// accumulation compares what the runtime accumulated per member (the usage of the results it
// returned) with the sum of its own per-exchange records: a runtime that adds up wrong is caught
// even when every call agrees.
func accumulation(s *caseState) []string {
	var problems []string
	for _, m := range s.result.Members {
		var requests, unknown int
		var prompt, completion, total int64
		for _, mt := range s.trace.turns[m.MemberID] {
			for _, x := range mt.Exchanges {
				if x.P.ResponseArtifact == "" {
					continue // no response: the runtime counts none
				}
				requests++
				if u := x.P.Usage; u == nil {
					unknown++
				} else {
					prompt, completion, total = prompt+u.PromptTokens, completion+u.CompletionTokens, total+u.TotalTokens
				}
			}
		}
		u := m.Usage
		if u.Requests != requests || u.Unknown != unknown || u.PromptTokens != prompt || u.CompletionTokens != completion || u.TotalTokens != total {
			problems = append(problems, fmt.Sprintf("%s: the runtime accumulated %d response(s) (%d without usage), prompt %d, completion %d, total %d; "+
				"its recorded exchanges sum to %d (%d), %d, %d, %d", m.MemberID, u.Requests, u.Unknown, u.PromptTokens, u.CompletionTokens, u.TotalTokens,
				requests, unknown, prompt, completion, total))
		}
	}
	return problems
}

// storeCallID is assay's own id of a member's provider request: its session and its request
// sequence number.
func storeCallID(sessionID string, seq int) string { return sessionID + "/" + strconv.Itoa(seq) }

func sameCount(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func countText(v *int64) string {
	if v == nil {
		return "unknown"
	}
	return strconv.FormatInt(*v, 10)
}

// matchCall picks, among the exchange calls with the record's request hash not matched yet, a
// store call in the record's session, else the first store call.
func matchCall(calls []evidence.UsageCall, candidates []int, session string, used map[int]bool) (int, bool) {
	for _, i := range candidates {
		if !used[i] && calls[i].SessionID == session {
			return i, true
		}
	}
	for _, i := range candidates {
		if !used[i] {
			return i, true
		}
	}
	return 0, false
}

// requestMessages counts the messages of recorded request bytes; nil when unknown.
func requestMessages(request []byte) *int64 {
	if request == nil {
		return nil
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(request, &req) != nil || req.Messages == nil {
		return nil
	}
	n := int64(len(req.Messages))
	return &n
}

// referenceRule recomputes the embedded reference provider's documented usage rule
// (runtime/provider/reference, "Usage rule") from the exchange's recorded request and response
// bytes, and returns how the reported usage differs from it ("" when it does not). For a message,
// n is the byte length of its content (text parts joined), of every tool call's name and
// arguments, and of its tool_call_id; prompt = sum of (4 + ceil(n/4)); completion =
// max(1, ceil(m/4)) over the reply's content and tool calls' names and arguments; cached and
// reasoning tokens are reported, and 0.
func referenceRule(x *exchangeRec) string {
	var req struct {
		Messages []struct {
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if x.Request == nil || json.Unmarshal(x.Request, &req) != nil {
		return "the request bytes are not recorded, so the reference counting rule cannot be recomputed"
	}
	ceil4 := func(n int) int64 { return int64((n + 3) / 4) }
	var prompt int64
	for _, m := range req.Messages {
		n := len(m.ToolCallID) + len(contentText(m.Content))
		for _, tc := range m.ToolCalls {
			args, _ := argumentText(tc.Function.Arguments)
			n += len(tc.Function.Name) + len(args)
		}
		prompt += 4 + ceil4(n)
	}
	m := len(x.Reply.Content)
	for _, tc := range x.Reply.ToolCalls {
		m += len(tc.Name) + len(tc.Arguments)
	}
	completion := max(ceil4(m), 1)
	u := x.Reply.Usage
	var zero int64
	if !sameCount(u.Prompt, &prompt) || !sameCount(u.Completion, &completion) || u.Total == nil || *u.Total != prompt+completion ||
		!sameCount(u.Cached, &zero) || !sameCount(u.Reasoning, &zero) {
		return fmt.Sprintf("the reference provider reported prompt %s, completion %s, total %s, cached %s, reasoning %s; "+
			"its documented rule gives %d, %d, %d, 0, 0 (%s)",
			countText(u.Prompt), countText(u.Completion), countText(u.Total), countText(u.Cached), countText(u.Reasoning),
			prompt, completion, prompt+completion, x.where())
	}
	return ""
}

// contentText is a message content's text: a string, or an array's text parts joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// fetchGatewayUsage reads the gateway's usage endpoint over HTTP, as any client of it would.
func fetchGatewayUsage(ctx context.Context, gatewayURL, sessionID string) (gateway.SessionUsage, error) {
	var u gateway.SessionUsage
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/admin/usage/run/"+url.PathEscape(sessionID), nil)
	if err != nil {
		return u, err
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return u, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return u, fmt.Errorf("GET usage for %s: status %d", sessionID, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		return u, fmt.Errorf("decode usage for %s: %w", sessionID, err)
	}
	return u, nil
}
