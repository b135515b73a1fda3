package policy

import (
	"errors"
	"fmt"
	"sync"
)

// Limits are hard limits on what members may consume. Zero means no limit is configured for that
// quantity; a negative limit is invalid.
type Limits struct {
	// ToolCalls counts dispatches through the boundary, retries and reconciliation lookups included.
	ToolCalls int64 `json:"tool_calls" yaml:"tool_calls"`
	// Tokens counts provider tokens (prompt + completion) as the responses reported them.
	Tokens int64 `json:"tokens" yaml:"tokens"`
}

// Usage is what a member (or the team) consumed.
type Usage struct {
	ToolCalls int64 `json:"tool_calls"`
	// Tokens is the sum of known token charges; TokensUnknown is true when any charge had no usage
	// report, and Tokens is then a lower bound, never the total.
	Tokens        int64 `json:"tokens"`
	TokensUnknown bool  `json:"tokens_unknown"`
	// Reserved counts tool calls and tokens reserved and not yet charged or released.
	ReservedToolCalls int64 `json:"reserved_tool_calls"`
	ReservedTokens    int64 `json:"reserved_tokens"`
}

// ErrBudgetExhausted is returned when a reservation would exceed a hard limit.
var ErrBudgetExhausted = errors.New("budget exhausted")

// ErrBudgetUnevaluable is returned when a hard token limit is configured and the usage so far is
// unknown: a limit that cannot be evaluated denies (rule 11).
var ErrBudgetUnevaluable = errors.New("budget limit cannot be evaluated")

// Budget holds per-member and per-team limits, shared across concurrent members. Capacity is
// reserved atomically before dispatch, then charged or released. It is safe for concurrent use.
type Budget struct {
	team      Limits
	member    Limits
	overrides map[string]Limits

	mu    sync.Mutex
	used  map[string]*Usage
	total Usage
}

// NewBudget returns a budget with team-wide limits and default per-member limits.
func NewBudget(team, perMember Limits) (*Budget, error) {
	for _, l := range []Limits{team, perMember} {
		if l.ToolCalls < 0 || l.Tokens < 0 {
			return nil, fmt.Errorf("budget: negative limit %+v", l)
		}
	}
	return &Budget{team: team, member: perMember, overrides: map[string]Limits{}, used: map[string]*Usage{}}, nil
}

