package tool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// A hook that errors refuses the call (SAFETY.md rule 4, fail closed): failed before dispatch, the
// executor never called, the effect cancelled in the ledger, the refusal journaled.
func TestSafetyHookErrorRefusesTheCall(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	j := &memJournal{}
	hook := func(ctx context.Context, c Call, args json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("hook backend unreachable")
	}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithHooks(hook))
	o, err := b.Invoke(context.Background(), effectCall(dir, "c1", `{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.State != StateFailed || o.Source != "refusal" || !strings.Contains(o.Error, "hook 1 failed: hook backend unreachable") {
		t.Fatalf("%+v, want a refusal naming the hook", o)
	}
	if g.n.Load() != 0 {
		t.Fatal("the executor ran although a hook failed")
	}
	if len(b.Effects(effect.Running))+len(b.Effects(effect.Succeeded))+len(b.Effects(effect.Pending)) != 0 {
		t.Fatal("the refused effect is not cancelled in the ledger")
	}
	if len(j.intents) != 1 || j.intents[0].Dispatched {
		t.Fatalf("intents %+v, want one refused (not dispatched) intent", j.intents)
	}
}

// awaitingEffect returns a boundary whose policy asks about the effect tool, holding call c1
// ({"x":1}, key "run-1:m1:c1") awaiting approval, and the tool.
func awaitingEffect(t *testing.T) (*Boundary, *gatedEffect, string) {
	t.Helper()
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d", "effect")))
	if o, _ := b.Invoke(context.Background(), effectCall(t.TempDir(), "c1", `{"x":1}`)); o.State != StateAwaitingApproval {
		t.Fatalf("%+v", o)
	}
	return b, g, "run-1:m1:c1"
}

// Concurrent DispatchApproved calls dispatch one approved call once (SAFETY.md rule 2).
func TestSafetyConcurrentDispatchApprovedExecutesOnce(t *testing.T) {
	b, g, key := awaitingEffect(t)
	ctx := context.Background()
	rec, err := b.lookup(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Approvals().Grant(policy.Grant{Binding: b.binding(rec.call, rec.prep, rec.decision), Approver: "alice",
		Source: "operator", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	var dispatched atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs, err := b.DispatchApproved(ctx)
			if err != nil {
				t.Error(err)
			}
			for _, o := range outs {
				if o.State == StateSucceeded {
					dispatched.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if g.n.Load() != 1 || dispatched.Load() != 1 {
		t.Fatalf("executed %d times, %d succeeded outcomes returned; want one of each", g.n.Load(), dispatched.Load())
	}
}

// flakyBackend fails its first lookups with a transient error, then answers as inner does.
type flakyBackend struct {
	inner *committingBackend
	fails atomic.Int32
}

func (f *flakyBackend) Lookup(ctx context.Context, q effect.Query) (effect.Receipt, bool, error) {
	if f.fails.Add(-1) >= 0 {
		return effect.Receipt{}, false, errors.New("receipt service: 503")
	}
	return f.inner.Lookup(ctx, q)
}

// A reconciliation whose receipt lookup fails transiently leaves the effect unknown and
// reconcilable: no outcome is invented, and a later reconciliation resolves it.
func TestSafetyTransientReconciliationErrorLeavesTheEffectReconcilable(t *testing.T) {
	dir := t.TempDir()
	be := &flakyBackend{inner: newCommittingBackend()}
	be.fails.Store(1)
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{"effect": lostResponseTool(be.inner)}, j, WithBackend(be))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	key := "run-1:m1:c1"
	if o, _ := b.Invoke(ctx, effectCall(dir, "c1", `{}`)); o.State != StateUnknown {
		t.Fatalf("%+v", o)
	}
	o, err := b.Reconcile(context.Background(), key)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err %v, want the lookup's error", err)
	}
	if o.State != StateUnknown || !o.ReconciliationRequired {
		t.Fatalf("after a failed lookup: %+v, want unknown and reconciliation required", o)
	}
	if r, _ := b.ledger.Get(key); r.State != effect.Unknown {
		t.Fatalf("ledger %s after a failed lookup", r.State)
	}
	if last := j.outcomes[len(j.outcomes)-1]; last.State != StateUnknown {
		t.Fatalf("an outcome was recorded for a failed lookup: %+v", last)
	}
	if o, err := b.Reconcile(context.Background(), key); err != nil || o.State != StateSucceeded || o.Source != "reconciliation" {
		t.Fatalf("the retried reconciliation: %+v %v", o, err)
	}
	if be.inner.count(key) != 1 {
		t.Fatalf("dispatched %d times", be.inner.count(key))
	}
}

// Revise, Cancel, Observe, Reconcile and ResolveUnknown with an id the boundary does not hold fail
// with ErrNoSuchTransaction and never fall back to the pending transaction (SAFETY.md rule 3).
func TestSafetyControlWithAnUnknownIDNeverFallsBack(t *testing.T) {
	b, g, key := awaitingEffect(t)
	ctx := context.Background()
	pending, _ := b.Approvals().Pending(key)
	missing := "run-1:m1:nope"
	for name, op := range map[string]func() (Outcome, error){
		"revise":         func() (Outcome, error) { return b.Revise(ctx, missing, `{"x":2}`) },
		"cancel":         func() (Outcome, error) { return b.Cancel(ctx, missing, "stop") },
		"observe":        func() (Outcome, error) { return b.Observe(ctx, missing, StateSucceeded) },
		"reconcile":      func() (Outcome, error) { return b.Reconcile(ctx, missing) },
		"resolveUnknown": func() (Outcome, error) { return b.ResolveUnknown(ctx, missing, StateSucceeded, "seen") },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := op(); !errors.Is(err, ErrNoSuchTransaction) {
				t.Fatalf("%v, want ErrNoSuchTransaction", err)
			}
			if r, _ := b.ledger.Get(key); r.State != effect.AwaitingApproval {
				t.Fatalf("the pending transaction is %s", r.State)
			}
			if p, ok := b.Approvals().Pending(key); !ok || p.PayloadSHA256 != pending.PayloadSHA256 || p.Revision != pending.Revision {
				t.Fatalf("the pending question changed: %+v", p)
			}
		})
	}
	if g.n.Load() != 0 {
		t.Fatal("something executed")
	}
}
