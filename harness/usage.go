package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/runtime/provider"
)

// exchangeUsage is the part of a provider_exchange event payload the usage
// check reads (runtime/member.go's exchangePayload).
type exchangeUsage struct {
	Seq             int             `json:"seq"`
	RequestSHA256   string          `json:"request_sha256"`
	RequestArtifact string          `json:"request_artifact"`
	Usage           *provider.Usage `json:"usage"`
}

// storeCallID is assay's own id of a member's provider request: its session
// and its request sequence number.
func storeCallID(sessionID string, seq int) string { return sessionID + "/" + strconv.Itoa(seq) }

// collectUsage gathers a case's usage from its three sources, keyed by
// assay's own call ids:
//   - store: one call per provider_exchange event the runtime recorded in
//     the run's trace, with the usage its client parsed (nil when the
//     response reported none) and the request's message count read from the
//     request artifact;
//   - wire: one call per request the gateway recorded under this run's
//     session prefix, matched to the store call with the same request
//     SHA-256 (preferring the same session; a request the runtime did not
//     record gets the call id "gateway-record/<id>"), attributed to the
//     session the gateway saw;
//   - gateway: one session row per session from its usage endpoint.
//
// Errors are the sources' (the check then reports usage unknown).
func collectUsage(ctx context.Context, s *caseState) ([]evidence.UsageCall, []evidence.UsageRow, error) {
	var events []evidence.StoredEvent
	for _, id := range append(slices.Clone(s.priorRuns), s.runID) {
		evs, err := s.store.Events(ctx, id)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s events: %w", id, err)
		}
		events = append(events, evs...)
	}
	var calls []evidence.UsageCall
	byRequest := map[string][]int{} // request sha -> indexes of store calls
	for _, ev := range events {
		if ev.Type != "provider_exchange" {
			continue
		}
		var x exchangeUsage
		if err := json.Unmarshal(ev.Payload, &x); err != nil {
			return nil, nil, fmt.Errorf("provider_exchange event %d: %w", ev.Seq, err)
		}
		c := evidence.UsageCall{CallID: storeCallID(ev.SessionID, x.Seq), Source: evidence.SourceStore, SessionID: ev.SessionID,
			MemberID: ev.MemberID, RequestSHA256: x.RequestSHA256, Messages: requestMessages(ctx, s.store, x.RequestArtifact)}
		if u := x.Usage; u != nil {
			c.PromptTokens, c.CompletionTokens, c.TotalTokens = ptr(u.PromptTokens), ptr(u.CompletionTokens), ptr(u.TotalTokens)
			c.CachedTokens, c.ReasoningTokens = u.CachedTokens, u.ReasoningTokens
		}
		if x.RequestSHA256 != "" {
			byRequest[x.RequestSHA256] = append(byRequest[x.RequestSHA256], len(calls))
		}
		calls = append(calls, c)
	}
	records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway records: %w", err)
	}
	sessions := map[string]string{} // session -> member
	for _, m := range s.result.Members {
		sessions[m.SessionID] = m.MemberID
	}
	nStore := len(calls)
	for _, r := range records {
		c := evidence.UsageCall{CallID: "gateway-record/" + strconv.FormatInt(r.ID, 10), Source: evidence.SourceWire,
			SessionID: r.SessionID, RequestSHA256: r.RequestSHA256}
		if i, ok := matchStoreCall(calls[:nStore], byRequest[r.RequestSHA256], r.SessionID); ok {
			c.CallID, c.MemberID, c.Messages = calls[i].CallID, calls[i].MemberID, calls[i].Messages
		}
		if r.UsageState == gateway.UsageReported {
			c.PromptTokens, c.CompletionTokens, c.TotalTokens = r.PromptTokens, r.CompletionTokens, r.TotalTokens
			c.CachedTokens, c.ReasoningTokens = r.CachedTokens, r.ReasoningTokens
		}
		if _, ok := sessions[r.SessionID]; !ok {
			sessions[r.SessionID] = ""
		}
		calls = append(calls, c)
	}
	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var rows []evidence.UsageRow
	for _, id := range ids {
		gw, err := fetchGatewayUsage(ctx, s.gateway.URL(), id)
		if err != nil {
			return nil, nil, fmt.Errorf("gateway usage endpoint: %w", err)
		}
		rows = append(rows, evidence.UsageRow{MemberID: sessions[id], SessionID: id, Source: evidence.SourceGateway,
			State: gw.State, Requests: gw.Requests, PromptTokens: gw.PromptTokens, CompletionTokens: gw.CompletionTokens,
			TotalTokens: gw.TotalTokens, CachedTokens: gw.CachedTokens, ReasoningTokens: gw.ReasoningTokens})
	}
	return calls, rows, nil
}

// matchStoreCall picks, among the store calls with the record's request
// hash, one in the record's session, else the first.
func matchStoreCall(calls []evidence.UsageCall, candidates []int, session string) (int, bool) {
	for _, i := range candidates {
		if calls[i].SessionID == session {
			return i, true
		}
	}
	if len(candidates) > 0 {
		return candidates[0], true
	}
	return 0, false
}

// requestMessages counts the messages of the request stored as artifact
// digest; nil when the artifact or its messages are unavailable.
func requestMessages(ctx context.Context, store *evidence.Store, digest string) *int64 {
	if digest == "" {
		return nil
	}
	data, err := store.Artifact(ctx, digest)
	if err != nil {
		return nil
	}
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(data, &req) != nil || req.Messages == nil {
		return nil
	}
	n := int64(len(req.Messages))
	return &n
}
