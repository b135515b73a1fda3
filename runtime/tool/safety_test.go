package tool

// The cases at the end of ../shared/SAFETY.md, each a test that fails without the rule it checks.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		goruntime.Gosched()
	}
}

// askFor returns an engine whose policy asks for the named tools and allows everything else.
func askFor(digest string, tools ...string) *policy.Engine {
	return policy.NewEngine(digest, 0, policy.Func{PolicyName: "test", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		for _, t := range tools {
			if r.Tool == t {
				return policy.Decision{Effect: policy.Ask, Rule: "ask-" + t, Reason: "needs an operator"}, nil
			}
		}
		return policy.Decision{Effect: policy.Allow, Rule: "rest", Disclose: true}, nil
	}})
}

// gatedEffect is a write tool that counts executions, reports each start on started and blocks
// until release is closed (nil: does not block).
type gatedEffect struct {
	n       atomic.Int32
	started chan string
	release chan struct{}
	mu      sync.Mutex
	args    []string
	keys    []string
}

func (g *gatedEffect) tool() Tool {
	return Tool{Name: "effect", Access: Write,
		Parameters: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"},"x":{"type":"integer"}},"additionalProperties":false}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			g.n.Add(1)
			g.mu.Lock()
			g.args = append(g.args, string(args))
			g.keys = append(g.keys, IdempotencyKey(ctx))
			g.mu.Unlock()
			if g.started != nil {
				g.started <- string(args)
			}
			if g.release != nil {
				<-g.release
			}
			return "done " + string(args), nil
		}}
}

func effectCall(dir, id, args string) Call {
	return Call{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: id, Tool: "effect", Arguments: args,
		Root: dir, Allowed: []string{"effect", "write_file", "read_file"}}
}

func approve(b *Boundary, key string, out Outcome, j *memJournal) Confirmation {
	// The approver is shown the pending action: its revision and payload hash.
	p, _ := b.Approvals().Pending(key)
	return Confirmation{TxID: key, Revision: p.Revision, PayloadSHA256: p.PayloadSHA256, Interpretation: "approve",
		Confidence: 1, Approver: "alice", Source: "operator"}
}

func TestSafetyConcurrentDeliveriesExecuteOnce(t *testing.T) {
	g := &gatedEffect{release: make(chan struct{})}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{})
	const n = 16
	var wg sync.WaitGroup
	outs := make([]Outcome, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o, err := b.Invoke(context.Background(), effectCall(t.TempDir(), "same", `{"x":1}`))
			if err != nil {
				t.Error(err)
			}
			outs[i] = o
		}()
	}
	close(start)
	eventually(t, "the first dispatch", func() bool { return g.n.Load() == 1 })
	// A different payload under the same id while the first is still in flight: a conflict.
	if _, err := b.Invoke(context.Background(), effectCall(t.TempDir(), "same", `{"x":2}`)); !errors.Is(err, ErrDuplicateCall) {
		t.Fatalf("in-flight conflicting duplicate: %v", err)
	}
	close(g.release)
	wg.Wait()
	if g.n.Load() != 1 {
		t.Fatalf("%d concurrent deliveries executed %d times", n, g.n.Load())
	}
	for i := range outs {
		if !reflect.DeepEqual(outs[i], outs[0]) || outs[i].State != StateSucceeded {
			t.Fatalf("delivery %d saw %+v", i, outs[i])
		}
	}
}

func TestSafetyConfirmingARunningTransactionCreatesNoSecondEffect(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{started: make(chan string, 4), release: make(chan struct{})}
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	out, err := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	if err != nil || out.State != StateAwaitingApproval {
		t.Fatalf("%+v %v", out, err)
	}
	if g.n.Load() != 0 {
		t.Fatal("dispatched before approval")
	}
	cf := approve(b, "run-1:m1:c1", out, j)
	done := make(chan Outcome)
	go func() {
		o, err := b.Confirm(ctx, cf)
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	<-g.started // the effect is running
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("second confirmation of a running transaction: %v", err)
	}
	close(g.release)
	if o := <-done; o.State != StateSucceeded {
		t.Fatalf("%+v", o)
	}
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("confirmation of a finished transaction: %v", err)
	}
	if g.n.Load() != 1 {
		t.Fatalf("%d effect sets", g.n.Load())
	}
}

