package evidence

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// UsageCall is one source's observation of the usage of one provider call,
// keyed by assay's own call id — not by the session a source groups it under —
// so session totals are sums over the calls the runtime made, and a source
// that groups calls under the wrong session is reported as such.
//
// A source may observe a call several times (e.g. one observation per stream
// chunk): observations fold in recording order, a non-nil count replacing
// the earlier one and a nil count never replacing anything, so a chunk that
// carries only metadata neither creates a zero nor erases an earlier figure.
type UsageCall struct {
	// CallID is assay's call id: for provider requests "{session_id}/{seq}",
	// the member session and its request sequence number (1..256 bytes of
	// UTF-8).
	CallID string
	// Source is "store" (what the runtime's client parsed, its
	// provider_exchange events), "wire" (a fresh parse, by the harness, of the
	// raw response bytes the runtime received) or "gateway" (the gateway's
	// per-request records of the bytes it relayed). A source with only session
	// totals is recorded with RecordUsage instead.
	Source string
	// SessionID is the session this source attributes the call to (the
	// session header the gateway saw; the member session for "store").
	SessionID string
	MemberID  string // member id; "" when the source does not know it
	// RequestSHA256 is the SHA-256 hex of the request body; "" when unknown.
	RequestSHA256 string
	// Messages is the number of messages in the request; nil when unknown.
	Messages *int64

	PromptTokens, CompletionTokens, TotalTokens, CachedTokens, ReasoningTokens *int64 // tokens; nil = unknown

	// State is derived by the store from the counts, never taken from the
	// caller: "reported" (prompt, completion and total known), "partial"
	// (some known), "unknown" (none), or "suspect_zero" (reported with a zero
	// prompt count while Messages is nil or > 0). Set on calls read back.
	State string
}

func (c UsageCall) field(i int) *int64 {
	return UsageRow{PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens, TotalTokens: c.TotalTokens,
		CachedTokens: c.CachedTokens, ReasoningTokens: c.ReasoningTokens}.field(i)
}

func (c *UsageCall) setField(i int, v *int64) {
	ptrs := [5]**int64{&c.PromptTokens, &c.CompletionTokens, &c.TotalTokens, &c.CachedTokens, &c.ReasoningTokens}
	*ptrs[i] = v
}

// deriveCallState applies UsageCall.State's rule.
func deriveCallState(c UsageCall) string {
	known := 0
	for f := 0; f < 3; f++ {
		if c.field(f) != nil {
			known++
		}
	}
	switch {
	case known == 0:
		return UsageUnknown
	case known < 3:
		return UsagePartial
	case *c.PromptTokens == 0 && (c.Messages == nil || *c.Messages > 0):
		return UsageSuspectZero
	}
	return UsageReported
}

func (c UsageCall) validate(i int) error {
	bad := func(field, format string, args ...any) error {
		return fieldErr(ErrInvalidArgument, fmt.Sprintf("calls[%d].%s", i, field), format, args...)
	}
	switch {
	case c.CallID == "" || len(c.CallID) > maxIDLen || !utf8.ValidString(c.CallID):
		return bad("call_id", "required, at most %d bytes of UTF-8", maxIDLen)
	case c.Source != SourceWire && c.Source != SourceStore && c.Source != SourceGateway:
		return bad("source", "%q is not wire, store or gateway", c.Source)
	case c.SessionID == "" || len(c.SessionID) > maxIDLen || !utf8.ValidString(c.SessionID):
		return bad("session_id", "required, at most %d bytes of UTF-8", maxIDLen)
	case len(c.MemberID) > maxIDLen || !utf8.ValidString(c.MemberID):
		return bad("member_id", "at most %d bytes of UTF-8", maxIDLen)
	case c.RequestSHA256 != "" && !isDigest(c.RequestSHA256):
		return bad("request_sha256", "%q is neither empty nor SHA-256 hex", c.RequestSHA256)
	case c.Messages != nil && *c.Messages < 0:
		return bad("messages", "%d is negative", *c.Messages)
	}
	for f, name := range usageFieldNames() {
		if v := c.field(f); v != nil && *v < 0 {
			return bad(name, "%d is negative", *v)
		}
	}
	return nil
}

