// Package claims reconciles an external system's own usage claims (the tokens it says each
// session used) against the observing gateway's records of the bytes it relayed.
//
// The gateway side is re-derived from the rows of the gateway's SQLite usage database
// (gateway.ReadDatabase), never from its usage endpoint or any other summary. Missing evidence is
// unknown, never zero: a session whose gateway records did not all report usage, a session with
// records but no claim, and a claim with no records are each "unknown", and only "conserved"
// supports the claim. The claims format is documented in docs/usage-claims.md.
package claims

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/internal/jsonkeys"
)

// ErrMalformedClaim is matched (errors.Is) by a *LineError: a claims line that is not a valid
// claim.
var ErrMalformedClaim = errors.New("claims: malformed claim")

// LineError names the claims line (1-based) that is not a valid claim and why.
type LineError struct {
	Line   int
	Reason string
}

// Error is "claims line N: REASON".
func (e *LineError) Error() string { return fmt.Sprintf("claims line %d: %s", e.Line, e.Reason) }

// Unwrap returns ErrMalformedClaim.
func (e *LineError) Unwrap() error { return ErrMalformedClaim }

// Claim is one line of a claims file: the usage an external system says one session used.
// Token counts are nil when the line does not claim them.
type Claim struct {
	Line      int    // 1-based line number in the claims file
	SessionID string // required, non-empty
	MemberID  string // optional: the system's member id for the session
	// PromptTokens, CompletionTokens and TotalTokens are tokens (OpenAI usage fields); at least
	// one is present on every line.
	PromptTokens, CompletionTokens, TotalTokens *int64
}

// maxLineBytes bounds one claims line (bytes).
const maxLineBytes = 1 << 20

// Parse reads claims as JSON lines: one JSON object per line with "session_id" (non-empty string),
// optional "member_id" (string) and "prompt_tokens", "completion_tokens", "total_tokens"
// (non-negative integers or null; at least one given as an integer). Blank lines are skipped. Any
// other key is refused, so that a misspelt count is not silently left unchecked, and so is a key
// given twice on a line (which value counts would depend on the reader; RFC 7493 §2.3).
//
// Errors: a *LineError (ErrMalformedClaim) naming the first bad line; the reader's error.
func Parse(r io.Reader) ([]Claim, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	var out []Claim
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		c, reason := parseLine(text)
		if reason != "" {
			return nil, &LineError{Line: line, Reason: reason}
		}
		c.Line = line
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Line: line + 1, Reason: fmt.Sprintf("longer than %d bytes", maxLineBytes)}
		}
		return nil, fmt.Errorf("claims: read: %w", err)
	}
	return out, nil
}

// claimKeys are the keys a claim line may have, exactly (JSON object keys are case-sensitive:
// "TOTAL_TOKENS" is not total_tokens).
var claimKeys = []string{"session_id", "member_id", "prompt_tokens", "completion_tokens", "total_tokens"}