func TestSafetyConfirmingAMissingIDNeverFallsBack(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	out, _ := b.Invoke(ctx, effectCall(dir, "pending", `{"x":1}`))
	if out.State != StateAwaitingApproval {
		t.Fatalf("%+v", out)
	}
	cf := approve(b, "run-1:m1:pending", out, nil)
	cf.TxID = "run-1:m1:does-not-exist"
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrNoSuchTransaction) {
		t.Fatalf("%v, want ErrNoSuchTransaction", err)
	}
	cf.TxID = ""
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrNoSuchTransaction) {
		t.Fatalf("empty id: %v", err)
	}
	if g.n.Load() != 0 {
		t.Fatal("the other transaction executed")
	}
	if r := b.Effects(""); len(r) != 1 || r[0].State != effect.AwaitingApproval {
		t.Fatalf("the pending transaction changed: %+v", r)
	}
}

func TestSafetyRevisingACancelledTransactionIsRefused(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	cf := approve(b, key, out, nil)
	if o, err := b.Cancel(ctx, key, "user changed their mind"); err != nil || o.State != StateCancelled {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := b.Revise(ctx, key, `{"x":2}`); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("revise after cancel: %v", err)
	}
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrNotAwaitingApproval) {
		t.Fatalf("confirm after cancel: %v", err)
	}
	if g.n.Load() != 0 {
		t.Fatal("a cancelled transaction executed")
	}
	if r, _ := b.ledger.Get(key); r.State != effect.Cancelled {
		t.Fatalf("state %s", r.State)
	}
}