// RecordUsageCalls appends per-call usage observations to run runID, each as
// the next observation of its (source, call id). Calls are validated first;
// none is stored when one is invalid. The store derives each observation's
// state (UsageCall.State).
//
// A (session, source) pair is accounted either per call or by a session row
// (RecordUsage), never both: recording calls for a pair that has a session
// row is refused.
//
// Errors: *FieldError (ErrInvalidArgument) naming "calls[i].<field>";
// ErrNoRun; ErrFinalized; ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) RecordUsageCalls(ctx context.Context, runID string, calls ...UsageCall) error {
	for i, c := range calls {
		if err := c.validate(i); err != nil {
			return err
		}
	}
	return s.inRunTx(ctx, runID, "record usage calls", func(tx *sql.Tx) error {
		now := utcMicro(time.Now())
		for i, c := range calls {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM usage WHERE run_id = ? AND session_id = ? AND source = ?`,
				runID, c.SessionID, c.Source).Scan(&n); err != nil {
				return fmt.Errorf("evidence: record usage calls in run %s: %w", runID, err)
			}
			if n > 0 {
				return fieldErr(ErrInvalidArgument, fmt.Sprintf("calls[%d].source", i),
					"session %s already has a %s session row; a source is accounted per call or per session, not both", c.SessionID, c.Source)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage_calls (run_id, source, call_id, observation, session_id, member_id,
			request_sha256, messages, state, prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, recorded_at)
			SELECT ?, ?, ?, coalesce(max(observation), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
			FROM usage_calls WHERE run_id = ? AND source = ? AND call_id = ?`,
				runID, c.Source, c.CallID, c.SessionID, c.MemberID, c.RequestSHA256, nullable(c.Messages), deriveCallState(c),
				nullable(c.PromptTokens), nullable(c.CompletionTokens), nullable(c.TotalTokens), nullable(c.CachedTokens),
				nullable(c.ReasoningTokens), now, runID, c.Source, c.CallID); err != nil {
				return fmt.Errorf("evidence: record usage call %d in run %s: %w", i, runID, err)
			}
		}
		return nil
	})
}