func parseLine(text []byte) (Claim, string) {
	if text[0] != '{' {
		return Claim{}, "not a JSON object"
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Claim{}, fmt.Sprintf("not valid JSON at column %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
		}
		return Claim{}, "not a JSON object"
	}
	if dec.More() {
		return Claim{}, "more than one JSON value on the line"
	}
	if key, dup := jsonkeys.Duplicate(text); dup {
		// Which of the two values counts would depend on the reader.
		return Claim{}, fmt.Sprintf("key %q appears more than once", key)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(claimKeys, k) {
			return Claim{}, fmt.Sprintf("unknown key %q%s", k, jsonkeys.DidYouMean(k, claimKeys))
		}
	}
	var doc struct {
		SessionID        *string
		MemberID         *string
		PromptTokens     json.RawMessage
		CompletionTokens json.RawMessage
		TotalTokens      json.RawMessage
	}
	for _, f := range []struct {
		key string
		dst **string
	}{{"session_id", &doc.SessionID}, {"member_id", &doc.MemberID}} {
		raw, ok := obj[f.key]
		if !ok || string(raw) == "null" {
			continue
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			return Claim{}, fmt.Sprintf("%s is %s, not a string", f.key, raw)
		}
		*f.dst = &v
	}
	doc.PromptTokens, doc.CompletionTokens, doc.TotalTokens = obj["prompt_tokens"], obj["completion_tokens"], obj["total_tokens"]
	if doc.SessionID == nil || *doc.SessionID == "" {
		return Claim{}, "session_id is missing or empty"
	}
	c := Claim{SessionID: *doc.SessionID}
	if doc.MemberID != nil {
		c.MemberID = *doc.MemberID
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  **int64
	}{{"prompt_tokens", doc.PromptTokens, &c.PromptTokens}, {"completion_tokens", doc.CompletionTokens, &c.CompletionTokens},
		{"total_tokens", doc.TotalTokens, &c.TotalTokens}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		// json.Number would take the string "12" too: a count must be a JSON number.
		var n json.Number
		v, err := int64(0), json.Unmarshal(f.raw, &n)
		if err == nil {
			v, err = n.Int64()
		}
		if err != nil || v < 0 || f.raw[0] < '0' || f.raw[0] > '9' {
			return Claim{}, fmt.Sprintf("%s is %s, not a non-negative integer", f.name, f.raw)
		}
		*f.dst = &v
	}
	if c.PromptTokens == nil && c.CompletionTokens == nil && c.TotalTokens == nil {
		return Claim{}, "claims no token count (prompt_tokens, completion_tokens or total_tokens)"
	}
	return c, ""
}

// Session verdicts.
const (
	Conserved = "conserved" // every claimed count equals the gateway's sum
	Mismatch  = "mismatch"  // a claimed count differs from the gateway's sum
	Unknown   = "unknown"   // no claim, no gateway record, or gateway usage not known for every request
)

// Difference is one claimed count that differs from the gateway's.
type Difference struct {
	Field   string `json:"field"`   // "prompt_tokens" | "completion_tokens" | "total_tokens"
	Claimed int64  `json:"claimed"` // tokens the claims say
	Gateway int64  `json:"gateway"` // tokens the gateway's records sum to
}

// SessionResult is the reconciliation of one session id.
type SessionResult struct {
	SessionID string `json:"session_id"`
	MemberID  string `json:"member_id"` // from the claims ("" when none claimed one)
	Verdict   string `json:"verdict"`   // Conserved | Mismatch | Unknown
	Reason    string `json:"reason"`    // why, in words
	Claims    int    `json:"claims"`    // claims lines for the session
	Requests  int    `json:"requests"`  // gateway records of the session
	// GatewayState is the gateway's usage state for the session (gateway.UsageReported,
	// UsagePartial, UsageUnknown); "" when it has no records.
	GatewayState string `json:"gateway_state"`
	// Claimed* are the claims' sums (nil when not every claim line gave the count); Gateway* the
	// records' sums (nil unless every record reported it).
	ClaimedPromptTokens     *int64       `json:"claimed_prompt_tokens"`
	ClaimedCompletionTokens *int64       `json:"claimed_completion_tokens"`
	ClaimedTotalTokens      *int64       `json:"claimed_total_tokens"`
	GatewayPromptTokens     *int64       `json:"gateway_prompt_tokens"`
	GatewayCompletionTokens *int64       `json:"gateway_completion_tokens"`
	GatewayTotalTokens      *int64       `json:"gateway_total_tokens"`
	Differences             []Difference `json:"differences"` // when Mismatch
}

// UnattributedRequest is a gateway record that carried no session id.
type UnattributedRequest struct {
	ID          int64     `json:"id"`           // record id in the gateway database
	StartedAt   time.Time `json:"started_at"`   // when it arrived, UTC
	Path        string    `json:"path"`         // URL path
	Status      int       `json:"status"`       // HTTP status the client received
	UsageState  string    `json:"usage_state"`  // the record's usage state
	TotalTokens *int64    `json:"total_tokens"` // reported total tokens; nil when unknown
}

