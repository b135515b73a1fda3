package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/harness/gateway"
)

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
	Doc: "member session ids are distinct and each is {run_id}-{member_id} (a member in its own git worktree: " +
		"{run_id}:{formation}:{member_id}); the gateway saw exactly those sessions for this " +
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
		records, err := teamRecords(ctx, s.gateway, s.team.RunID)
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
			if want := s.team.RunID + "-" + member; sid != want && !s.worktreeSession(member, sid) {
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
