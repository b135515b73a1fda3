package evidence

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Usage sources (DESIGN.md vocabulary).
const (
	SourceWire    = "wire"    // the gateway's view of the raw responses
	SourceStore   = "store"   // what the runtime accumulated
	SourceGateway = "gateway" // the gateway's usage endpoint
)

// Usage row states.
const (
	UsageReported = "reported" // prompt, completion and total tokens were all reported
	UsagePartial  = "partial"  // some responses or fields lacked usage
	UsageUnknown  = "unknown"  // no usage available
)

// Usage verdicts.
const (
	UsageConserved      = "conserved" // all three sources reported and agree
	UsageMismatch       = "mismatch"  // all three reported, and they disagree
	UsageVerdictUnknown = "unknown"   // a source is missing or did not report; never counted as zero
)

// UsageRow is one source's token accounting for one member session. Token
// counts are nil when unknown — never 0 in their place.
type UsageRow struct {
	MemberID  string // member id; may be "" when the source does not know it
	SessionID string // required: the member session id
	Source    string // "wire" | "store" | "gateway"
	State     string // "reported" | "partial" | "unknown"
	Requests  int    // requests this source counted (>= 0)

	PromptTokens, CompletionTokens, TotalTokens, CachedTokens, ReasoningTokens *int64 // tokens; NULL = unknown
}

// UsageVerdict is the per-session reconciliation of the three sources.
type UsageVerdict struct {
	MemberID  string
	SessionID string
	Verdict   string           // "conserved" | "mismatch" | "unknown"
	Deltas    map[string]int64 // when mismatch: per differing field ("prompt_tokens", ...), max - min across the sources (tokens)
	Detail    string           // human-readable: which source was missing/unknown, which field differed with each source's value
}

// usageFieldNames names the token fields in UsageRow.field order.
func usageFieldNames() [5]string {
	return [5]string{"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens"}
}

func (u UsageRow) field(i int) *int64 {
	switch i {
	case 0:
		return u.PromptTokens
	case 1:
		return u.CompletionTokens
	case 2:
		return u.TotalTokens
	case 3:
		return u.CachedTokens
	default:
		return u.ReasoningTokens
	}
}

func (u UsageRow) validate(i int) error {
	bad := func(field, format string, args ...any) error {
		return fieldErr(ErrInvalidArgument, fmt.Sprintf("usage[%d].%s", i, field), format, args...)
	}
	switch {
	case u.SessionID == "" || len(u.SessionID) > maxIDLen || !utf8.ValidString(u.SessionID):
		return bad("session_id", "required, at most %d bytes of UTF-8", maxIDLen)
	case len(u.MemberID) > maxIDLen || !utf8.ValidString(u.MemberID):
		return bad("member_id", "at most %d bytes of UTF-8", maxIDLen)
	case u.Source != SourceWire && u.Source != SourceStore && u.Source != SourceGateway:
		return bad("source", "%q is not one of wire, store, gateway", u.Source)
	case u.State != UsageReported && u.State != UsagePartial && u.State != UsageUnknown:
		return bad("state", "%q is not one of reported, partial, unknown", u.State)
	case u.Requests < 0:
		return bad("requests", "%d is negative", u.Requests)
	}
	for f, name := range usageFieldNames() {
		v := u.field(f)
		if v != nil && *v < 0 {
			return bad(name, "%d is negative", *v)
		}
		if v == nil && u.State == UsageReported && f < 3 {
			return bad(name, "unknown (nil) in a row whose state is reported; record it as partial")
		}
	}
	return nil
}