func TestSafetyRevisionRevokesTheApprovalOfTheEarlierPayload(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	old := approve(b, key, out, j)
	if o, err := b.Revise(ctx, key, `{"x":2}`); err != nil || o.State != StateAwaitingApproval || o.Revision != 1 {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := b.Confirm(ctx, old); !errors.Is(err, ErrStaleEvidence) {
		t.Fatalf("approval of the earlier revision: %v", err)
	}
	if g.n.Load() != 0 {
		t.Fatal("dispatched on a stale approval")
	}
	o, err := b.Confirm(ctx, approve(b, key, out, j))
	if err != nil || o.State != StateSucceeded {
		t.Fatalf("%+v %v", o, err)
	}
	if g.args[0] != `{"x":2}` {
		t.Fatalf("executed %s, want the revision", g.args[0])
	}
}

func TestSafetyMutatingTheCallerCommandAfterValidationStarted(t *testing.T) {
	dir := t.TempDir()
	entered := make(chan struct{})
	proceed := make(chan struct{})
	slow := policy.NewEngine("", time.Minute, policy.Func{PolicyName: "slow", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		close(entered)
		<-proceed
		return policy.Decision{Effect: policy.Allow, Disclose: true}, nil
	}})
	b := NewBoundary(Builtins(), &memJournal{}, WithPolicy(slow))
	payload := json.RawMessage(`{"path":"a.txt","content":"validated"}`)
	allowed := []string{"write_file"}
	c := Call{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: "c1", Tool: "write_file", Payload: payload,
		Root: dir, Allowed: allowed}
	done := make(chan Outcome)
	go func() {
		o, err := b.Invoke(context.Background(), c)
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	<-entered
	// The caller still holds the command and changes nested fields while policy is deciding.
	copy(payload[9:14], "b.txt")
	allowed[0] = "shell"
	close(proceed)
	if o := <-done; o.State != StateSucceeded {
		t.Fatalf("%+v", o)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(data) != "validated" {
		t.Fatalf("validated target: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Fatal("the mutated target executed")
	}
}

func TestSafetyTwoRuntimeInstancesUseDifferentIdempotencyKeys(t *testing.T) {
	g := &gatedEffect{}
	shared := g.tool()
	// Two runtime instances (two boundaries of two runs), each dispatching its first effect.
	a := NewBoundary(map[string]Tool{"effect": shared}, &memJournal{})
	b := NewBoundary(map[string]Tool{"effect": shared}, &memJournal{})
	ca := effectCall(t.TempDir(), "call_1", `{"x":1}`)
	ca.RunID = "run-01JH8Z4A"
	cb := effectCall(t.TempDir(), "call_1", `{"x":1}`)
	cb.RunID = "run-01JH8Z4B"
	for _, p := range []struct {
		b *Boundary
		c Call
	}{{a, ca}, {b, cb}} {
		if o, err := p.b.Invoke(context.Background(), p.c); err != nil || o.State != StateSucceeded {
			t.Fatalf("%+v %v", o, err)
		}
	}
	if len(g.keys) != 2 || g.keys[0] == g.keys[1] || g.keys[0] == "" {
		t.Fatalf("the executor saw keys %q", g.keys)
	}
}

func TestSafetyEvidenceForAnUnrelatedTargetIsRejected(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	o1, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	o2, _ := b.Invoke(ctx, effectCall(dir, "c2", `{"x":2}`))
	// An answer given on c2's payload, addressed to c1.
	cf := approve(b, "run-1:m1:c2", o2, nil)
	cf.TxID = "run-1:m1:c1"
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrStaleEvidence) {
		t.Fatalf("%v, want ErrStaleEvidence", err)
	}
	// Incomplete evidence is not filled in from the current state.
	cf = approve(b, "run-1:m1:c1", o1, nil)
	cf.PayloadSHA256 = ""
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrStaleEvidence) {
		t.Fatalf("%v, want ErrStaleEvidence", err)
	}
	if g.n.Load() != 0 {
		t.Fatal("executed on unrelated evidence")
	}
}

func TestSafetyPauseDuringAnAwaitingInvocation(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{started: make(chan string, 4), release: make(chan struct{})}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{})
	ctx := context.Background()
	first := make(chan Outcome)
	go func() {
		o, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
		first <- o
	}()
	<-g.started // the first invocation is awaiting its executor
	b.Pause()
	second := make(chan Outcome)
	go func() {
		o, _ := b.Invoke(ctx, effectCall(dir, "c2", `{"x":2}`))
		second <- o
	}()
	close(g.release)
	if o := <-first; o.State != StateSucceeded {
		t.Fatalf("the dispatched invocation: %+v", o)
	}
	eventually(t, "the next call to park at the pause", func() bool { _, w := b.Paused(); return w == 1 })
	if n := g.n.Load(); n != 1 {
		t.Fatalf("the next pending effect started while paused (%d executions)", n)
	}
	b.Resume()
	if o := <-second; o.State != StateSucceeded {
		t.Fatalf("after resume: %+v", o)
	}
	<-g.started
	if n := g.n.Load(); n != 2 {
		t.Fatalf("%d executions after resume, want exactly 2", n)
	}
	b.Resume() // a second resume starts nothing
	if n := g.n.Load(); n != 2 {
		t.Fatalf("%d executions", n)
	}
}

func TestSafetyPausedCallWhoseCallerLeavesIsNotDispatched(t *testing.T) {
	g := &gatedEffect{}
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j)
	b.Pause()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome)
	go func() {
		o, _ := b.Invoke(ctx, effectCall(t.TempDir(), "c1", `{"x":1}`))
		done <- o
	}()
	eventually(t, "the call to park", func() bool { _, w := b.Paused(); return w == 1 })
	cancel()
	o := <-done
	b.Resume()
	if o.State != StateFailed || g.n.Load() != 0 {
		t.Fatalf("%+v, %d executions", o, g.n.Load())
	}
}

