package evidence

import (
	"context"
	"database/sql"
	"fmt"
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
	// UsageSuspectZero: a zero prompt count on a request that had messages
	// (or whose message count is unknown). A chat request with messages
	// cannot have cost zero prompt tokens, so the figure is not trusted.
	UsageSuspectZero = "suspect_zero"
	// UsageMissing is a source's state in UsageVerdict.Sources when it
	// recorded nothing for the session. It is never stored in a usage row.
	UsageMissing = "missing"
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
	// Duplicated: a mismatch where the gateway's prompt, completion and total
	// tokens are each exactly Multiple (>= 2) times the wire's (the gateway
	// counted calls more than once).
	Duplicated bool
	Multiple   int64 // the factor when Duplicated; 0 otherwise
	// Sources holds each source's state and session totals ("wire", "store",
	// "gateway"); a source that recorded nothing has state "missing". Nil for
	// verdicts recorded by schema v1.
	Sources map[string]SourceUsage
}

// SourceUsage is one source's account of one session, as reconciled.
type SourceUsage struct {
	// State is "reported", "partial", "unknown", "suspect_zero" or "missing".
	State string `json:"state"`
	// Requests is the number of calls (per-call sources) or the requests the
	// session row counted.
	Requests int `json:"requests"`
	// Token totals; nil (JSON null) when unknown — never 0 in their place.
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	TotalTokens      *int64 `json:"total_tokens"`
	CachedTokens     *int64 `json:"cached_tokens"`
	ReasoningTokens  *int64 `json:"reasoning_tokens"`
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
	case u.State != UsageReported && u.State != UsagePartial && u.State != UsageUnknown && u.State != UsageSuspectZero:
		return bad("state", "%q is not one of reported, partial, unknown, suspect_zero", u.State)
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
	return s.inRunTx(ctx, runID, "record usage", func(tx *sql.Tx) error {
		var next int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(ordinal), 0) + 1 FROM usage WHERE run_id = ?`, runID).Scan(&next); err != nil {
			return fmt.Errorf("evidence: record usage in run %s: %w", runID, err)
		}
		now := utcMicro(time.Now())
		for i, u := range rows {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM usage_calls WHERE run_id = ? AND session_id = ? AND source = ?`,
				runID, u.SessionID, u.Source).Scan(&n); err != nil {
				return fmt.Errorf("evidence: record usage in run %s: %w", runID, err)
			}
			if n > 0 {
				return fieldErr(ErrInvalidArgument, fmt.Sprintf("usage[%d].source", i),
					"session %s already has %s usage recorded per call; a source is accounted per call or per session, not both", u.SessionID, u.Source)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage (run_id, ordinal, member_id, session_id, source, state, requests,
			prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				runID, next+int64(i), u.MemberID, u.SessionID, u.Source, u.State, int64(u.Requests),
				nullable(u.PromptTokens), nullable(u.CompletionTokens), nullable(u.TotalTokens),
				nullable(u.CachedTokens), nullable(u.ReasoningTokens), now); err != nil {
				return fmt.Errorf("evidence: record usage row %d in run %s: %w", i, runID, err)
			}
		}
		return nil
	})
}

func nullable(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// ReconcileUsage reconciles session-level usage rows only; it is
// ReconcileUsageCalls(nil, rows).
func ReconcileUsage(rows []UsageRow) []UsageVerdict { return ReconcileUsageCalls(nil, rows) }

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
	return s.inRunTx(ctx, runID, "record usage verdicts", func(tx *sql.Tx) error {
		usage, err := loadUsage(ctx, tx, runID)
		if err != nil {
			return err
		}
		calls, err := loadUsageCalls(ctx, tx, runID)
		if err != nil {
			return err
		}
		recomputed := map[string]UsageVerdict{}
		for _, rv := range ReconcileUsageCalls(calls[runID], usage[runID]) {
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
			// Per-source states and duplication are the store's own reading of
			// its evidence, not the caller's.
			var sources any
			dup, multiple := uv.Duplicated, uv.Multiple
			if rv, ok := recomputed[uv.SessionID]; ok {
				dup, multiple = rv.Duplicated, rv.Multiple
				b, err := canonical(rv.Sources)
				if err != nil {
					return fmt.Errorf("evidence: usage verdict %d sources: %w", i, err)
				}
				sources = string(b)
			}
			var mult any
			if dup {
				mult = multiple
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO usage_verdicts (run_id, ordinal, member_id, session_id, verdict, deltas, detail,
			recorded_at, duplicated, multiple, sources)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, runID, next+int64(i), uv.MemberID, uv.SessionID, uv.Verdict, string(d), uv.Detail,
				now, dup, mult, sources); err != nil {
				return fmt.Errorf("evidence: record usage verdict %d in run %s: %w", i, runID, err)
			}
		}
		return nil
	})
}
