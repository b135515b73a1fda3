package effect

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTransitionTable(t *testing.T) {
	cases := []struct {
		name string
		from State
		ev   Event
		want State
		err  error
	}{
		{"approve awaiting", AwaitingApproval, Event{Kind: Approve}, Pending, nil},
		{"approve cancelled is refused", Cancelled, Event{Kind: Approve}, Cancelled, ErrIllegalTransition},
		{"approve running is refused", Running, Event{Kind: Approve}, Running, ErrIllegalTransition},
		{"revise cancelled is refused", Cancelled, Event{Kind: Revise}, Cancelled, ErrIllegalTransition},
		{"revise pending is refused", Pending, Event{Kind: Revise}, Pending, ErrIllegalTransition},
		{"cancel running is refused", Running, Event{Kind: Cancel}, Running, ErrIllegalTransition},
		{"dispatch twice is refused", Running, Event{Kind: Dispatch}, Running, ErrIllegalTransition},
		{"dispatch awaiting approval is refused", AwaitingApproval, Event{Kind: Dispatch}, AwaitingApproval, ErrIllegalTransition},
		{"response succeeded", Running, Event{Kind: Respond, To: Succeeded}, Succeeded, nil},
		{"held running after succeeded stays succeeded", Succeeded, Event{Kind: Respond, To: Running}, Succeeded, ErrLate},
		{"late failure after success", Succeeded, Event{Kind: Respond, To: Failed}, Succeeded, ErrLate},
		{"observation cannot resolve unknown", Unknown, Event{Kind: Observe, To: Succeeded}, Unknown, ErrLate},
		{"response cannot resolve unknown", Unknown, Event{Kind: Respond, To: Succeeded}, Unknown, ErrLate},
		{"exception cannot report success", Running, Event{Kind: Raise, To: Succeeded}, Running, ErrIllegalTransition},
		{"exception unknown", Running, Event{Kind: Raise, To: Unknown}, Unknown, nil},
		{"reconcile unknown", Unknown, Event{Kind: Reconcile, To: Succeeded}, Succeeded, nil},
		{"reconcile running is refused", Running, Event{Kind: Reconcile, To: Succeeded}, Running, ErrIllegalTransition},
		{"late unknown reconciliation after success", Succeeded, Event{Kind: Reconcile, To: Unknown}, Succeeded, ErrLate},
		{"reconcile to cancelled is refused", Unknown, Event{Kind: Reconcile, To: Cancelled}, Unknown, ErrIllegalTransition},
		{"recover running", Running, Event{Kind: Recover}, Unknown, nil},
		{"recover pending", Pending, Event{Kind: Recover}, Unknown, nil},
		{"recover succeeded stays", Succeeded, Event{Kind: Recover}, Succeeded, ErrLate},
		{"response to pending is refused", Pending, Event{Kind: Respond, To: Succeeded}, Pending, ErrIllegalTransition},
		{"invalid state", State("done"), Event{Kind: Respond, To: Succeeded}, State("done"), ErrIllegalTransition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Transition(c.from, c.ev)
			if got != c.want {
				t.Fatalf("state %s, want %s", got, c.want)
			}
			if c.err == nil && err != nil || c.err != nil && !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
		})
	}
}

// TestTerminalStatesNeverChange drives every event into every terminal state.
func TestTerminalStatesNeverChange(t *testing.T) {
	kinds := []EventKind{Approve, Revise, Cancel, Dispatch, Respond, Raise, Observe, Reconcile, Recover}
	targets := []State{"", AwaitingApproval, Pending, Running, Succeeded, Failed, Unknown, Cancelled}
	for _, from := range []State{Succeeded, Failed, Cancelled} {
		for _, k := range kinds {
			for _, to := range targets {
				if got, err := Transition(from, Event{Kind: k, To: to}); got != from || err == nil {
					t.Errorf("%s + %s(%s) = %s, %v", from, k, to, got, err)
				}
			}
		}
	}
}

func TestHeldRunningResponseAfterObservedSuccessStaysSucceeded(t *testing.T) {
	l := NewLedger(nil, nil)
	if err := l.Add("k", Pending); err != nil {
		t.Fatal(err)
	}
	mustApply(t, l, "k", Event{Kind: Dispatch})
	mustApply(t, l, "k", Event{Kind: Observe, To: Succeeded})
	st, err := l.Apply("k", Event{Kind: Respond, To: Running})
	if st != Succeeded || !errors.Is(err, ErrLate) {
		t.Fatalf("after a late running response: %s %v", st, err)
	}
	r, _ := l.Get("k")
	if r.State != Succeeded || len(r.History) != 3 || r.History[2].Refused == "" {
		t.Fatalf("record %+v", r)
	}
}