func TestSafetyHeldResponseAfterObservedSuccess(t *testing.T) {
	dir := t.TempDir()
	release := make(chan struct{})
	started := make(chan struct{})
	late := Tool{Name: "effect", Access: Write, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			close(started)
			<-release
			// The held response finally arrives, and it is a failure.
			return "", errors.New("gateway timeout from a stale connection")
		}}
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": late}, j)
	done := make(chan Outcome)
	go func() {
		o, _ := b.Invoke(context.Background(), effectCall(dir, "c1", `{}`))
		done <- o
	}()
	<-started
	if o, err := b.Observe(context.Background(), "run-1:m1:c1", StateSucceeded); err != nil || o.State != StateSucceeded {
		t.Fatalf("observation: %+v %v", o, err)
	}
	close(release)
	o := <-done
	if o.State != StateSucceeded || !strings.Contains(o.Note, "late invocation response") {
		t.Fatalf("a late response overwrote the observed outcome: %+v", o)
	}
	if r, _ := b.ledger.Get("run-1:m1:c1"); r.State != effect.Succeeded {
		t.Fatalf("ledger %s", r.State)
	}
	if last := j.outcomes[len(j.outcomes)-1]; last.State != StateSucceeded {
		t.Fatalf("recorded last outcome %+v", last)
	}
}

// committingBackend is a fake backend that commits each idempotency key once and keeps a receipt.
type committingBackend struct {
	mu       sync.Mutex
	commits  map[string]int
	lookups  atomic.Int32
	entered  chan struct{}
	release  chan struct{}
	enterOne sync.Once
}

func newCommittingBackend() *committingBackend {
	return &committingBackend{commits: map[string]int{}}
}

func (be *committingBackend) commit(key string) {
	be.mu.Lock()
	defer be.mu.Unlock()
	be.commits[key]++
}

func (be *committingBackend) count(key string) int {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.commits[key]
}

func (be *committingBackend) Lookup(ctx context.Context, q effect.Query) (effect.Receipt, bool, error) {
	be.lookups.Add(1)
	if be.entered != nil {
		be.enterOne.Do(func() { close(be.entered) })
		<-be.release
	}
	if be.count(q.IdempotencyKey) == 0 {
		return effect.Receipt{}, false, nil
	}
	return effect.Receipt{IdempotencyKey: q.IdempotencyKey, Committed: true, Reference: "rcpt-" + q.IdempotencyKey}, true, nil
}

// lostResponseTool commits to the backend, then loses the response: it waits past its deadline.
func lostResponseTool(be *committingBackend) Tool {
	return Tool{Name: "effect", Access: Write, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			be.commit(IdempotencyKey(ctx))
			<-ctx.Done()
			return "", fmt.Errorf("waiting for the backend's response: %w", ctx.Err())
		}}
}

