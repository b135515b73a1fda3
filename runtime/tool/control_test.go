package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/effect"
)

// A cancel that arrives while an approved call is on its way to dispatch (after the approval, before
// the effect starts) is the call's one outcome: the ledger, the returned outcome and every journaled
// outcome say cancelled, and nothing executes. The dispatch then found its grant revoked and recorded
// failed beside the ledger's cancelled (issue 22 defect 4, second half).
func TestSafetyCancelDuringConfirmationIsOneOutcome(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	j := &memJournal{}
	inHook, cancelled := make(chan struct{}), make(chan struct{})
	var armed bool
	hook := func(ctx context.Context, c Call, args json.RawMessage) (json.RawMessage, error) {
		if armed {
			close(inHook)
			<-cancelled
		}
		return args, nil
	}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, j, WithPolicy(askFor("d", "effect")), WithHooks(hook))
	ctx := context.Background()
	key := "run-1:m1:c1"
	out, _ := b.Invoke(ctx, effectCall(dir, "c1", `{"x":1}`))
	if out.State != StateAwaitingApproval {
		t.Fatalf("%+v", out)
	}
	armed = true
	type result struct {
		out Outcome
		err error
	}
	confirmed := make(chan result, 1)
	cf := approve(b, key, out, j)
	go func() {
		o, err := b.Confirm(ctx, cf)
		confirmed <- result{o, err}
	}()
	<-inHook
	c, err := b.Cancel(ctx, key, "operator changed their mind")
	close(cancelled)
	if err != nil || c.State != StateCancelled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	r := <-confirmed
	if r.err != nil || r.out.State != StateCancelled {
		t.Fatalf("confirm returned %+v %v, want the cancellation", r.out, r.err)
	}
	if rec := b.Effects(effect.Cancelled); len(rec) != 1 || rec[0].Key != key {
		t.Fatalf("ledger: %+v", rec)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range j.outcomes {
		if o.State != StateAwaitingApproval && o.State != StateCancelled {
			t.Fatalf("journaled outcome %s (%s) beside the ledger's cancelled", o.State, o.Error)
		}
	}
	if last := j.outcomes[len(j.outcomes)-1]; last.State != StateCancelled || !strings.Contains(last.Error, "cancelled") {
		t.Fatalf("last outcome %+v", last)
	}
	if g.n.Load() != 0 {
		t.Fatal("a cancelled call executed")
	}
}