func TestExplicitUnknownKeyIsAnError(t *testing.T) {
	l := NewLedger(nil, nil)
	_ = l.Add("other", AwaitingApproval)
	if _, err := l.Apply("missing", Event{Kind: Approve}); !errors.Is(err, ErrNoSuchEffect) {
		t.Fatalf("%v", err)
	}
	if r, _ := l.Get("other"); r.State != AwaitingApproval {
		t.Fatalf("another effect changed: %s", r.State)
	}
}

// gatedBackend answers lookups only when released and counts them.
type gatedBackend struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
	receipt Receipt
	found   bool
}

func (b *gatedBackend) Lookup(ctx context.Context, q Query) (Receipt, bool, error) {
	b.calls.Add(1)
	if b.entered != nil {
		close(b.entered)
	}
	if b.release != nil {
		<-b.release
	}
	r := b.receipt
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = q.IdempotencyKey
	}
	return r, b.found, nil
}

func TestConcurrentReconciliationsShareOneLookup(t *testing.T) {
	b := &gatedBackend{entered: make(chan struct{}), release: make(chan struct{}), found: true,
		receipt: Receipt{Committed: true, Reference: "tx-9"}}
	l := NewLedger(b, nil)
	_ = l.Add("k", Unknown)
	var charges atomic.Int32
	charge := func() error { charges.Add(1); return nil }

	const n = 8
	var wg sync.WaitGroup
	results := make([]Record, n)
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[0], _ = l.Reconcile(context.Background(), "k", charge)
	}()
	<-b.entered // the first lookup is in flight; the others join it
	var started sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			results[i], _ = l.Reconcile(context.Background(), "k", charge)
		}()
	}
	started.Wait()
	close(b.release)
	wg.Wait()
	if b.calls.Load() != 1 || charges.Load() != 1 {
		t.Fatalf("%d lookups, %d charges; want 1 and 1", b.calls.Load(), charges.Load())
	}
	for i, r := range results {
		if r.State != Succeeded {
			t.Fatalf("reconciliation %d saw %s", i, r.State)
		}
	}
	// The second reconciliation, late with "unknown", does not reopen the effect.
	if st, err := l.Apply("k", Event{Kind: Reconcile, To: Unknown}); st != Succeeded || !errors.Is(err, ErrLate) {
		t.Fatalf("late unknown reconciliation: %s %v", st, err)
	}
	// A reconciliation after resolution sends no lookup.
	if r, err := l.Reconcile(context.Background(), "k", charge); err != nil || r.State != Succeeded || b.calls.Load() != 1 {
		t.Fatalf("%+v %v, lookups %d", r, err, b.calls.Load())
	}
	r, _ := l.Get("k")
	if r.Receipt == nil || r.Receipt.Reference != "tx-9" || r.Lookups != 1 {
		t.Fatalf("receipt %+v lookups %d", r.Receipt, r.Lookups)
	}
}

