package harness

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// countingTransport counts the HTTP requests that actually leave the client.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// memSink keeps a member's events in memory: the evidence store is not what this test is about.
type memSink struct {
	mu     sync.Mutex
	events []runtime.Event
}

func (s *memSink) Emit(_ context.Context, ev runtime.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return nil
}

func (s *memSink) PutArtifact(context.Context, string, string, []byte) (string, error) {
	return strings.Repeat("0", 64), nil
}

func (s *memSink) ofType(typ string) []runtime.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Event
	for _, ev := range s.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// Two members racing for the last token of a team budget: exactly one provider request goes out
// (counted on the wire to a real reference server) and its member completes; the other member is
// refused naming the team token budget, and the refusal is an event. Run with -race.
func TestTwoMembersRacingForTheLastTokenSendOneRequest(t *testing.T) {
	ctx := context.Background()
	ref, err := reference.Start(ctx, reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ref.Close() })
	for round := 0; round < 10; round++ {
		wire := &countingTransport{}
		client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1,
			HTTPClient: &http.Client{Transport: wire}})
		if err != nil {
			t.Fatal(err)
		}
		const limit = 1000
		budget, err := policy.NewBudget(policy.Limits{Tokens: limit}, policy.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		// Another member already spent all but the last token.
		r, err := budget.ReserveRequest("earlier")
		if err != nil {
			t.Fatal(err)
		}
		spent := int64(limit - 1)
		r.Commit(&spent)

		sink := &memSink{}
		engine, err := runtime.NewEngine(runtime.EngineConfig{Provider: client, Model: reference.ModelID, Sink: sink,
			BoundaryOptions: []tool.Option{tool.WithBudget(budget)}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		team := runtime.Team{RunID: "budget-race", Formation: "parallel", Members: []runtime.MemberSpec{
			{ID: "exec-1", DomainRole: "executor", Goal: "g", Task: "t", Dir: dir},
			{ID: "exec-2", DomainRole: "executor", Goal: "g", Task: "t", Dir: dir}}}
		results := make([]runtime.MemberResult, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, m := range team.Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = engine.RunTurn(ctx, team, m, runtime.Turn{})
			}()
		}
		close(start)
		wg.Wait()

		if n := wire.n.Load(); n != 1 {
			t.Fatalf("round %d: %d requests reached the provider, want exactly 1", round, n)
		}
		if n := len(sink.ofType("provider_exchange")); n != 1 {
			t.Fatalf("round %d: %d provider exchanges recorded, want 1", round, n)
		}
		// The winner's reply ended its turn; the loser failed naming the team token budget.
		if refusals := sink.ofType("budget_refused"); len(refusals) != 1 {
			t.Fatalf("round %d: %d budget_refused events, want 1", round, len(refusals))
		}
		won, lost := 0, 0
		for _, res := range results {
			switch {
			case res.Success:
				won++
			case strings.Contains(res.Error, "token budget") && strings.Contains(res.Error, "team tokens: limit 1000"):
				lost++
			default:
				t.Fatalf("round %d: member %s failed with %q, want a failure naming the team token budget", round, res.MemberID, res.Error)
			}
		}
		if won != 1 || lost != 1 {
			t.Fatalf("round %d: %d members completed, %d refused; want one each", round, won, lost)
		}
		if u := budget.Team(); u.TokensUnknown || u.Tokens <= limit || u.ReservedTokens != 0 {
			t.Fatalf("round %d: team usage %+v: want the winner's reported tokens charged past the limit, nothing left reserved", round, u)
		}
	}
}

// budgetEvents returns a stored run's budget_refused payloads and its provider exchanges.
func budgetEvents(t *testing.T, evs []evidence.StoredEvent) (refused []map[string]any, exchanges int) {
	t.Helper()
	for _, ev := range evs {
		switch ev.Type {
		case "budget_refused":
			var p map[string]any
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			refused = append(refused, p)
		case "provider_exchange":
			exchanges++
		}
	}
	return refused, exchanges
}