func TestSafetyWriteThatTimesOutAfterTheBackendCommitted(t *testing.T) {
	dir := t.TempDir()
	be := newCommittingBackend()
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": lostResponseTool(be)}, j, WithBackend(be), WithReadonlyRetries(5))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	key := "run-1:m1:c1"
	o, err := b.Invoke(ctx, effectCall(dir, "c1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.State != StateUnknown || !o.ReconciliationRequired || o.Retryable {
		t.Fatalf("outcome %+v, want unknown, reconciliation required, not retryable", o)
	}
	// A re-delivery of the same call (a model retrying) returns the recorded outcome.
	again, err := b.Invoke(context.Background(), effectCall(dir, "c1", `{}`))
	if err != nil || again.State != StateUnknown {
		t.Fatalf("%+v %v", again, err)
	}
	if be.count(key) != 1 {
		t.Fatalf("dispatched %d times", be.count(key))
	}
	r, err := b.Reconcile(context.Background(), key)
	if err != nil || r.State != StateSucceeded || r.Receipt == nil || r.Receipt.Reference != "rcpt-"+key || r.Source != "reconciliation" {
		t.Fatalf("reconciliation: %+v %v", r, err)
	}
	if last := j.outcomes[len(j.outcomes)-1]; last.State != StateSucceeded || last.Source != "reconciliation" {
		t.Fatalf("reconciliation not recorded: %+v", last)
	}
}

func TestSafetyConcurrentReconciliationsThroughTheBoundary(t *testing.T) {
	dir := t.TempDir()
	be := newCommittingBackend()
	be.entered, be.release = make(chan struct{}), make(chan struct{})
	j := &memJournal{}
	budget, _ := policy.NewBudget(policy.Limits{ToolCalls: 10}, policy.Limits{})
	b := NewBoundary(map[string]Tool{"effect": lostResponseTool(be)}, j, WithBackend(be), WithBudget(budget))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	key := "run-1:m1:c1"
	if o, _ := b.Invoke(ctx, effectCall(dir, "c1", `{}`)); o.State != StateUnknown {
		t.Fatalf("%+v", o)
	}
	var wg sync.WaitGroup
	outs := make([]Outcome, 4)
	wg.Add(1)
	go func() { defer wg.Done(); outs[0], _ = b.Reconcile(context.Background(), key) }()
	<-be.entered
	for i := 1; i < len(outs); i++ {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], _ = b.Reconcile(context.Background(), key) }()
	}
	close(be.release)
	wg.Wait()
	if be.lookups.Load() != 1 {
		t.Fatalf("%d lookups, want 1", be.lookups.Load())
	}
	for i, o := range outs {
		if o.State != StateSucceeded {
			t.Fatalf("reconciliation %d: %+v", i, o)
		}
	}
	// One dispatch and one reconciliation lookup were charged.
	if u := budget.Member("m1"); u.ToolCalls != 2 {
		t.Fatalf("charged %d tool calls, want 2 (dispatch + one lookup)", u.ToolCalls)
	}
}

func TestSafetyPolicyThatRaisesDeniesAndTheExecutorIsNeverCalled(t *testing.T) {
	g := &gatedEffect{}
	for name, f := range map[string]func(ctx context.Context, r policy.Request) (policy.Decision, error){
		"error": func(ctx context.Context, r policy.Request) (policy.Decision, error) {
			return policy.Decision{}, errors.New("policy store unreachable")
		},
		"panic": func(ctx context.Context, r policy.Request) (policy.Decision, error) { panic("nil map") },
		"malformed": func(ctx context.Context, r policy.Request) (policy.Decision, error) {
			return policy.Decision{Effect: "ALLOW"}, nil
		},
		"timeout": func(ctx context.Context, r policy.Request) (policy.Decision, error) {
			<-ctx.Done()
			return policy.Decision{Effect: policy.Allow}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := &memJournal{}
			e := policy.NewEngine("", 20*time.Millisecond, policy.Func{PolicyName: name, F: f})
			b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithPolicy(e))
			o, err := b.Invoke(context.Background(), effectCall(t.TempDir(), "c1", `{}`))
			if err != nil {
				t.Fatal(err)
			}
			if o.State != StateFailed || !strings.Contains(o.Error, "denied by policy") {
				t.Fatalf("%+v", o)
			}
			if g.n.Load() != 0 {
				t.Fatal("the executor was called")
			}
			if len(j.intents) != 1 || j.intents[0].Dispatched || j.intents[0].Policy == nil || j.intents[0].Policy.Effect != policy.Deny {
				t.Fatalf("the denial is not recorded as evidence: %+v", j.intents)
			}
		})
	}
}

