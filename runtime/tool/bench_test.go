package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/assay-audit/assay/runtime/policy"
)

// BenchmarkInvoke measures the boundary's own cost per call (snapshot, canonical JSON, schema
// validation, policy file decision, budget reservation, intent and outcome through an in-memory
// journal) around a tool that does nothing.
func BenchmarkInvoke(b *testing.B) {
	f, digest, err := policy.ParseFile([]byte("version: 1\ndefault: deny\nrules:\n  - {id: secrets, paths: ['**/.env'], decision: deny}\n  - {id: go, tools: [noop], paths: ['**/*.go'], decision: allow}\n"))
	if err != nil {
		b.Fatal(err)
	}
	budget, _ := policy.NewBudget(policy.Limits{ToolCalls: 1 << 40}, policy.Limits{})
	noop := Tool{Name: "noop", Access: Write, Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) { return "ok", nil }}
	bd := NewBoundary(map[string]Tool{"noop": noop}, discardJournal{}, WithPolicy(policy.NewEngine(digest, 0, f.Policy("p"))), WithBudget(budget),
		WithRedactor(policy.NewRedactor("sk-secret-value-123")))
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		o, err := bd.Invoke(context.Background(), Call{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: fmt.Sprint("c", i),
			Tool: "noop", Arguments: `{"path":"pkg/a.go","content":"package a\n"}`, Root: dir, Allowed: []string{"noop"}})
		if err != nil || o.State != StateSucceeded {
			b.Fatal(o, err)
		}
	}
}

type discardJournal struct{}

func (discardJournal) Intent(ctx context.Context, in Intent) error  { return nil }
func (discardJournal) Outcome(ctx context.Context, o Outcome) error { return nil }
