package formation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// memSink keeps events and artifacts in memory; the evidence store is not what these tests are about.
type memSink struct {
	mu        sync.Mutex
	events    []runtime.Event
	artifacts map[string][]byte
}

func (s *memSink) Emit(ctx context.Context, ev runtime.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !json.Valid(ev.Payload) || ev.Payload[0] != '{' {
		return errors.New("payload is not a JSON object")
	}
	s.events = append(s.events, ev)
	return nil
}

func (s *memSink) PutArtifact(ctx context.Context, name, mediaType string, data []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.artifacts == nil {
		s.artifacts = map[string][]byte{}
	}
	s.artifacts[name] = data
	return "digest-of-" + name, nil
}

// memberEvents returns the event types of one member, in order.
func (s *memSink) memberEvents(member string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if e.MemberID == member {
			out = append(out, e.Type)
		}
	}
	return out
}

// ofType returns the events of one type, in order.
func (s *memSink) ofType(typ string) []runtime.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Event
	for _, e := range s.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// count returns how many events there are.
func (s *memSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// payload decodes an event payload into a map.
func payload(t *testing.T, ev runtime.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func setup(t *testing.T, faults ...reference.Fault) (*runtime.Engine, *memSink, *reference.Running) {
	t.Helper()
	return setupWith(t, reference.Config{Faults: faults})
}

func setupWith(t *testing.T, cfg reference.Config) (*runtime.Engine, *memSink, *reference.Running) {
	t.Helper()
	ref, err := reference.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	e, err := runtime.NewEngine(runtime.EngineConfig{Provider: client, Model: reference.ModelID, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	return e, sink, ref
}

func team(t *testing.T, formation string, ids ...string) runtime.Team {
	t.Helper()
	tm := runtime.Team{RunID: "run-test", Formation: formation}
	task := "Write double.go.\n" + reference.FormatAssignment(reference.Assignment{Task: "double", Language: "go",
		Package: "double", Files: []string{"double.go", "double_test.go"}})
	for _, id := range ids {
		dir := filepath.Join(t.TempDir(), id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		tm.Members = append(tm.Members, runtime.MemberSpec{ID: id, DomainRole: "executor", Goal: "executor", Task: task,
			AllowedTools: []string{"write_file"}, Dir: dir})
	}
	return tm
}

func TestSequentialRunsMembersInOrderWithContext(t *testing.T) {
	e, sink, ref := setup(t)
	tm := team(t, "sequential", "a", "b")
	res, err := Run(context.Background(), e, tm)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || len(res.Members) != 2 || res.Members[0].MemberID != "a" || res.Members[1].MemberID != "b" {
		t.Fatalf("result %+v", res)
	}
	for i, m := range res.Members {
		if m.SessionID != "run-test-"+tm.Members[i].ID || !m.Usage.Known() || m.Usage.Requests != 2 || m.ToolCalls != 2 {
			t.Fatalf("member %s: %+v", m.MemberID, m)
		}
		if _, err := os.Stat(filepath.Join(tm.Members[i].Dir, "double.go")); err != nil {
			t.Fatalf("member %s wrote nothing: %v", m.MemberID, err)
		}
		if ref.Server().Turns(m.SessionID) != 2 {
			t.Fatalf("the provider saw %d requests for %s", ref.Server().Turns(m.SessionID), m.SessionID)
		}
	}
	// a finished before b started: sequential, not concurrent.
	var order []string
	for _, ev := range sink.events {
		if ev.Type == "member_started" || ev.Type == "member_completed" {
			order = append(order, ev.Type+":"+ev.MemberID)
		}
	}
	want := "member_started:a,member_completed:a,member_started:b,member_completed:b"
	if strings.Join(order, ",") != want {
		t.Fatalf("order %v, want %s", order, want)
	}
	// b's request carried a's output as context.
	var req map[string]any
	if err := json.Unmarshal(sink.artifacts["provider/run-test-b/0/request.json"], &req); err != nil {
		t.Fatal(err)
	}
	msgs, _ := json.Marshal(req["messages"])
	if !strings.Contains(string(msgs), "[a] ") {
		t.Fatalf("b did not receive a's output: %s", msgs)
	}
	// The parsed reply is kept beside the raw bytes, in canonical form.
	var parsed struct {
		Content   string
		ToolCalls []struct{ Name, Arguments string } `json:"tool_calls"`
		Usage     *struct{ TotalTokens int64 }
	}
	if err := json.Unmarshal(sink.artifacts["provider/run-test-a/0/message.json"], &parsed); err != nil || len(parsed.ToolCalls) != 2 ||
		parsed.ToolCalls[0].Name != "write_file" || parsed.Usage == nil {
		t.Fatalf("parsed reply of request 0: %+v %v", parsed, err)
	}
	if err := json.Unmarshal(sink.artifacts["provider/run-test-a/1/message.json"], &parsed); err != nil || parsed.Content != res.Members[0].Output {
		t.Fatalf("parsed reply of request 1: %+v %v", parsed, err)
	}
	// Causal order per member: started, then exchanges and tool calls, then completed last.
	ev := sink.memberEvents("a")
	if ev[0] != "member_started" || ev[len(ev)-1] != "member_completed" {
		t.Fatalf("events of a: %v", ev)
	}
	for i, typ := range ev {
		if typ == "tool_result" && ev[i-1] != "tool_call" {
			t.Fatalf("tool_result without its intent right before it: %v", ev)
		}
	}
}

func TestParallelKeepsAFailedMemberFailedAndSummarizesIt(t *testing.T) {
	// Member c's provider answers 500 on every request: it fails, a and b succeed.
	e, _, _ := setup(t, reference.Fault{Member: "c", Turn: -1, Kind: reference.FaultHTTP500})
	tm := team(t, "parallel", "c", "a", "b")
	res, err := Run(context.Background(), e, tm)
	if err != nil {
		t.Fatal(err)
	}
	if res.Success {
		t.Fatal("team succeeded although member c failed")
	}
	byID := map[string]runtime.MemberResult{}
	for _, m := range res.Members {
		byID[m.MemberID] = m
	}
	if byID["c"].Success || !byID["a"].Success || !byID["b"].Success {
		t.Fatalf("member outcomes %+v", res.Members)
	}
	if !strings.Contains(res.FinalOutput, "failed members:\n- c: ") {
		t.Fatalf("final output lacks the failed-member summary: %q", res.FinalOutput)
	}
	// Deterministic: the same failure gives the same summary.
	e2, _, _ := setup(t, reference.Fault{Member: "c", Turn: -1, Kind: reference.FaultHTTP500})
	res2, err := Run(context.Background(), e2, team(t, "parallel", "c", "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	summary := func(s string) string { return s[strings.Index(s, "failed members:"):] }
	if summary(res.FinalOutput) != summary(res2.FinalOutput) {
		t.Fatalf("failed-member summary not deterministic:\n%s\n%s", res.FinalOutput, res2.FinalOutput)
	}
}

func TestParallelRefusesSharedWorkingDirectories(t *testing.T) {
	e, sink, _ := setup(t)
	tm := team(t, "parallel", "a", "b")
	tm.Members[1].Dir = tm.Members[0].Dir
	if _, err := Run(context.Background(), e, tm); err == nil || !strings.Contains(err.Error(), "share working directory") {
		t.Fatalf("shared directory: %v", err)
	}
	for _, ev := range sink.events {
		if ev.Type == "member_started" {
			t.Fatal("a member started although the configuration was refused")
		}
	}
}

func TestUnknownFormationAndInvalidTeamsFailBeforeExecution(t *testing.T) {
	e, sink, _ := setup(t)
	if _, err := Run(context.Background(), e, team(t, "nosuch", "a")); !errors.Is(err, ErrUnknownFormation) {
		t.Fatalf("unknown formation: %v", err)
	}
	dup := team(t, "sequential", "a", "a")
	if _, err := Run(context.Background(), e, dup); err == nil {
		t.Fatal("duplicate member ids accepted")
	}
	if len(sink.events) != 0 {
		t.Fatalf("events emitted for a refused team: %d", len(sink.events))
	}
}

func TestAMemberWithoutUsageKeepsItUnknown(t *testing.T) {
	e, _, _ := setup(t, reference.Fault{Member: "a", Turn: 0, Kind: reference.FaultDropUsage})
	res, err := Run(context.Background(), e, team(t, "sequential", "a"))
	if err != nil {
		t.Fatal(err)
	}
	u := res.Members[0].Usage
	if u.Known() || u.Unknown != 1 || u.Requests != 2 {
		t.Fatalf("usage %+v: a response without usage must leave the member's usage unknown", u)
	}
}

func TestRegistryDescriptorsAreComplete(t *testing.T) {
	for _, f := range Registry() {
		if f.Name == "" || f.Doc == "" || f.Run == nil {
			t.Fatalf("incomplete descriptor %+v", f)
		}
		if _, err := Lookup(f.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// Every ensemble mode listed is one the options accept, with a contract; a name not listed is
// refused naming the listed ones.
func TestEnsembleModesAreTheModesOptionsAccept(t *testing.T) {
	var names []string
	for _, m := range EnsembleModes() {
		if m.Name == "" || m.Doc == "" {
			t.Fatalf("incomplete ensemble mode %+v", m)
		}
		if err := (Options{Ensemble: EnsembleOptions{Mode: m.Name}}).validate("parallel"); err != nil {
			t.Fatalf("mode %s: %v", m.Name, err)
		}
		names = append(names, m.Name)
	}
	err := (Options{Ensemble: EnsembleOptions{Mode: "lottery"}}).validate("parallel")
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Fatalf("unknown mode: %v, want ErrInvalidConfig naming %v", err, names)
	}
	if !strings.Contains(EnsembleContract(), fmt.Sprint(DefaultMaxAnswerChars)) {
		t.Fatalf("the contract does not state the default answer limit: %s", EnsembleContract())
	}
}