func TestSafetyHookChangesApprovedArguments(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	var armed atomic.Bool
	hook := func(ctx context.Context, c Call, args json.RawMessage) (json.RawMessage, error) {
		if armed.Load() {
			return json.RawMessage(`{"target":"B"}`), nil
		}
		return args, nil
	}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")), WithHooks(hook))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"target":"A"}`))
	if out.State != StateAwaitingApproval {
		t.Fatalf("%+v", out)
	}
	armed.Store(true) // the hook now rewrites A to B
	o, err := b.Confirm(ctx, approve(b, key, out, nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.State != StateFailed || !strings.Contains(o.Error, "payload_sha256 changed since approval") {
		t.Fatalf("%+v", o)
	}
	if g.n.Load() != 0 {
		t.Fatalf("dispatched %v after the hook changed the approved payload", g.args)
	}
}

func TestSafetyTwoMembersRaceForTheLastBudgetUnit(t *testing.T) {
	for round := range 20 {
		g := &gatedEffect{}
		budget, _ := policy.NewBudget(policy.Limits{ToolCalls: 1}, policy.Limits{})
		b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithBudget(budget))
		var wg sync.WaitGroup
		start := make(chan struct{})
		outs := make([]Outcome, 2)
		for i, m := range []string{"m1", "m2"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := effectCall(t.TempDir(), "c1", `{}`)
				c.MemberID, c.SessionID = m, "run-1-"+m
				<-start
				outs[i], _ = b.Invoke(context.Background(), c)
			}()
		}
		close(start)
		wg.Wait()
		if g.n.Load() != 1 {
			t.Fatalf("round %d: %d members dispatched", round, g.n.Load())
		}
		refused := 0
		for _, o := range outs {
			if o.State == StateFailed && strings.Contains(o.Error, "budget exhausted") {
				refused++
			}
		}
		if refused != 1 {
			t.Fatalf("round %d: outcomes %+v", round, outs)
		}
	}
}

func TestSafetyAmbiguousConfirmationKeepsTheQuestion(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	for _, cf := range []Confirmation{
		func() Confirmation { c := approve(b, key, out, nil); c.Interpretation = "ambiguous"; return c }(),
		func() Confirmation { c := approve(b, key, out, nil); c.Confidence = 0.55; return c }(),
		func() Confirmation { c := approve(b, key, out, nil); c.Interpretation = "yes, sort of"; return c }(),
	} {
		if _, err := b.Confirm(ctx, cf); !errors.Is(err, ErrAmbiguousConfirmation) {
			t.Fatalf("%+v: %v", cf, err)
		}
	}
	if g.n.Load() != 0 {
		t.Fatal("executed on an ambiguous answer")
	}
	if _, ok := b.Approvals().Pending(key); !ok {
		t.Fatal("the pending question was lost")
	}
	o, err := b.Confirm(ctx, approve(b, key, out, nil))
	if err != nil || o.State != StateSucceeded || g.n.Load() != 1 {
		t.Fatalf("the unambiguous answer did not complete it: %+v %v", o, err)
	}
}

func TestApprovalFromAModelIsNotAnApproval(t *testing.T) {
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	out, _ := b.Invoke(ctx, effectCall(t.TempDir(), "c1", `{"x":1}`))
	cf := approve(b, "run-1:m1:c1", out, nil)
	cf.Source, cf.Approver = "model", "assistant"
	if _, err := b.Confirm(ctx, cf); !errors.Is(err, policy.ErrNotAnApprover) {
		t.Fatalf("%v", err)
	}
	if g.n.Load() != 0 {
		t.Fatal("a model's text approved an effect")
	}
}

func TestApprovalIsBoundToThePolicyInForce(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	digest := "d1"
	e := policy.NewEngine("", 0, policy.Func{PolicyName: "p", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		return policy.Decision{Effect: policy.Ask, Rule: digest}, nil
	}})
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(e))
	ctx := context.Background()
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	digest = "d2" // the policy changed between the question and the answer
	o, err := b.Confirm(ctx, approve(b, "run-1:m1:c1", out, nil))
	if err != nil {
		t.Fatal(err)
	}
	if o.State != StateFailed || !strings.Contains(o.Error, "policy_scope") || g.n.Load() != 0 {
		t.Fatalf("dispatched under another policy: %+v", o)
	}
}

