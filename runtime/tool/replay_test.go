package tool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
)

// TestReplayAgreesWithTheLiveLedger runs calls through every path of the boundary and checks that
// folding the recorded journal gives each effect the state the live ledger holds.
func TestReplayAgreesWithTheLiveLedger(t *testing.T) {
	dir := t.TempDir()
	be := newCommittingBackend()
	g := &gatedEffect{}
	tools := map[string]Tool{"effect": g.tool(), "lost": lostResponseTool(be)}
	j := &memJournal{}
	b := NewBoundary(tools, j, WithPolicy(askFor("d", "effect")), WithBackend(be))
	ctx := context.Background()
	call := func(id, tool, args string) Call {
		c := effectCall(dir, id, args)
		c.Tool, c.Allowed = tool, []string{"effect", "lost"}
		return c
	}
	// approved and run
	o, _ := b.Invoke(ctx, call("approved", "effect", `{"x":1}`))
	if _, err := b.Confirm(ctx, approve(b, o.IdempotencyKey, o, j)); err != nil {
		t.Fatal(err)
	}
	// rejected
	o, _ = b.Invoke(ctx, call("rejected", "effect", `{"x":2}`))
	cf := approve(b, o.IdempotencyKey, o, j)
	cf.Interpretation = "reject"
	if _, err := b.Confirm(ctx, cf); err != nil {
		t.Fatal(err)
	}
	// revised, still pending
	o, _ = b.Invoke(ctx, call("revised", "effect", `{"x":3}`))
	if _, err := b.Revise(ctx, o.IdempotencyKey, `{"x":4}`); err != nil {
		t.Fatal(err)
	}
	// refused: not allowed
	c := call("refused", "effect", `{}`)
	c.Allowed = nil
	_, _ = b.Invoke(ctx, c)
	// lost response, then reconciled
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	o, _ = b.Invoke(tctx, call("lost-1", "lost", `{}`))
	cancel()
	if _, err := b.Reconcile(ctx, o.IdempotencyKey); err != nil {
		t.Fatal(err)
	}
	// lost response, left unknown
	tctx, cancel = context.WithTimeout(ctx, 10*time.Millisecond)
	_, _ = b.Invoke(tctx, call("lost-2", "lost", `{}`))
	cancel()

	got, err := Replay(j.records, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]effect.State{}
	for _, r := range b.Effects("") {
		want[r.Key] = r.State
	}
	want["run-1:m1:refused"] = effect.Failed // refused before the ledger: never an effect
	if len(got) != len(want) {
		t.Fatalf("replayed %d effects, ledger has %d: %+v", len(got), len(want), got)
	}
	for _, e := range got {
		if e.State != want[e.IdempotencyKey] {
			t.Errorf("%s: replay %s, ledger %s (ignored %v)", e.IdempotencyKey, e.State, want[e.IdempotencyKey], e.Ignored)
		}
		if e.ReconciliationRequired != (e.State == effect.Unknown) {
			t.Errorf("%s: reconciliation_required %v in state %s", e.IdempotencyKey, e.ReconciliationRequired, e.State)
		}
	}
	if want["run-1:m1:lost-1"] != effect.Succeeded || want["run-1:m1:lost-2"] != effect.Unknown ||
		want["run-1:m1:revised"] != effect.AwaitingApproval || want["run-1:m1:rejected"] != effect.Cancelled {
		t.Fatalf("ledger states %v", want)
	}
}

func TestReplayOfACrashAndOfLateRecords(t *testing.T) {
	in := &Intent{RunID: "r", MemberID: "m", CallID: "c", IdempotencyKey: "r:m:c", Tool: "effect", Dispatched: true, Attempt: 1}
	for _, tc := range []struct {
		inFlight bool
		want     effect.State
	}{{false, effect.Unknown}, {true, effect.Running}} {
		got, err := Replay([]Record{{Intent: in}}, tc.inFlight)
		if err != nil || got[0].State != tc.want || got[0].ReconciliationRequired != (tc.want == effect.Unknown) {
			t.Fatalf("inFlight=%v: %+v %v", tc.inFlight, got, err)
		}
	}
	ok := &Outcome{IdempotencyKey: "r:m:c", State: StateSucceeded, Source: "observation"}
	late := &Outcome{IdempotencyKey: "r:m:c", State: StateFailed, Source: "invocation", Error: "stale"}
	lateUnknown := &Outcome{IdempotencyKey: "r:m:c", State: StateUnknown, Source: "reconciliation"}
	got, err := Replay([]Record{{Intent: in}, {Outcome: ok}, {Outcome: late}, {Outcome: lateUnknown}}, false)
	if err != nil || got[0].State != effect.Succeeded || len(got[0].Ignored) != 2 || got[0].Source != "observation" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := Replay([]Record{{Outcome: ok}}, false); !errors.Is(err, ErrNoSuchTransaction) {
		t.Fatalf("an outcome without an intent: %v", err)
	}
}
