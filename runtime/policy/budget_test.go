package policy

import (
	"errors"
	"testing"
)

// ReserveRequest holds one token per request in flight: a request is admitted while tokens used
// plus in flight stay below the limit, refused once they reach it, and refused as unevaluable once
// any earlier response reported no usage — while tool calls, which spend no tokens, still go on.
func TestReserveRequestAgainstTokenLimits(t *testing.T) {
	var none *Budget
	if r, err := none.ReserveRequest("a"); err != nil || r != nil {
		t.Fatalf("nil budget: %v %v", r, err)
	}
	b, err := NewBudget(Limits{Tokens: 100}, Limits{Tokens: 60})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.ReserveRequest("a")
	if err != nil {
		t.Fatal(err)
	}
	if u := b.Member("a"); u.ReservedTokens != 1 || u.ReservedToolCalls != 0 {
		t.Fatalf("in flight: %+v", u)
	}
	used := int64(59)
	r.Commit(&used)
	r2, err := b.ReserveRequest("a") // 59 < 60: admitted
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReserveRequest("a"); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("59 used + 1 in flight reach the member limit of 60: %v", err)
	}
	r2.Release()
	more := int64(41)
	r3, _ := b.ReserveRequest("b")
	r3.Commit(&more)
	if _, err := b.ReserveRequest("c"); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("team used 100 of 100: %v", err)
	}
	u, _ := NewBudget(Limits{}, Limits{Tokens: 1000})
	r4, _ := u.ReserveRequest("a")
	r4.Commit(nil)
	if _, err := u.ReserveRequest("a"); !errors.Is(err, ErrBudgetUnevaluable) {
		t.Fatalf("unknown usage under a member limit: %v", err)
	}
	if m := u.Member("a"); !m.TokensUnknown || m.Tokens != 0 {
		t.Fatalf("unknown usage counted: %+v", m)
	}
	if _, err := u.ReserveRequest("b"); err != nil {
		t.Fatalf("another member's unknown usage refused b under a per-member limit: %v", err)
	}
	if _, err := u.Reserve("a", 1, 0, "dispatch"); err != nil {
		t.Fatalf("a tool call spends no tokens, yet was refused: %v", err)
	}
}

// Usage restored from earlier processes counts against the limits: a member that already spent
// its tool calls is refused, and restored unknown tokens make a token limit unevaluable.
func TestBudgetRestoreCountsEarlierUsage(t *testing.T) {
	b, err := NewBudget(Limits{}, Limits{ToolCalls: 2, Tokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	ten := int64(10)
	b.Restore("a", 2, &ten)
	if _, err := b.Reserve("a", 1, 0, "dispatch"); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("a member with its calls spent before the resume reserved another: %v", err)
	}
	b.Restore("b", 0, nil)
	if _, err := b.ReserveRequest("b"); !errors.Is(err, ErrBudgetUnevaluable) {
		t.Fatalf("restored unknown usage under a token limit: %v", err)
	}
	if u := b.Team(); u.ToolCalls != 2 || u.Tokens != 10 || !u.TokensUnknown {
		t.Fatalf("team usage %+v", u)
	}
}