// SetMemberLimits overrides the per-member limits of one member (e.g. its tool_budget).
func (b *Budget) SetMemberLimits(member string, l Limits) error {
	if l.ToolCalls < 0 || l.Tokens < 0 {
		return fmt.Errorf("budget: member %s: negative limit %+v", member, l)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.overrides[member] = l
	return nil
}

// Reservation is capacity held for one dispatch. Exactly one of Commit or Release takes effect;
// later calls do nothing.
type Reservation struct {
	b             *Budget
	member        string
	calls, tokens int64
	done          bool
	Purpose       string
}

// Reserve atomically reserves calls tool calls and tokens tokens for member, against the member's
// limits and the team's. Two members racing for the last unit: exactly one gets it. It returns
// ErrBudgetExhausted or ErrBudgetUnevaluable (wrapped, naming member, limit and usage) when it
// cannot. purpose is kept for the record ("dispatch", "retry", "reconciliation").
func (b *Budget) Reserve(member string, calls, tokens int64, purpose string) (*Reservation, error) {
	if calls < 0 || tokens < 0 {
		return nil, fmt.Errorf("budget: negative reservation for %s", member)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.usageLocked(member)
	ml := b.member
	if o, ok := b.overrides[member]; ok {
		ml = o
	}
	for _, c := range []struct {
		scope string
		l     Limits
		u     *Usage
	}{{"member " + member, ml, u}, {"team", b.team, &b.total}} {
		if c.l.ToolCalls > 0 && c.u.ToolCalls+c.u.ReservedToolCalls+calls > c.l.ToolCalls {
			return nil, fmt.Errorf("%w: %s tool calls: limit %d, used %d, reserved %d", ErrBudgetExhausted, c.scope,
				c.l.ToolCalls, c.u.ToolCalls, c.u.ReservedToolCalls)
		}
		if c.l.Tokens > 0 && tokens > 0 && c.u.TokensUnknown {
			return nil, fmt.Errorf("%w: %s tokens: limit %d but earlier usage was not reported", ErrBudgetUnevaluable, c.scope, c.l.Tokens)
		}
		if c.l.Tokens > 0 && c.u.Tokens+c.u.ReservedTokens+tokens > c.l.Tokens {
			return nil, fmt.Errorf("%w: %s tokens: limit %d, used %d, reserved %d", ErrBudgetExhausted, c.scope,
				c.l.Tokens, c.u.Tokens, c.u.ReservedTokens)
		}
	}
	u.ReservedToolCalls += calls
	u.ReservedTokens += tokens
	b.total.ReservedToolCalls += calls
	b.total.ReservedTokens += tokens
	return &Reservation{b: b, member: member, calls: calls, tokens: tokens, Purpose: purpose}, nil
}

// ReserveRequest admits one provider request of member against the member's and the team's token
// limits (Limits.Tokens), before the request is sent. A response's size is not known in advance, so
// the reservation holds 1 token: a request is admitted while tokens used plus tokens reserved by
// requests in flight stay below each limit, so a request is refused once the tokens so far reach
// a limit, and two members racing for the last token get one request out between them. Responses
// in flight together can take usage past a limit; the next request is then refused. After the
// response, Commit the tokens it reported (nil when it reported none: usage becomes unknown, and
// every later request under a token limit is refused with ErrBudgetUnevaluable); Release when
// nothing was sent. It reserves no tool call. Errors: ErrBudgetExhausted or ErrBudgetUnevaluable,
// wrapped, naming the member or "team", the limit and the usage. A nil *Budget admits every
// request and returns a nil *Reservation, whose Commit and Release do nothing. Safe for concurrent
// use.
func (b *Budget) ReserveRequest(member string) (*Reservation, error) {
	if b == nil {
		return nil, nil
	}
	return b.Reserve(member, 0, 1, PurposeProviderRequest)
}

// PurposeProviderRequest is the purpose of a ReserveRequest reservation.
const PurposeProviderRequest = "provider_request"

func (b *Budget) usageLocked(member string) *Usage {
	u, ok := b.used[member]
	if !ok {
		u = &Usage{}
		b.used[member] = u
	}
	return u
}

// Commit charges the reservation: its tool calls, and tokens used (nil: the usage was not reported,
// which makes token usage unknown for the member and the team; it is never counted as zero).
func (r *Reservation) Commit(tokens *int64) {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	u := b.usageLocked(r.member)
	for _, x := range []*Usage{u, &b.total} {
		x.ReservedToolCalls -= r.calls
		x.ReservedTokens -= r.tokens
		x.ToolCalls += r.calls
		if tokens == nil {
			x.TokensUnknown = true
		} else {
			x.Tokens += *tokens
		}
	}
}

// Release returns the reservation unused (the call was not dispatched).
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	u := b.usageLocked(r.member)
	for _, x := range []*Usage{u, &b.total} {
		x.ReservedToolCalls -= r.calls
		x.ReservedTokens -= r.tokens
	}
}

// Member returns the member's usage so far.
func (b *Budget) Member(member string) Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.usageLocked(member)
}

// Team returns the team's usage so far.
func (b *Budget) Team() Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Restore charges what member consumed before this budget existed — the earlier processes of a
// resumed run — without a reservation: calls tool calls, and tokens (nil: unknown, which makes the
// member's and the team's token usage unknown, never zero). Limits are not checked here; the next
// reservation sees the restored usage. Safe on a nil Budget (no-op).
func (b *Budget) Restore(member string, calls int64, tokens *int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.usageLocked(member)
	for _, x := range []*Usage{u, &b.total} {
		x.ToolCalls += calls
		if tokens == nil {
			x.TokensUnknown = true
		} else {
			x.Tokens += *tokens
		}
	}
}