func TestDisclosureIsItsOwnDecision(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	o, err := b.Confirm(ctx, approve(b, "run-1:m1:c1", out, nil)) // approve to act, not to disclose
	if err != nil || o.State != StateSucceeded {
		t.Fatalf("%+v %v", o, err)
	}
	if o.Disclosed || strings.Contains(o.Result, "done") || len(o.ResultSHA256) != 64 {
		t.Fatalf("result disclosed without approval to disclose: %+v", o)
	}
	out2, _ := b.Invoke(ctx, effectCall(dir, "c2", `{"x":2}`))
	cf := approve(b, "run-1:m1:c2", out2, nil)
	cf.Disclose = true
	if o, _ := b.Confirm(ctx, cf); !o.Disclosed || !strings.Contains(o.Result, "done") {
		t.Fatalf("disclosure granted but withheld: %+v", o)
	}
}

func TestApprovalFileCoversExactlyTheBoundCall(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	approvals := policy.NewApprovals(clock)
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")),
		WithApprovals(approvals), WithClock(clock))
	// What the approver saw: the canonical payload hash, the schema digest and the policy scope.
	probe := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	pending, _ := probe.Invoke(context.Background(), effectCall(dir, "c1", `{"x":1}`))
	p, ok := probe.Approvals().Pending(pending.IdempotencyKey)
	if !ok {
		t.Fatal("no pending approval to copy")
	}
	file := fmt.Sprintf("version: 1\napprovals:\n  - member_id: m1\n    call_id: c1\n    tool: effect\n    payload_sha256: %s\n"+
		"    schema_sha256: %s\n    access: write\n    policy_scope: %q\n    approver: alice\n    expires_at: 2026-11-30T13:00:00Z\n",
		p.PayloadSHA256, p.SchemaSHA256, p.Scope)
	f, err := policy.ParseApprovalFile([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if n := approvals.Preload(f, "run-1", func(m string) string { return "run-1-" + m }); n != 1 {
		t.Fatalf("preloaded %d", n)
	}
	ctx := context.Background()
	if o, _ := b.Invoke(ctx, effectCall(dir, "c2", `{"x":1}`)); o.State != StateAwaitingApproval {
		t.Fatalf("a sibling call used the file's approval: %+v", o)
	}
	if o, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`)); o.State != StateSucceeded || g.n.Load() != 1 {
		t.Fatalf("the approved call: %+v", o)
	}
	// Single use: a second run of the same boundary cannot reuse it under another id, and the
	// grant is consumed.
	if _, err := approvals.Check(policy.Binding{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: "c1", Tool: "effect",
		PayloadSHA256: p.PayloadSHA256, SchemaSHA256: p.SchemaSHA256, Access: "write", Scope: p.Scope}); !errors.Is(err, policy.ErrApprovalUsed) {
		t.Fatalf("%v", err)
	}
}

// A revision that is refused (invalid arguments) still invalidates the intent: the approval of the
// earlier revision confirms nothing afterwards (issue 22 defect 4).
func TestSafetyARefusedRevisionRevokesTheEarlierApproval(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithPolicy(askFor("d", "effect")))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	old := approve(b, key, out, j)
	if _, err := b.Revise(ctx, key, `not json`); err == nil {
		t.Fatal("an invalid revision was accepted")
	}
	if _, err := b.Confirm(ctx, old); err == nil {
		t.Fatal("the earlier revision was confirmed after a refused revision")
	}
	if g.n.Load() != 0 {
		t.Fatal("the earlier revision executed after a refused revision")
	}
	// A valid revision afterwards asks again and executes once approved.
	if o, err := b.Revise(ctx, key, `{"x":3}`); err != nil || o.State != StateAwaitingApproval {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := b.Confirm(ctx, approve(b, key, out, j)); err != nil || o.State != StateSucceeded || g.args[0] != `{"x":3}` {
		t.Fatalf("%+v %v %v", o, err, g.args)
	}
}
