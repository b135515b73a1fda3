package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
)

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
	records, err := teamRecords(ctx, s.gateway, s.team.RunID)
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
		// A suspect zero is passed on as reported: the evidence layer re-derives suspicion from the counts and messages.
		if r.UsageState == gateway.UsageReported || r.UsageState == gateway.UsageSuspectZero {
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