// Unattributed sums the requests that carried no session id: no claim can cover them.
type Unattributed struct {
	Requests    int                   `json:"requests"`
	FirstAt     *time.Time            `json:"first_at"`     // earliest arrival, UTC; nil when none
	LastAt      *time.Time            `json:"last_at"`      // latest arrival, UTC; nil when none
	TotalTokens *int64                `json:"total_tokens"` // sum (0 for no request); nil unless every request reported it
	List        []UnattributedRequest `json:"list"`
}

// Result is the reconciliation of every session.
type Result struct {
	Sessions     []SessionResult `json:"sessions"` // ordered by session id
	Unattributed Unattributed    `json:"unattributed"`
	// NoUsageRequests are the GET and HEAD requests (a model listing, a health probe) that reported
	// no usage: the API defines none for them, so they are listed here, in no session's sum and
	// never a problem. A GET that reported usage is reconciled like any request.
	NoUsageRequests []UnattributedRequest `json:"no_usage_requests"`
	Conserved       int                   `json:"conserved"`
	Mismatched      int                   `json:"mismatched"`
	Unknown         int                   `json:"unknown"`
}

// OK reports whether the claims are supported: at least one session, every session conserved and
// no unattributed request.
func (r Result) OK() bool {
	return len(r.Sessions) > 0 && r.Conserved == len(r.Sessions) && r.Unattributed.Requests == 0
}

// Problems names why the result is not OK, one line each; nil when OK.
func (r Result) Problems() []string {
	var out []string
	if len(r.Sessions) == 0 {
		out = append(out, "no session to reconcile: no claims and no attributed gateway record")
	}
	for _, s := range r.Sessions {
		if s.Verdict != Conserved {
			out = append(out, fmt.Sprintf("session %s %s: %s", s.SessionID, s.Verdict, s.Reason))
		}
	}
	if n := r.Unattributed.Requests; n > 0 {
		out = append(out, fmt.Sprintf("%d gateway request(s) carried no session id", n))
	}
	return out
}