// loadUsageCalls returns the usage call observations of runID ("" = all runs)
// by run id, ordered by source, call id and observation.
func loadUsageCalls(ctx context.Context, q queryer, runID string) (map[string][]UsageCall, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, source, call_id, session_id, member_id, request_sha256, messages, state,
		prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens
		FROM usage_calls WHERE ? = '' OR run_id = ? ORDER BY run_id, source, call_id, observation`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load usage calls: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageCall{}
	for rows.Next() {
		var id string
		var c UsageCall
		var messages sql.NullInt64
		var tokens [5]sql.NullInt64
		if err := rows.Scan(&id, &c.Source, &c.CallID, &c.SessionID, &c.MemberID, &c.RequestSHA256, &messages, &c.State,
			&tokens[0], &tokens[1], &tokens[2], &tokens[3], &tokens[4]); err != nil {
			return nil, fmt.Errorf("evidence: load usage calls: %w", err)
		}
		if messages.Valid {
			v := messages.Int64
			c.Messages = &v
		}
		for i, t := range tokens {
			if t.Valid {
				v := t.Int64
				c.setField(i, &v)
			}
		}
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

// FoldUsageCalls folds observations (in recording order) into one UsageCall
// per (source, call id): a non-nil count replaces the earlier one, a nil
// count keeps it; identity fields come from the first observation, and a
// later observation naming another session is reported in the returned
// conflicts. State is re-derived for the folded call. The result is ordered
// by source, then call id.
func FoldUsageCalls(obs []UsageCall) (folded []UsageCall, conflicts []string) {
	type key struct{ source, call string }
	index := map[key]int{}
	for _, o := range obs {
		k := key{o.Source, o.CallID}
		i, ok := index[k]
		if !ok {
			c := o
			for f := 0; f < 5; f++ {
				c.setField(f, nil)
			}
			index[k] = len(folded)
			folded = append(folded, c)
			i = len(folded) - 1
		}
		c := &folded[i]
		if o.SessionID != c.SessionID {
			conflicts = append(conflicts, fmt.Sprintf("%s call %s observed under sessions %s and %s", o.Source, o.CallID, c.SessionID, o.SessionID))
		}
		if c.Messages == nil && o.Messages != nil {
			c.Messages = o.Messages
		}
		if c.RequestSHA256 == "" {
			c.RequestSHA256 = o.RequestSHA256
		}
		for f := 0; f < 5; f++ {
			if v := o.field(f); v != nil {
				x := *v
				c.setField(f, &x)
			}
		}
	}
	for i := range folded {
		folded[i].State = deriveCallState(folded[i])
	}
	sort.SliceStable(folded, func(i, j int) bool {
		if folded[i].Source != folded[j].Source {
			return folded[i].Source < folded[j].Source
		}
		return folded[i].CallID < folded[j].CallID
	})
	return folded, conflicts
}

// sourceAccount accumulates one source's account of one session.
type sourceAccount struct {
	SourceUsage
	calls  map[string]bool // call ids, for per-call sources
	states map[string]int  // how many calls/rows had each state
}

func newAccount() *sourceAccount {
	a := &sourceAccount{calls: map[string]bool{}, states: map[string]int{}}
	a.State = UsageReported
	zero := [5]int64{}
	a.PromptTokens, a.CompletionTokens, a.TotalTokens, a.CachedTokens, a.ReasoningTokens = &zero[0], &zero[1], &zero[2], &zero[3], &zero[4]
	return a
}

func (a *sourceAccount) field(i int) *int64 {
	return UsageRow{PromptTokens: a.PromptTokens, CompletionTokens: a.CompletionTokens, TotalTokens: a.TotalTokens,
		CachedTokens: a.CachedTokens, ReasoningTokens: a.ReasoningTokens}.field(i)
}

func (a *sourceAccount) setField(i int, v *int64) {
	ptrs := [5]**int64{&a.PromptTokens, &a.CompletionTokens, &a.TotalTokens, &a.CachedTokens, &a.ReasoningTokens}
	*ptrs[i] = v
}

// add sums one call's or row's figures into the account: an unknown addend
// makes the sum unknown. The state is suspect_zero when any addend is, else
// reported or unknown when every addend is, else partial.
func (a *sourceAccount) add(state string, requests int, get func(int) *int64) {
	a.Requests += requests
	a.states[state]++
	n := 0
	for _, c := range a.states {
		n += c
	}
	switch {
	case a.states[UsageSuspectZero] > 0:
		a.State = UsageSuspectZero
	case a.states[UsageReported] == n:
		a.State = UsageReported
	case a.states[UsageUnknown] == n:
		a.State = UsageUnknown
	default:
		a.State = UsagePartial
	}
	for f := 0; f < 5; f++ {
		v, cur := get(f), a.field(f)
		if v == nil || cur == nil {
			a.setField(f, nil)
			continue
		}
		sum := *cur + *v
		a.setField(f, &sum)
	}
}

// ReconcileUsageCalls reconciles each member session's usage across the wire,
// store and gateway sources. It is pure and deterministic (verdicts ordered
// by session id).
//
// calls are per-call observations (folded with FoldUsageCalls); rows are
// session rows (the gateway's usage endpoint, or a source recorded only per
// session). A call belongs to the session the store source (the runtime that
// issued it) attributes it to, or, when the store lacks it, the session the
// wire attributes it to. Per session and source, the totals are sums over
// that session's calls (keyed by call id) or over its rows. Then a session is:
//
//   - "mismatch" when the wire grouped one of its calls under another session
//     (or grouped another session's call under it), or a call id appears in
//     only one of wire and store; Detail names each call;
//   - otherwise "unknown" when any source is missing or not "reported"
//     (partial, unknown, suspect_zero: a zero prompt count on a request that
//     had messages), lacks prompt, completion or total tokens, or the sources
//     name different non-empty member ids;
//   - "conserved" when prompt, completion and total tokens are equal across
//     the three sources, and so are cached and reasoning tokens wherever all
//     three reported them;
//   - "mismatch" otherwise, with Deltas[field] = max - min for each differing
//     field, and Duplicated (with Multiple = k) when the gateway's prompt,
//     completion and total are each exactly k >= 2 times the wire's.
//
// Unknown usage is never counted as zero.
func ReconcileUsageCalls(calls []UsageCall, rows []UsageRow) []UsageVerdict {
	sources := [3]string{SourceWire, SourceStore, SourceGateway}
	folded, conflicts := FoldUsageCalls(calls)
	owner := map[string]string{} // call id -> session (store's attribution first)
	for _, c := range folded {
		if c.Source == SourceStore {
			owner[c.CallID] = c.SessionID
		}
	}
	for _, c := range folded {
		if _, ok := owner[c.CallID]; !ok {
			owner[c.CallID] = c.SessionID
		}
	}
	type session struct {
		members  map[string]bool
		accounts map[string]*sourceAccount
		problems []string
		messages []*int64 // message counts of the session's calls
	}
	sessions := map[string]*session{}
	get := func(id string) *session {
		ss := sessions[id]
		if ss == nil {
			ss = &session{members: map[string]bool{}, accounts: map[string]*sourceAccount{}}
			sessions[id] = ss
		}
		return ss
	}
	for _, c := range folded {
		sid := owner[c.CallID]
		ss := get(sid)
		if c.MemberID != "" {
			ss.members[c.MemberID] = true
		}
		if c.SessionID != sid {
			ss.problems = append(ss.problems, fmt.Sprintf("call %s was grouped under session %s by the %s", c.CallID, c.SessionID, c.Source))
			other := get(c.SessionID)
			other.problems = append(other.problems, fmt.Sprintf("the %s grouped call %s of session %s under this session", c.Source, c.CallID, sid))
		}
		a := ss.accounts[c.Source]
		if a == nil {
			a = newAccount()
			ss.accounts[c.Source] = a
		}
		a.calls[c.CallID] = true
		a.add(c.State, 1, c.field)
		if c.Source == SourceStore || c.Messages != nil {
			ss.messages = append(ss.messages, c.Messages)
		}
	}
	for _, u := range rows {
		ss := get(u.SessionID)
		if u.MemberID != "" {
			ss.members[u.MemberID] = true
		}
		a := ss.accounts[u.Source]
		if a == nil {
			a = newAccount()
			a.calls = nil
			ss.accounts[u.Source] = a
		}
		a.add(u.State, u.Requests, u.field)
	}
	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]UsageVerdict, 0, len(ids))
	for _, id := range ids {
		ss := sessions[id]
		// A session-level source total of zero prompt tokens over requests
		// that had messages (or of unknown message count) is suspect too.
		for _, src := range sources {
			a := ss.accounts[src]
			if a == nil || a.State != UsageReported || a.PromptTokens == nil || *a.PromptTokens != 0 || a.Requests == 0 {
				continue
			}
			hadMessages := len(ss.messages) == 0
			for _, m := range ss.messages {
				if m == nil || *m > 0 {
					hadMessages = true
				}
			}
			if hadMessages {
				a.State = UsageSuspectZero
			}
		}
		members := make([]string, 0, len(ss.members))
		for m := range ss.members {
			members = append(members, m)
		}
		sort.Strings(members)
		v := UsageVerdict{SessionID: id, Verdict: UsageVerdictUnknown, Sources: map[string]SourceUsage{}}
		if len(members) > 0 {
			v.MemberID = members[0]
		}
		for _, src := range sources {
			if a := ss.accounts[src]; a != nil {
				v.Sources[src] = a.SourceUsage
			} else {
				v.Sources[src] = SourceUsage{State: UsageMissing}
			}
		}
		structural := append([]string(nil), ss.problems...)
		// Every per-call source must account for the same calls as the store.
		if st := ss.accounts[SourceStore]; st != nil && st.calls != nil {
			var only []string
			for src, where := range map[string]string{SourceWire: "on the wire", SourceGateway: "in the gateway's records"} {
				a := ss.accounts[src]
				if a == nil || a.calls == nil {
					continue
				}
				for c := range st.calls {
					if !a.calls[c] {
						only = append(only, "call "+c+" is in the store but not "+where)
					}
				}
				for c := range a.calls {
					if !st.calls[c] {
						only = append(only, "call "+c+" is "+where+" but not in the store")
					}
				}
			}
			sort.Strings(only)
			structural = append(structural, only...)
		}
		for _, c := range conflicts {
			if strings.Contains(c, " "+id+" ") || strings.HasSuffix(c, " "+id) {
				structural = append(structural, c)
			}
		}
		var unknown []string
		if len(members) > 1 {
			unknown = append(unknown, "sources name different members: "+strings.Join(members, ", "))
		}
		for _, src := range sources {
			a := ss.accounts[src]
			switch {
			case a == nil:
				unknown = append(unknown, "source "+src+" missing")
			case a.State != UsageReported:
				unknown = append(unknown, "source "+src+" is "+a.State)
			default:
				for f := 0; f < 3; f++ {
					if a.field(f) == nil {
						unknown = append(unknown, "source "+src+" lacks "+usageFieldNames()[f])
					}
				}
			}
		}
		var diffs, notCompared []string
		for f, name := range usageFieldNames() {
			vals := [3]*int64{}
			complete := true
			for i, src := range sources {
				if a := ss.accounts[src]; a != nil && a.State == UsageReported {
					vals[i] = a.field(f)
				}
				if vals[i] == nil {
					complete = false
				}
			}
			if !complete {
				notCompared = append(notCompared, name)
				continue
			}
			lo, hi := *vals[0], *vals[0]
			for _, x := range vals[1:] {
				lo, hi = min(lo, *x), max(hi, *x)
			}
			if hi != lo {
				if v.Deltas == nil {
					v.Deltas = map[string]int64{}
				}
				v.Deltas[name] = hi - lo
				diffs = append(diffs, fmt.Sprintf("%s: wire=%d store=%d gateway=%d", name, *vals[0], *vals[1], *vals[2]))
			}
		}
		switch {
		case len(structural) > 0:
			v.Verdict = UsageMismatch
			v.Detail = strings.Join(append(structural, diffs...), "; ")
		case len(unknown) > 0:
			v.Verdict = UsageVerdictUnknown
			v.Detail = strings.Join(unknown, "; ")
		case len(diffs) > 0:
			v.Verdict = UsageMismatch
			v.Detail = strings.Join(diffs, "; ")
		default:
			v.Verdict = UsageConserved
			v.Detail = "prompt, completion and total tokens equal across wire, store and gateway"
		}
		if v.Verdict == UsageMismatch {
			if k := duplicationFactor(ss.accounts[SourceWire], ss.accounts[SourceGateway]); k >= 2 {
				v.Duplicated, v.Multiple = true, k
				v.Detail += fmt.Sprintf("; duplicated: the gateway counts %d times what the wire saw", k)
			}
		}
		if v.Verdict != UsageVerdictUnknown && len(notCompared) > 0 && len(notCompared) < 5 {
			v.Detail += "; not compared (not reported by every source): " + strings.Join(notCompared, ", ")
		}
		out = append(out, v)
	}
	return out
}

// duplicationFactor returns k >= 2 when gateway prompt, completion and total
// tokens are each exactly k times the wire's (all known, wire's > 0), else 0.
func duplicationFactor(wire, gw *sourceAccount) int64 {
	if wire == nil || gw == nil {
		return 0
	}
	var k int64
	for f := 0; f < 3; f++ {
		w, g := wire.field(f), gw.field(f)
		if w == nil || g == nil || *w <= 0 || *g%*w != 0 {
			return 0
		}
		m := *g / *w
		if k != 0 && m != k {
			return 0
		}
		k = m
	}
	if k < 2 {
		return 0
	}
	return k
}