// RecordUsage appends usage rows to run runID. Rows are validated first; none
// is stored when one is invalid.
//
// Errors: *FieldError (ErrInvalidArgument) naming the row and field — a
// "reported" row must carry prompt, completion and total tokens; ErrNoRun;
// ErrFinalized; ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) RecordUsage(ctx context.Context, runID string, rows ...UsageRow) error {
	for i, u := range rows {
		if err := u.validate(i); err != nil {
			return err
		}
	}
	if err := s.beginWrite(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: record usage in run %s: %w", runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return err
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(ordinal), 0) + 1 FROM usage WHERE run_id = ?`, runID).Scan(&next); err != nil {
		return fmt.Errorf("evidence: record usage in run %s: %w", runID, err)
	}
	now := utcMicro(time.Now())
	for i, u := range rows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage (run_id, ordinal, member_id, session_id, source, state, requests,
			prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, next+int64(i), u.MemberID, u.SessionID, u.Source, u.State, int64(u.Requests),
			nullable(u.PromptTokens), nullable(u.CompletionTokens), nullable(u.TotalTokens),
			nullable(u.CachedTokens), nullable(u.ReasoningTokens), now); err != nil {
			return fmt.Errorf("evidence: record usage row %d in run %s: %w", i, runID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: record usage in run %s: %w", runID, err)
	}
	return nil
}

func nullable(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// sourceTotal aggregates one source's rows for one session.
type sourceTotal struct {
	rows   int
	state  string    // reported only when every row is reported
	tokens [5]*int64 // nil when any row lacks the field
}

// ReconcileUsage reconciles the wire, store and gateway accounts of each
// member session. It is pure and deterministic (verdicts ordered by session id).
//
// Rows are grouped by SessionID; several rows of one source are summed (a
// field is unknown when any of them lacks it; the state is "reported" only
// when all are). A session is:
//   - "unknown" when any source is missing, not "reported", lacks prompt,
//     completion or total tokens, or the sources name different non-empty
//     member ids;
//   - "conserved" when prompt, completion and total tokens are equal across
//     all three sources, and so are cached and reasoning tokens wherever all
//     three reported them;
//   - "mismatch" otherwise, with Deltas[field] = max - min over the sources
//     for each differing field and Detail listing each source's value.
//
// Unknown usage is never counted as zero.
func ReconcileUsage(rows []UsageRow) []UsageVerdict {
	sources := [3]string{SourceWire, SourceStore, SourceGateway}
	type session struct {
		members map[string]bool
		totals  map[string]*sourceTotal
		order   []string
	}
	sessions := map[string]*session{}
	for _, u := range rows {
		ss := sessions[u.SessionID]
		if ss == nil {
			ss = &session{members: map[string]bool{}, totals: map[string]*sourceTotal{}}
			sessions[u.SessionID] = ss
		}
		if u.MemberID != "" {
			ss.members[u.MemberID] = true
		}
		t := ss.totals[u.Source]
		if t == nil {
			t = &sourceTotal{state: UsageReported}
			for f := range t.tokens {
				zero := int64(0)
				t.tokens[f] = &zero
			}
			ss.totals[u.Source] = t
		}
		t.rows++
		if u.State != UsageReported {
			t.state = u.State
		}
		for f := range t.tokens {
			v := u.field(f)
			if v == nil || t.tokens[f] == nil {
				t.tokens[f] = nil
				continue
			}
			sum := *t.tokens[f] + *v
			t.tokens[f] = &sum
		}
	}
	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]UsageVerdict, 0, len(ids))
	for _, id := range ids {
		ss := sessions[id]
		members := make([]string, 0, len(ss.members))
		for m := range ss.members {
			members = append(members, m)
		}
		sort.Strings(members)
		v := UsageVerdict{SessionID: id, Verdict: UsageVerdictUnknown}
		if len(members) > 0 {
			v.MemberID = members[0]
		}
		var unknown []string
		if len(members) > 1 {
			unknown = append(unknown, "sources name different members: "+strings.Join(members, ", "))
		}
		for _, src := range sources {
			t := ss.totals[src]
			switch {
			case t == nil:
				unknown = append(unknown, "source "+src+" missing")
			case t.state != UsageReported:
				unknown = append(unknown, "source "+src+" is "+t.state)
			default:
				for f := 0; f < 3; f++ {
					if t.tokens[f] == nil {
						unknown = append(unknown, "source "+src+" lacks "+usageFieldNames()[f])
					}
				}
			}
		}
		if len(unknown) > 0 {
			v.Detail = strings.Join(unknown, "; ")
			out = append(out, v)
			continue
		}
		var diffs, notCompared []string
		for f, name := range usageFieldNames() {
			vals := [3]*int64{}
			complete := true
			for i, src := range sources {
				vals[i] = ss.totals[src].tokens[f]
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
		if len(diffs) > 0 {
			v.Verdict = UsageMismatch
			v.Detail = strings.Join(diffs, "; ")
		} else {
			v.Verdict = UsageConserved
			v.Detail = "prompt, completion and total tokens equal across wire, store and gateway"
		}
		if len(notCompared) > 0 {
			v.Detail += "; not compared (not reported by every source): " + strings.Join(notCompared, ", ")
		}
		out = append(out, v)
	}
	return out
}

// RecordUsageVerdicts appends usage verdicts (normally ReconcileUsage's
// output) to run runID. A "conserved" verdict is stored only when
// ReconcileUsage over the usage rows recorded in the run also finds that
// session conserved: the store never records conservation its own evidence
// does not show.
//
// Errors: *FieldError (ErrInvalidArgument) for an unknown verdict or empty
// session id; ErrUsageContradicted; ErrNoRun; ErrFinalized; ErrRunNotOpen;
// ErrReadOnly; ErrClosed.
func (s *Store) RecordUsageVerdicts(ctx context.Context, runID string, v []UsageVerdict) error {
	for i, uv := range v {
		field := func(name string) string { return fmt.Sprintf("usage_verdicts[%d].%s", i, name) }
		switch {
		case uv.Verdict != UsageConserved && uv.Verdict != UsageMismatch && uv.Verdict != UsageVerdictUnknown:
			return fieldErr(ErrInvalidArgument, field("verdict"), "%q is not one of conserved, mismatch, unknown", uv.Verdict)
		case uv.SessionID == "" || !utf8.ValidString(uv.SessionID) || len(uv.SessionID) > maxIDLen:
			return fieldErr(ErrInvalidArgument, field("session_id"), "required, at most %d bytes of UTF-8", maxIDLen)
		case !utf8.ValidString(uv.MemberID) || !utf8.ValidString(uv.Detail):
			return fieldErr(ErrInvalidArgument, field("detail"), "not valid UTF-8")
		}
	}
	if err := s.beginWrite(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: record usage verdicts in run %s: %w", runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return err
	}
	usage, err := loadUsage(ctx, tx, runID)
	if err != nil {
		return err
	}
	recomputed := map[string]UsageVerdict{}
	for _, rv := range ReconcileUsage(usage[runID]) {
		recomputed[rv.SessionID] = rv
	}
	for _, uv := range v {
		if uv.Verdict != UsageConserved {
			continue
		}
		if rv, ok := recomputed[uv.SessionID]; !ok || rv.Verdict != UsageConserved {
			why := "no usage rows recorded for it"
			if ok {
				why = "recorded usage reconciles to " + rv.Verdict + ": " + rv.Detail
			}
			return fmt.Errorf("evidence: run %s session %s claimed conserved but %s: %w", runID, uv.SessionID, why, ErrUsageContradicted)
		}
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(ordinal), 0) + 1 FROM usage_verdicts WHERE run_id = ?`, runID).Scan(&next); err != nil {
		return fmt.Errorf("evidence: record usage verdicts in run %s: %w", runID, err)
	}
	now := utcMicro(time.Now())
	for i, uv := range v {
		deltas := uv.Deltas
		if deltas == nil {
			deltas = map[string]int64{}
		}
		d, err := canonical(deltas)
		if err != nil {
			return fmt.Errorf("evidence: usage verdict %d deltas: %w", i, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO usage_verdicts (run_id, ordinal, member_id, session_id, verdict, deltas, detail, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, runID, next+int64(i), uv.MemberID, uv.SessionID, uv.Verdict, string(d), uv.Detail, now); err != nil {
			return fmt.Errorf("evidence: record usage verdict %d in run %s: %w", i, runID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: record usage verdicts in run %s: %w", runID, err)
	}
	return nil
}
