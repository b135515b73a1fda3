package tool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/assay-audit/assay/runtime/effect"
)

// The crash case of SAFETY.md: kill -9 between intent and outcome, then restart. The child is this
// test binary re-executed with crashChildEnv set; it records through a durable JSON-lines journal,
// dispatches a write to a file-backed backend, reports that the backend committed, and is killed
// before the outcome is recorded.

const (
	crashChildEnv = "ASSAY_TOOL_CRASH_CHILD"
	askChildEnv   = "ASSAY_TOOL_ASK_CHILD"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		os.Exit(3) // crashChild never returns normally
	}
	os.Exit(m.Run())
}

// fileJournal appends intents and outcomes as JSON lines and fsyncs each before returning: an
// intent is durable when Intent returns.
type fileJournal struct {
	mu sync.Mutex
	f  *os.File
}

type journalLine struct {
	Intent  *Intent  `json:"intent,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
}

func openFileJournal(path string) (*fileJournal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &fileJournal{f: f}, nil
}

func (j *fileJournal) write(l journalLine) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(data, '\n')); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *fileJournal) Intent(ctx context.Context, in Intent) error {
	return j.write(journalLine{Intent: &in})
}
func (j *fileJournal) Outcome(ctx context.Context, out Outcome) error {
	return j.write(journalLine{Outcome: &out})
}

func readFileJournal(path string) (intents []Intent, outcomes []Outcome, err error) {
	recs, err := readFileRecords(path)
	for _, r := range recs {
		if r.Intent != nil {
			intents = append(intents, *r.Intent)
		}
		if r.Outcome != nil {
			outcomes = append(outcomes, *r.Outcome)
		}
	}
	return intents, outcomes, err
}

func readFileRecords(path string) (records []Record, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var l journalLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			return nil, fmt.Errorf("journal line %q: %w", line, err)
		}
		records = append(records, Record{Intent: l.Intent, Outcome: l.Outcome})
	}
	return records, nil
}

// fileBackend commits an effect by appending a line to receipts/<key>; Lookup reads it. Commits
// are counted across processes by the number of lines.
type fileBackend struct{ dir string }

func (be fileBackend) file(key string) string {
	return filepath.Join(be.dir, strings.ReplaceAll(key, ":", "_"))
}

func (be fileBackend) commit(key string) error {
	f, err := os.OpenFile(be.file(key), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString("committed " + key + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

func (be fileBackend) commits(key string) int {
	data, err := os.ReadFile(be.file(key))
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

func (be fileBackend) Lookup(ctx context.Context, q effect.Query) (effect.Receipt, bool, error) {
	n := be.commits(q.IdempotencyKey)
	if n == 0 {
		return effect.Receipt{}, false, nil
	}
	return effect.Receipt{IdempotencyKey: q.IdempotencyKey, Committed: true, Reference: fmt.Sprintf("line-%d", n)}, true, nil
}

// backendTool writes to the backend under the call's idempotency key; afterCommit runs after the
// backend committed and before the response returns.
func backendTool(be fileBackend, afterCommit func()) Tool {
	return Tool{Name: "effect", Access: Write, Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			if err := be.commit(IdempotencyKey(ctx)); err != nil {
				return "", err
			}
			afterCommit()
			return "committed", nil
		}}
}

func crashChild(dir string) {
	j, err := openFileJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	be := fileBackend{dir: filepath.Join(dir, "backend")}
	if os.Getenv(askChildEnv) != "" {
		// Pause for approval: the call is asked and the process ends; a new process resumes it.
		b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, j, WithPolicy(askFor("d1", "effect")))
		out, err := b.Invoke(context.Background(), effectCall(filepath.Join(dir, "member"), "c1", `{"x":1}`))
		if err != nil || out.State != StateAwaitingApproval {
			fmt.Fprintln(os.Stderr, "ask:", out.State, err)
			os.Exit(6)
		}
		fmt.Println("ASKED")
		os.Exit(0)
	}
	b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {
		fmt.Println("COMMITTED")
		select {} // the response never comes back: the parent kills this process here
	})}, j)
	_, err = b.Invoke(context.Background(), effectCall(filepath.Join(dir, "member"), "c1", `{"x":1}`))
	fmt.Fprintln(os.Stderr, "child returned:", err)
	os.Exit(5)
}

func TestSafetyKillBetweenIntentAndOutcomeThenRestart(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"backend", "member"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "COMMITTED" {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q %v; stderr: %s", line, err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v; stderr: %s", werr, stderr.String())
	}

	journalPath := filepath.Join(dir, "journal.jsonl")
	intents, outcomes, err := readFileJournal(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(intents) != 1 || !intents[0].Dispatched || len(outcomes) != 0 {
		t.Fatalf("journal after the crash: %d intents %+v, %d outcomes", len(intents), intents, len(outcomes))
	}

	// Restart: a new process state over the same journal and backend.
	be := fileBackend{dir: filepath.Join(dir, "backend")}
	j, err := openFileJournal(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	redispatched := 0
	b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() { redispatched++ })}, j, WithBackend(be))
	ctx := context.Background()
	records, err := readFileRecords(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	recovered, err := b.Recover(ctx, records, noMembers)
	if err != nil {
		t.Fatal(err)
	}
	key := "run-1:m1:c1"
	if len(recovered) != 1 || recovered[0].State != StateUnknown || !recovered[0].ReconciliationRequired || recovered[0].Source != "recovery" {
		t.Fatalf("recovered %+v, want one unknown effect", recovered)
	}
	// The member (or a resume) delivers the same call again: it is not dispatched again.
	o, err := b.Invoke(ctx, effectCall(filepath.Join(dir, "member"), "c1", `{"x":1}`))
	if err != nil || o.State != StateUnknown {
		t.Fatalf("re-delivery after restart: %+v %v", o, err)
	}
	if _, err := b.Invoke(ctx, effectCall(filepath.Join(dir, "member"), "c1", `{"x":2}`)); !errors.Is(err, ErrDuplicateCall) {
		t.Fatalf("a different payload under the recovered id: %v", err)
	}
	if redispatched != 0 || be.commits(key) != 1 {
		t.Fatalf("re-dispatched: %d here, %d commits", redispatched, be.commits(key))
	}
	r, err := b.Reconcile(ctx, key)
	if err != nil || r.State != StateSucceeded || r.Receipt == nil {
		t.Fatalf("reconciliation: %+v %v", r, err)
	}
	_, outcomes, err = readFileJournal(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 2 || outcomes[0].Source != "recovery" || outcomes[1].Source != "reconciliation" || outcomes[1].State != StateSucceeded {
		t.Fatalf("journal after recovery and reconciliation: %+v", outcomes)
	}
}

func TestRecoveredIntentWithoutDispatchEvidenceStaysUnknown(t *testing.T) {
	// An intent recorded as dispatched whose effect never reached the backend: recovery cannot
	// know that, so the effect is unknown; reconciliation finds no receipt and it stays unknown
	// rather than being treated as not started.
	dir := t.TempDir()
	be := fileBackend{dir: dir}
	b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, &memJournal{}, WithBackend(be))
	in := Intent{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: "c9", IdempotencyKey: "run-1:m1:c9",
		Tool: "effect", Access: Write, PayloadSHA256: strings.Repeat("0", 64), Dispatched: true, Attempt: 1}
	if _, err := b.Recover(context.Background(), []Record{{Intent: &in}}, noMembers); err != nil {
		t.Fatal(err)
	}
	r, err := b.Reconcile(context.Background(), in.IdempotencyKey)
	if err != nil || r.State != StateUnknown || !r.ReconciliationRequired {
		t.Fatalf("%+v %v", r, err)
	}
	if o, err := b.ResolveUnknown(context.Background(), in.IdempotencyKey, StateFailed, "backend audit log shows no write"); err != nil || o.State != StateFailed || o.Source != "operator" {
		t.Fatalf("operator decision: %+v %v", o, err)
	}
	if _, err := b.ResolveUnknown(context.Background(), in.IdempotencyKey, StateSucceeded, "changed my mind"); !errors.Is(err, effect.ErrLate) {
		t.Fatalf("a second decision overwrote the first: %v", err)
	}
}

func noMembers(string) (MemberContext, bool) { return MemberContext{}, false }
