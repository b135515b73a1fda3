package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// memJournal records intents and outcomes in order; failIntent makes Intent fail.
type memJournal struct {
	mu         sync.Mutex
	log        []string
	intents    []Intent
	outcomes   []Outcome
	records    []Record
	failIntent bool
}

func (j *memJournal) Intent(ctx context.Context, in Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failIntent {
		return errors.New("disk full")
	}
	j.log = append(j.log, "intent:"+in.CallID)
	j.intents = append(j.intents, in)
	j.records = append(j.records, Record{Intent: &in})
	return nil
}

func (j *memJournal) Outcome(ctx context.Context, out Outcome) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.log = append(j.log, "outcome:"+out.CallID+":"+out.State)
	j.outcomes = append(j.outcomes, out)
	j.records = append(j.records, Record{Outcome: &out})
	return nil
}

// countingTool is a write tool that counts its executions and logs dispatch into the journal's log.
func countingTool(j *memJournal, n *atomic.Int32, gate chan struct{}) Tool {
	return Tool{Name: "effect", Access: Write, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			n.Add(1)
			j.mu.Lock()
			j.log = append(j.log, "dispatch")
			j.mu.Unlock()
			if gate != nil {
				<-gate
			}
			return "ok " + string(args), nil
		}}
}

func call(dir, id, tool, args string) Call {
	return Call{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: id, Tool: tool, Arguments: args,
		Root: dir, Allowed: []string{"write_file", "read_file", "effect"}}
}

func TestWriteFileStaysInsideTheMemberDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "member")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symlink inside the member directory that points outside it.
	if err := os.Symlink(parent, filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	j := &memJournal{}
	b := NewBoundary(Builtins(), j)
	ctx := context.Background()
	cases := []struct {
		name, args string
		ok         bool
	}{
		{"relative path", `{"path":"pkg/a.go","content":"package a"}`, true},
		{"absolute path", `{"path":"` + filepath.Join(parent, "x.go") + `","content":"x"}`, false},
		{"dot-dot escape", `{"path":"../x.go","content":"x"}`, false},
		{"nested dot-dot escape", `{"path":"pkg/../../x.go","content":"x"}`, false},
		{"symlink escape", `{"path":"escape/x.go","content":"x"}`, false},
		{"missing content", `{"path":"b.go"}`, false},
		{"unknown field", `{"path":"b.go","content":"x","mode":"0777"}`, false},
		{"not an object", `["b.go"]`, false},
		{"malformed JSON", `{"path":"b.go",`, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := b.Invoke(ctx, call(dir, string(rune('a'+i)), "write_file", c.args))
			if err != nil {
				t.Fatal(err)
			}
			if (out.State == StateSucceeded) != c.ok {
				t.Fatalf("state %s (%s), want ok=%v", out.State, out.Error, c.ok)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(parent, "x.go")); err == nil {
		t.Fatal("a file was written outside the member directory")
	}
	if data, err := os.ReadFile(filepath.Join(dir, "pkg", "a.go")); err != nil || string(data) != "package a" {
		t.Fatalf("relative write: %q %v", data, err)
	}
}

func TestRefusedCallsAreRecordedAndNeverDispatched(t *testing.T) {
	dir := t.TempDir()
	j := &memJournal{}
	var n atomic.Int32
	tools := Builtins()
	tools["effect"] = countingTool(j, &n, nil)
	b := NewBoundary(tools, j)
	ctx := context.Background()

	notAllowed := call(dir, "c1", "effect", `{}`)
	notAllowed.Allowed = []string{"read_file"}
	for _, c := range []Call{notAllowed, call(dir, "c2", "no_such_tool", `{}`), call(dir, "", "effect", `{}`)} {
		out, err := b.Invoke(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if out.State != StateFailed || !strings.Contains(out.Error, "refused before dispatch") {
			t.Fatalf("%s: state %s %q", c.Tool, out.State, out.Error)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("a refused call was dispatched %d times", n.Load())
	}
	for _, in := range j.intents {
		if in.Dispatched {
			t.Fatalf("refused intent marked dispatched: %+v", in)
		}
	}
}

func TestIntentIsRecordedBeforeDispatchAndAJournalFailureStopsIt(t *testing.T) {
	dir := t.TempDir()
	j := &memJournal{}
	var n atomic.Int32
	b := NewBoundary(map[string]Tool{"effect": countingTool(j, &n, nil)}, j)
	out, err := b.Invoke(context.Background(), call(dir, "c1", "effect", `{"b":1, "a":2}`))
	if err != nil || out.State != StateSucceeded {
		t.Fatalf("%v %+v", err, out)
	}
	want := []string{"intent:c1", "dispatch", "outcome:c1:succeeded"}
	if strings.Join(j.log, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v, want %v", j.log, want)
	}
	if string(j.intents[0].Arguments) != `{"a":2,"b":1}` || len(j.intents[0].PayloadSHA256) != 64 ||
		j.intents[0].IdempotencyKey != "run-1:m1:c1" {
		t.Fatalf("intent not canonical or not keyed by run: %+v", j.intents[0])
	}

	failing := &memJournal{failIntent: true}
	b2 := NewBoundary(map[string]Tool{"effect": countingTool(failing, &n, nil)}, failing)
	if _, err := b2.Invoke(context.Background(), call(dir, "c2", "effect", `{}`)); err == nil {
		t.Fatal("no error although the intent could not be recorded")
	}
	if n.Load() != 1 {
		t.Fatalf("dispatched without a durable intent (%d executions)", n.Load())
	}
}

func TestDuplicateCallIDs(t *testing.T) {
	dir := t.TempDir()
	j := &memJournal{}
	var n atomic.Int32
	gate := make(chan struct{})
	b := NewBoundary(map[string]Tool{"effect": countingTool(j, &n, gate)}, j)
	ctx := context.Background()

	// Two concurrent deliveries of the same command: one execution, both see its outcome.
	var wg sync.WaitGroup
	outs := make([]Outcome, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := b.Invoke(ctx, call(dir, "same", "effect", `{"x":1}`))
			if err != nil {
				t.Error(err)
			}
			outs[i] = o
		}()
	}
	// Let the first execution finish only after both deliveries were made.
	for n.Load() == 0 {
		// the first delivery is dispatching; the second one blocks on it or has not arrived yet
		goruntime.Gosched()
	}
	close(gate)
	wg.Wait()
	if n.Load() != 1 {
		t.Fatalf("concurrent duplicates executed %d times", n.Load())
	}
	if !reflect.DeepEqual(outs[0], outs[1]) || outs[0].State != StateSucceeded {
		t.Fatalf("duplicates saw different outcomes: %+v", outs)
	}

	// The same id later with a different payload: a conflict, not the cached success.
	if _, err := b.Invoke(ctx, call(dir, "same", "effect", `{"x":2}`)); !errors.Is(err, ErrDuplicateCall) {
		t.Fatalf("different payload under the same id: %v, want ErrDuplicateCall", err)
	}
	if n.Load() != 1 {
		t.Fatalf("conflicting duplicate executed")
	}
}

// A succeeded write records what it left on disk: the SHA-256 of each touched path's file right
// after the call. A read records nothing; a dry_run write records nothing (nothing was written).
func TestWriteOutcomeObservesTheFileItLeft(t *testing.T) {
	dir := t.TempDir()
	j := &memJournal{}
	b := NewBoundary(Builtins(), j)
	ctx := context.Background()
	out, err := b.Invoke(ctx, call(dir, "w1", "write_file", `{"path":"sub/a.go","content":"package a\n"}`))
	if err != nil || out.State != StateSucceeded {
		t.Fatalf("write: %+v %v", out, err)
	}
	sum := sha256.Sum256([]byte("package a\n"))
	if out.Files["sub/a.go"] != hex.EncodeToString(sum[:]) || len(out.Files) != 1 {
		t.Fatalf("observed files %v, want sub/a.go -> %x", out.Files, sum)
	}
	if out, _ := b.Invoke(ctx, call(dir, "r1", "read_file", `{"path":"sub/a.go"}`)); out.State != StateSucceeded || out.Files != nil {
		t.Fatalf("a read observed files: %+v", out)
	}
	dry := NewBoundary(Builtins(), &memJournal{}, WithMode(DryRun))
	if out, _ := dry.Invoke(ctx, call(dir, "w2", "write_file", `{"path":"b.go","content":"package b\n"}`)); out.Files != nil {
		t.Fatalf("a simulated write observed files: %+v", out)
	}
}