// --team-tokens 1 admits the first provider request (no tokens used yet) and refuses the second
// once the first response's tokens are charged: one request on the wire, the case rejected with
// the members check naming the team token budget, and the limits in boundary_configured.
func TestTeamTokenBudgetRefusesTheSecondRequest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	out := t.TempDir()
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t), TeamTokens: 1, MemberTokens: 5_000_000})
	c := s.Cases[0]
	if c.Verdict.Verdict != "rejected" || checkStatus(c)["members"] != "failed" {
		t.Fatalf("verdict %s, members %s; want rejected with the members check failed", c.Verdict.Verdict, checkStatus(c)["members"])
	}
	for _, ch := range c.Checks {
		if ch.Name == "members" && (!strings.Contains(ch.Detail, "token budget") || !strings.Contains(ch.Detail, "team tokens: limit 1")) {
			t.Fatalf("members check does not name the budget: %s", ch.Detail)
		}
	}
	_, evs := storedEvents(t, out, c.RunID)
	refused, exchanges := budgetEvents(t, evs)
	if exchanges != 1 || len(refused) == 0 {
		t.Fatalf("%d provider exchanges, %d refusals; want the first request out and every later one refused", exchanges, len(refused))
	}
	for _, r := range refused {
		if e, _ := r["error"].(string); !strings.Contains(e, policy.ErrBudgetExhausted.Error()) || !strings.Contains(e, "team tokens") {
			t.Fatalf("refusal %v does not say the team token budget is exhausted", r)
		}
	}
	configured := false
	for _, ev := range evs {
		if ev.Type == "boundary_configured" {
			var p struct {
				MemberTokens int64 `json:"member_tokens"`
				TeamTokens   int64 `json:"team_tokens"`
			}
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				t.Fatal(err)
			}
			configured = p.TeamTokens == 1 && p.MemberTokens == 5_000_000
		}
	}
	if !configured {
		t.Fatal("boundary_configured does not record the token limits")
	}
}

// A response without usage (reference fault drop_usage) under a member token limit: the member's
// next request is refused as unevaluable — its usage is unknown, never counted as 0 — and nothing
// more is sent for it.
func TestUnknownUsageUnderATokenLimitRefusesTheNextRequest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	out := t.TempDir()
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t), MemberTokens: 5_000_000,
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultDropUsage}}})
	c := s.Cases[0]
	if c.Verdict.Verdict != "rejected" {
		t.Fatalf("verdict %s, want rejected", c.Verdict.Verdict)
	}
	_, evs := storedEvents(t, out, c.RunID)
	refused, _ := budgetEvents(t, evs)
	if len(refused) != 1 {
		t.Fatalf("%d refusals, want exec-1's second request refused: %v", len(refused), refused)
	}
	e, _ := refused[0]["error"].(string)
	usage, _ := refused[0]["member_usage"].(map[string]any)
	if !strings.Contains(e, policy.ErrBudgetUnevaluable.Error()) || usage["tokens_unknown"] != true || usage["tokens"] != float64(0) {
		t.Fatalf("refusal %v: want unevaluable over unknown usage (tokens_unknown, no tokens counted)", refused[0])
	}
	exec1 := 0
	for _, ev := range evs {
		if ev.Type == "provider_exchange" && ev.MemberID == "exec-1" {
			exec1++
		}
	}
	if exec1 != 1 {
		t.Fatalf("exec-1 sent %d requests, want only the one whose usage was dropped", exec1)
	}
}

// Negative token limits are bad input: one line naming them, nothing written.
func TestNegativeTokenBudgetsAreRefusedBeforeWriting(t *testing.T) {
	for _, o := range []Options{{MemberTokens: -1}, {TeamTokens: -5}} {
		o.OutDir = t.TempDir() + "/out"
		_, err := Run(context.Background(), o)
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.HasSuffix(oe.Field, "Tokens") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%+v: err %v, want one line with an *OptionError naming the token budget", o, err)
		}
		if _, err := os.Stat(o.OutDir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was created", o.OutDir)
		}
	}
}