func TestReconcileWithoutReceiptStaysUnknown(t *testing.T) {
	b := &gatedBackend{found: false}
	l := NewLedger(b, nil)
	_ = l.Add("k", Unknown)
	r, err := l.Reconcile(context.Background(), "k", nil)
	if err != nil || r.State != Unknown {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestReceiptForAnotherEffectIsRejected(t *testing.T) {
	b := &gatedBackend{found: true, receipt: Receipt{IdempotencyKey: "run:m:other", Committed: true}}
	l := NewLedger(b, nil)
	_ = l.Add("run:m:c1", Unknown)
	r, err := l.Reconcile(context.Background(), "run:m:c1", nil)
	if !errors.Is(err, ErrUnrelatedReceipt) || r.State != Unknown {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestReconcileChargeRefusalSendsNoLookup(t *testing.T) {
	b := &gatedBackend{found: true}
	l := NewLedger(b, nil)
	_ = l.Add("k", Unknown)
	exhausted := errors.New("budget exhausted")
	if _, err := l.Reconcile(context.Background(), "k", func() error { return exhausted }); !errors.Is(err, exhausted) {
		t.Fatalf("%v", err)
	}
	if b.calls.Load() != 0 {
		t.Fatal("lookup sent although the charge was refused")
	}
}

// batchBackend holds receipts only by batch key, as a backend that saw one request would.
type batchBackend struct {
	committed map[string]bool // batch key -> committed
	queries   []Query
	mu        sync.Mutex
}

func (b *batchBackend) Lookup(ctx context.Context, q Query) (Receipt, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queries = append(b.queries, q)
	if q.BatchKey == "" || !b.committed[q.BatchKey] {
		return Receipt{}, false, nil
	}
	return Receipt{IdempotencyKey: q.IdempotencyKey, BatchKey: q.BatchKey, Committed: true}, true, nil
}

func TestBatchKeyIsRecordedOnEveryMemberReceipt(t *testing.T) {
	be := &batchBackend{committed: map[string]bool{"run:batch-1": true}}
	l := NewLedger(be, nil)
	keys := []string{"run:m:c1", "run:m:c2", "run:m:c3"}
	for _, k := range keys {
		_ = l.Add(k, Pending)
	}
	if err := l.DispatchBatch(keys, "run:batch-1"); err != nil {
		t.Fatal(err)
	}
	// The batch response is lost: every member is unknown.
	for _, k := range keys {
		mustApply(t, l, k, Event{Kind: Raise, To: Unknown})
	}
	for _, k := range keys {
		r, err := l.Reconcile(context.Background(), k, nil)
		if err != nil || r.State != Succeeded {
			t.Fatalf("%s: %+v %v", k, r, err)
		}
		if r.Receipt.BatchKey != "run:batch-1" || r.Receipt.IdempotencyKey != k || r.BatchKey != "run:batch-1" {
			t.Fatalf("%s: receipt %+v", k, r.Receipt)
		}
	}
	// A batch whose member is not pending changes nothing.
	_ = l.Add("run:m:c4", Pending)
	if err := l.DispatchBatch([]string{"run:m:c4", "run:m:c1"}, "run:batch-2"); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("%v", err)
	}
	if r, _ := l.Get("run:m:c4"); r.State != Pending || r.BatchKey != "" {
		t.Fatalf("partial batch dispatch: %+v", r)
	}
}

func TestResolveKeepsTheBatchKey(t *testing.T) {
	l := NewLedger(nil, nil)
	_ = l.Add("a", Pending)
	_ = l.DispatchBatch([]string{"a"}, "B")
	if st, err := l.Resolve("a", Receipt{IdempotencyKey: "a", Committed: true}); err != nil || st != Succeeded {
		t.Fatal(st, err)
	}
	if r, _ := l.Get("a"); r.Receipt.BatchKey != "B" {
		t.Fatalf("%+v", r.Receipt)
	}
}

func mustApply(t *testing.T, l *Ledger, key string, ev Event) {
	t.Helper()
	if _, err := l.Apply(key, ev); err != nil {
		t.Fatal(err)
	}
}

// payloadBackend answers every lookup with a committed receipt for payload.
type payloadBackend struct{ payload string }

func (b payloadBackend) Lookup(ctx context.Context, q Query) (Receipt, bool, error) {
	return Receipt{IdempotencyKey: q.IdempotencyKey, Committed: true, PayloadSHA256: b.payload}, true, nil
}

// A receipt under the effect's key but for another payload is evidence of another effect: it is
// refused and the effect stays unknown; the receipt for the intent's payload resolves it.
func TestReceiptForAnotherPayloadDoesNotResolve(t *testing.T) {
	intent := strings.Repeat("a", 64)
	l := NewLedger(payloadBackend{payload: strings.Repeat("b", 64)}, nil)
	_ = l.Add("run:m:c1", Pending)
	mustApply(t, l, "run:m:c1", Event{Kind: Dispatch})
	mustApply(t, l, "run:m:c1", Event{Kind: Raise, To: Unknown})
	r, err := l.ReconcilePayload(context.Background(), "run:m:c1", intent, nil)
	if !errors.Is(err, ErrUnrelatedReceipt) || r.State != Unknown {
		t.Fatalf("receipt for another payload: %v, state %s", err, r.State)
	}
	l2 := NewLedger(payloadBackend{payload: intent}, nil)
	_ = l2.Add("run:m:c1", Pending)
	mustApply(t, l2, "run:m:c1", Event{Kind: Dispatch})
	mustApply(t, l2, "run:m:c1", Event{Kind: Raise, To: Unknown})
	if r, err := l2.ReconcilePayload(context.Background(), "run:m:c1", intent, nil); err != nil || r.State != Succeeded {
		t.Fatalf("receipt for the intent's payload: %v, state %s", err, r.State)
	}
}

// TestStatesAreEveryValidState: States lists each state Valid accepts, once, so a listing or a
// flag's help built from it names every state an effect can be in.
func TestStatesAreEveryValidState(t *testing.T) {
	seen := map[State]bool{}
	for _, s := range States() {
		if !s.Valid() || seen[s] {
			t.Fatalf("States() has %q (valid %v, seen %v)", s, s.Valid(), seen[s])
		}
		seen[s] = true
	}
	for _, s := range []State{AwaitingApproval, Pending, Running, Succeeded, Failed, Unknown, Cancelled} {
		if !seen[s] {
			t.Fatalf("States() lacks %q", s)
		}
	}
}