// Reconcile compares claims with the gateway records recs (every record of the database).
// Several claim lines of one session are summed; a count is compared only when every line of the
// session gave it, and only against a gateway sum every record of the session reported.
func Reconcile(claims []Claim, recs []gateway.Record) Result {
	bySession := map[string][]gateway.Record{}
	var zero int64
	res := Result{Sessions: []SessionResult{}, Unattributed: Unattributed{TotalTokens: &zero, List: []UnattributedRequest{}},
		NoUsageRequests: []UnattributedRequest{}}
	for _, r := range recs {
		if gateway.UsageUndefined(r) {
			res.NoUsageRequests = append(res.NoUsageRequests, UnattributedRequest{ID: r.ID, StartedAt: r.StartedAt.UTC(), Path: r.Path,
				Status: r.Status, UsageState: r.UsageState})
			continue
		}
		if r.SessionID == "" {
			res.Unattributed.add(r)
			continue
		}
		bySession[r.SessionID] = append(bySession[r.SessionID], r)
	}
	claimsOf := map[string][]Claim{}
	for _, c := range claims {
		claimsOf[c.SessionID] = append(claimsOf[c.SessionID], c)
	}
	ids := make([]string, 0, len(bySession)+len(claimsOf))
	for id := range bySession {
		ids = append(ids, id)
	}
	for id := range claimsOf {
		if _, ok := bySession[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := reconcileSession(id, claimsOf[id], bySession[id])
		switch s.Verdict {
		case Conserved:
			res.Conserved++
		case Mismatch:
			res.Mismatched++
		default:
			res.Unknown++
		}
		res.Sessions = append(res.Sessions, s)
	}
	return res
}

func (u *Unattributed) add(r gateway.Record) {
	at := r.StartedAt.UTC()
	if u.FirstAt == nil || at.Before(*u.FirstAt) {
		u.FirstAt = &at
	}
	if u.LastAt == nil || at.After(*u.LastAt) {
		u.LastAt = &at
	}
	var total *int64
	if r.UsageState == gateway.UsageReported {
		total = r.TotalTokens
	}
	if u.TotalTokens != nil && total != nil {
		*u.TotalTokens += *total
	} else {
		u.TotalTokens = nil // an unknown addend makes the sum unknown, for good
	}
	u.Requests++
	u.List = append(u.List, UnattributedRequest{ID: r.ID, StartedAt: at, Path: r.Path, Status: r.Status, UsageState: r.UsageState, TotalTokens: total})
}

func reconcileSession(id string, cs []Claim, recs []gateway.Record) SessionResult {
	s := SessionResult{SessionID: id, Claims: len(cs), Requests: len(recs), Differences: []Difference{}}
	var members []string
	for _, c := range cs {
		if c.MemberID != "" && !slices.Contains(members, c.MemberID) {
			members = append(members, c.MemberID)
		}
	}
	s.MemberID = strings.Join(members, ",")
	sum := func(get func(Claim) *int64) *int64 {
		if len(cs) == 0 {
			return nil
		}
		var t int64
		for _, c := range cs {
			v := get(c)
			if v == nil {
				return nil
			}
			t += *v
		}
		return &t
	}
	s.ClaimedPromptTokens = sum(func(c Claim) *int64 { return c.PromptTokens })
	s.ClaimedCompletionTokens = sum(func(c Claim) *int64 { return c.CompletionTokens })
	s.ClaimedTotalTokens = sum(func(c Claim) *int64 { return c.TotalTokens })
	if len(recs) > 0 {
		g := gateway.SumUsage(id, recs)
		s.GatewayState = g.State
		s.GatewayPromptTokens, s.GatewayCompletionTokens, s.GatewayTotalTokens = g.PromptTokens, g.CompletionTokens, g.TotalTokens
	}
	switch {
	case len(cs) == 0:
		s.Verdict, s.Reason = Unknown, fmt.Sprintf("the gateway recorded %d request(s) but no claim names the session", len(recs))
		return s
	case len(recs) == 0:
		s.Verdict, s.Reason = Unknown, "claimed, but the gateway has no record of the session"
		return s
	case s.GatewayState != gateway.UsageReported:
		reported := 0
		var broken []string
		for _, r := range recs {
			if r.UsageState == gateway.UsageReported {
				reported++
			} else if r.RelayError != gateway.RelayOK {
				broken = append(broken, fmt.Sprintf("record %d %s", r.ID, r.RelayError))
			}
		}
		s.Verdict, s.Reason = Unknown, fmt.Sprintf("gateway usage is %s: %d of %d request(s) reported usage", s.GatewayState, reported, len(recs))
		if len(broken) > 0 {
			s.Reason += " (" + strings.Join(broken, ", ") + ")"
		}
		return s
	}
	compared := 0
	var unknown []string
	for _, f := range []struct {
		name             string
		claimed, gateway *int64
	}{{"prompt_tokens", s.ClaimedPromptTokens, s.GatewayPromptTokens},
		{"completion_tokens", s.ClaimedCompletionTokens, s.GatewayCompletionTokens},
		{"total_tokens", s.ClaimedTotalTokens, s.GatewayTotalTokens}} {
		switch {
		case f.claimed == nil:
		case f.gateway == nil:
			unknown = append(unknown, f.name)
		default:
			compared++
			if *f.claimed != *f.gateway {
				s.Differences = append(s.Differences, Difference{Field: f.name, Claimed: *f.claimed, Gateway: *f.gateway})
			}
		}
	}
	switch {
	case len(s.Differences) > 0:
		var parts []string
		for _, d := range s.Differences {
			parts = append(parts, fmt.Sprintf("%s claimed %d, gateway %d", d.Field, d.Claimed, d.Gateway))
		}
		s.Verdict, s.Reason = Mismatch, strings.Join(parts, "; ")
	case len(unknown) > 0:
		s.Verdict, s.Reason = Unknown, "the gateway's records do not report "+strings.Join(unknown, ", ")+" for every request"
	case compared == 0:
		s.Verdict, s.Reason = Unknown, "no token count is given on every claim line of the session"
	default:
		s.Verdict, s.Reason = Conserved, fmt.Sprintf("%d claimed count(s) equal the gateway's sums over %d request(s)", compared, len(recs))
	}
	return s
}
