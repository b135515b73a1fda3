package formation

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// countingProvider counts provider requests per session.
type countingProvider struct {
	p  provider.Provider
	mu sync.Mutex
	n  map[string]int
}

func (c *countingProvider) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	c.mu.Lock()
	c.n[req.SessionID]++
	c.mu.Unlock()
	return c.p.Complete(ctx, req)
}

// journalOf reads a sink's tool_call/tool_result events as journal records.
func journalOf(t *testing.T, s *memSink) []tool.Record {
	t.Helper()
	var out []tool.Record
	for _, ev := range s.events {
		switch ev.Type {
		case "tool_call":
			var in tool.Intent
			if err := json.Unmarshal(ev.Payload, &in); err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Record{Intent: &in})
		case "tool_result":
			var o tool.Outcome
			if err := json.Unmarshal(ev.Payload, &o); err != nil {
				t.Fatal(err)
			}
			out = append(out, tool.Record{Outcome: &o})
		}
	}
	return out
}

// durableTeams are the six durable formations, each with member "a" writing double_test.go, which
// the policy sends to an approver.
func durableTeams(t *testing.T) map[string]runtime.Team {
	refl := reflectionTeam(t, 2)
	refl.Members[0].ID = "a" // the generator
	return map[string]runtime.Team{
		"sequential":   build(t, "sequential", writer("a"), writer("b")),
		"pipeline":     build(t, "pipeline", writer("a"), writer("b")),
		"parallel":     build(t, "parallel", writer("a"), writer("b")),
		"hierarchical": build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor), writer("a"), writer("b")),
		"consensus":    build(t, "consensus", writer("a"), writer("b")),
		"reflection":   refl,
	}
}

const askTestFile = "version: 1\ndefault: allow\nrules:\n  - id: tests-need-approval\n    tools: [write_file]\n    members: [a]\n    paths: [double_test.go]\n    decision: ask\n"

