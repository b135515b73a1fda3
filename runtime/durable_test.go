package runtime

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/tool"
)

type nopProvider struct{}

func (nopProvider) Complete(context.Context, provider.Request) (*provider.Response, error) {
	panic("no request is expected")
}

// A resumed engine charges what the restored turns consumed to the budget: tool calls and known
// tokens, and unknown token usage stays unknown.
func TestRestoredTurnsCountAgainstTheBudget(t *testing.T) {
	budget, err := policy.NewBudget(policy.Limits{}, policy.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	state := &DurableState{Version: DurableStateVersion, RunID: "r", Formation: "sequential", Turns: []TurnState{
		{MemberID: "a", Invocation: 1, Status: TurnCompleted, Result: MemberResult{MemberID: "a", ToolCalls: 3,
			Usage: provider.UsageTotal{Requests: 2, TotalTokens: 40}}},
		{MemberID: "b", Invocation: 1, Status: TurnCompleted, Result: MemberResult{MemberID: "b", ToolCalls: 1,
			Usage: provider.UsageTotal{Requests: 1, Unknown: 1}}},
	}}
	_, err = NewEngine(EngineConfig{Provider: nopProvider{}, Model: "m", Sink: &recordSink{},
		BoundaryOptions: []tool.Option{tool.WithBudget(budget)},
		Durable:         &DurableConfig{Restore: state, Checkpoint: func(context.Context, json.RawMessage) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if a := budget.Member("a"); a.ToolCalls != 3 || a.Tokens != 40 || a.TokensUnknown {
		t.Fatalf("member a %+v", a)
	}
	if b := budget.Member("b"); b.ToolCalls != 1 || !b.TokensUnknown {
		t.Fatalf("member b %+v", b)
	}
	if tm := budget.Team(); tm.ToolCalls != 4 || !tm.TokensUnknown {
		t.Fatalf("team %+v", tm)
	}
}