// Each durable formation pauses when member a's write of double_test.go needs an approval: the
// member is paused, no new member starts, and the checkpoint holds the exact pending call. Each
// resume is a new engine and boundary (as a new process would build) restoring the last checkpoint
// and the journal: the approval is granted, the approved call dispatches exactly once, completed
// members are restored without a provider request, and the team finally succeeds.
func TestDurableFormationsPauseAndResume(t *testing.T) {
	ref, err := reference.Start(context.Background(), reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	pf, digest, err := policy.ParseFile([]byte(askTestFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, tm := range durableTeams(t) {
		t.Run(name, func(t *testing.T) {
			client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			var journal []tool.Record
			var state *runtime.DurableState
			completedBefore := map[string]bool{} // sessions whose every turn had completed before a resume
			for attempt := 0; ; attempt++ {
				if attempt > 4 {
					t.Fatal("still paused after 4 resumes")
				}
				counter := &countingProvider{p: client, n: map[string]int{}}
				sink := &memSink{}
				var last json.RawMessage
				approvals := policy.NewApprovals(nil)
				e, err := runtime.NewEngine(runtime.EngineConfig{Provider: counter, Model: reference.ModelID, Sink: sink,
					BoundaryOptions: []tool.Option{tool.WithPolicy(policy.NewEngine(digest, 0, pf.Policy("p.yaml"))), tool.WithApprovals(approvals)},
					Durable: &runtime.DurableConfig{Restore: state, Checkpoint: func(_ context.Context, s json.RawMessage) error {
						last = append(json.RawMessage(nil), s...)
						return nil
					}}})
				if err != nil {
					t.Fatal(err)
				}
				if state != nil {
					members := func(id string) (tool.MemberContext, bool) {
						m, ok := tm.Member(id)
						if !ok {
							return tool.MemberContext{}, false
						}
						allowed, ro := e.MemberTools(m)
						return tool.MemberContext{Root: m.Dir, Allowed: allowed, ReadOnly: ro}, true
					}
					if _, err := e.Boundary().Recover(context.Background(), journal, members); err != nil {
						t.Fatal(err)
					}
					for _, p := range approvals.ListPending() {
						if _, err := approvals.Grant(policy.Grant{Binding: p.Binding, Approver: "test", Source: "api",
							ExpiresAt: time.Now().Add(time.Hour), Disclose: true}); err != nil {
							t.Fatal(err)
						}
					}
					if _, err := e.Boundary().DispatchApproved(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				res, err := RunWith(context.Background(), e, tm, Options{Resume: state != nil})
				if err != nil {
					t.Fatal(err)
				}
				journal = append(journal, journalOf(t, sink)...)
				if state != nil {
					completed := 0
					for _, tr := range state.Turns {
						if tr.Status == runtime.TurnCompleted {
							completed++
						}
					}
					if got := len(sink.ofType("member_restored")); got != completed {
						t.Fatalf("resume %d restored %d turns, the checkpoint had %d completed", attempt, got, completed)
					}
				}
				for sess := range completedBefore {
					if counter.n[sess] != 0 && singleTurn[name] {
						t.Fatalf("resume %d sent %d requests for %s, whose turns had all completed", attempt, counter.n[sess], sess)
					}
				}
				paused, why := e.Paused()
				if attempt == 0 {
					if !paused || res.Success || !byID(res)["a"].Paused {
						t.Fatalf("first run: paused %v (%v), result %+v; want member a paused", paused, why, res)
					}
					if name == "sequential" {
						if b := byID(res)["b"]; !b.Paused || !strings.Contains(b.Error, runtime.ErrRunPaused.Error()) || counter.n["run-test-b"] != 0 {
							t.Fatalf("member b started after the pause: %+v (%d requests)", b, counter.n["run-test-b"])
						}
					}
					if counter.n["run-test-b"] != 0 && name == "pipeline" {
						t.Fatal("pipeline stage b ran after stage a paused")
					}
				}
				var s runtime.DurableState
				if err := json.Unmarshal(last, &s); err != nil {
					t.Fatalf("checkpoint: %v", err)
				}
				if !paused {
					if !res.Success {
						t.Fatalf("resume %d: not paused and not successful: %+v", attempt, res)
					}
					if attempt == 0 {
						t.Fatal("the run never paused")
					}
					break
				}
				if s.Paused != paused || len(s.Pauses) == 0 {
					t.Fatalf("checkpoint does not record the pause: %+v", s)
				}
				found := false
				for _, tr := range s.Turns {
					if tr.Status == runtime.TurnPaused && tr.MemberID == "a" && strings.Contains(tr.Pending[0].Arguments, "double_test.go") {
						found = true
					}
					if tr.Status == runtime.TurnCompleted {
						completedBefore[tr.SessionID] = true
					}
				}
				for _, tr := range s.Turns {
					if tr.Status != runtime.TurnCompleted {
						delete(completedBefore, tr.SessionID)
					}
				}
				if !found {
					t.Fatalf("the checkpoint does not hold a's pending write of double_test.go: %s", last)
				}
				state = &s
			}
			// The approved write happened, exactly once over every run.
			if _, err := os.Stat(filepath.Join(tm.Members[indexOf(tm, "a")].Dir, "double_test.go")); err != nil {
				t.Fatalf("the approved write did not happen: %v", err)
			}
			effs, err := tool.Replay(journal, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, ef := range effs {
				if ef.MemberID == "a" && strings.Contains(string(ef.Intent.Arguments), "double_test.go") {
					dispatches := 0
					for _, r := range journal {
						if r.Intent != nil && r.Intent.IdempotencyKey == ef.IdempotencyKey && r.Intent.Dispatched {
							dispatches++
						}
					}
					if dispatches != 1 || ef.State != "succeeded" {
						t.Fatalf("approved write %s: %d dispatches, state %s", ef.IdempotencyKey, dispatches, ef.State)
					}
				}
			}
		})
	}
}

// singleTurn are the formations whose members have one turn each: a member with a completed turn
// must not see another request after a resume.
var singleTurn = map[string]bool{"sequential": true, "pipeline": true, "parallel": true, "hierarchical": true}

func indexOf(tm runtime.Team, id string) int {
	for i, m := range tm.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// A resume whose formation asks for a turn with another input than the recorded one is refused for
// that turn without a provider request; a resume request without a checkpoint is refused before
// anything runs.
func TestResumeRefusesDivergenceAndMissingCheckpoint(t *testing.T) {
	e, sink, _ := setup(t)
	_, err := RunWith(context.Background(), e, build(t, "sequential", writer("a")), Options{Resume: true})
	if !errors.Is(err, ErrResumeUnavailable) || sink.count() != 0 {
		t.Fatalf("resume without a checkpoint: %v (%d events)", err, sink.count())
	}

	ref, err := reference.Start(context.Background(), reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingProvider{p: client, n: map[string]int{}}
	tm := build(t, "sequential", writer("a"))
	state := &runtime.DurableState{Version: runtime.DurableStateVersion, RunID: tm.RunID, Formation: "sequential",
		Turns: []runtime.TurnState{{MemberID: "a", SessionID: "run-test-a", Invocation: 1, InputSHA256: strings.Repeat("0", 64),
			Status: runtime.TurnCompleted, Result: runtime.MemberResult{MemberID: "a", Success: true, Output: "{}"}}}}
	e2, err := runtime.NewEngine(runtime.EngineConfig{Provider: counter, Model: reference.ModelID, Sink: &memSink{},
		Durable: &runtime.DurableConfig{Restore: state, Checkpoint: func(context.Context, json.RawMessage) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunWith(context.Background(), e2, tm, Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if a := byID(res)["a"]; a.Success || !strings.Contains(a.Error, runtime.ErrResumeDiverged.Error()) || counter.n["run-test-a"] != 0 {
		t.Fatalf("diverged turn: %+v, %d requests", a, counter.n["run-test-a"])
	}
	// A checkpoint of another team run is refused the same way.
	state.Turns[0].InputSHA256 = ""
	state.RunID = "another-run"
	e3, err := runtime.NewEngine(runtime.EngineConfig{Provider: counter, Model: reference.ModelID, Sink: &memSink{},
		Durable: &runtime.DurableConfig{Restore: state, Checkpoint: func(context.Context, json.RawMessage) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = RunWith(context.Background(), e3, tm, Options{Resume: true})
	if a := byID(res)["a"]; a.Success || !strings.Contains(a.Error, "another-run") || counter.n["run-test-a"] != 0 {
		t.Fatalf("checkpoint of another run: %+v", a)
	}
	// A member bound now to another explicit session than its checkpointed turn's is refused: the
	// turn is not restored under the new identity (issue 22 defect 6).
	state.RunID = tm.RunID
	rebound := tm
	rebound.Members = slices.Clone(tm.Members)
	rebound.Members[0].SessionID = "someone-else"
	e4, err := runtime.NewEngine(runtime.EngineConfig{Provider: counter, Model: reference.ModelID, Sink: &memSink{},
		Durable: &runtime.DurableConfig{Restore: state, Checkpoint: func(context.Context, json.RawMessage) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	res, _ = RunWith(context.Background(), e4, rebound, Options{Resume: true})
	if a := byID(res)["a"]; a.Success || !strings.Contains(a.Error, "recorded under session run-test-a") || counter.n["someone-else"] != 0 {
		t.Fatalf("a turn restored under another session: %+v", a)
	}
}

// gatedProvider holds the first request of one session until gate closes.
type gatedProvider struct {
	p       provider.Provider
	session string
	gate    chan struct{}
	once    sync.Once
	// asked, when not nil, is closed when session's first request arrives; every other session's
	// requests wait for it, so that member is in its turn before any other can pause the run.
	asked chan struct{}
}

func (g *gatedProvider) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	if req.SessionID == g.session {
		held := false
		g.once.Do(func() { held = true })
		if held {
			if g.asked != nil {
				close(g.asked)
			}
			<-g.gate
		}
	} else if g.asked != nil {
		select {
		case <-g.asked:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.p.Complete(ctx, req)
}

// A member already in its turn when the run pauses dispatches nothing more (SAFETY.md rule 6: the
// pause is re-checked before every effect): b gets its tool-call reply only after a paused for an
// approval, and stops with its calls pending, checkpointed for the resume (issue 22 defect 5).
func TestARunPauseStopsMembersAlreadyInATurn(t *testing.T) {
	ref, err := reference.Start(context.Background(), reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	pf, digest, err := policy.ParseFile([]byte(askTestFile))
	if err != nil {
		t.Fatal(err)
	}
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	var last json.RawMessage
	// b's first request is answered only once a checkpoint records the run paused, and a's requests
	// go out only once b's first has arrived: b is in its turn when a pauses the run (on a loaded
	// machine a could otherwise pause before b asked anything, and b would stop before its request).
	paused := make(chan struct{})
	var once sync.Once
	e, err := runtime.NewEngine(runtime.EngineConfig{Provider: &gatedProvider{p: client, session: "run-test-b", gate: paused, asked: make(chan struct{})}, Model: reference.ModelID,
		Sink: sink, BoundaryOptions: []tool.Option{tool.WithPolicy(policy.NewEngine(digest, 0, pf.Policy("p.yaml"))), tool.WithApprovals(policy.NewApprovals(nil))},
		Durable: &runtime.DurableConfig{Checkpoint: func(_ context.Context, s json.RawMessage) error {
			last = append(json.RawMessage(nil), s...)
			var st runtime.DurableState
			if json.Unmarshal(s, &st) == nil && st.Paused {
				once.Do(func() { close(paused) })
			}
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b")), Options{})
	b := byID(res)["b"]
	if !b.Paused || b.ToolCalls != 0 {
		t.Fatalf("b: paused %v, %d tool calls; want paused with nothing dispatched", b.Paused, b.ToolCalls)
	}
	for _, ev := range sink.ofType("tool_call") {
		if ev.MemberID == "b" {
			t.Fatalf("b dispatched after the run paused: %s", ev.Payload)
		}
	}
	var s runtime.DurableState
	if err := json.Unmarshal(last, &s); err != nil {
		t.Fatal(err)
	}
	for _, tr := range s.Turns {
		if tr.MemberID == "b" && (tr.Status != runtime.TurnPaused || len(tr.Pending) == 0) {
			t.Fatalf("b's turn checkpointed %s with %d pending call(s); want paused with its calls pending", tr.Status, len(tr.Pending))
		}
	}
}
