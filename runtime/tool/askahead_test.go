package tool

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/assay-audit/assay/runtime/policy"
)

// The calls a member proposed in the turn that paused for approval are asked ahead (AskAhead), so
// that one approval round covers the turn: only what the policy sends to an approver is recorded,
// nothing is dispatched, and after a restart the calls run in the order they were proposed —
// DispatchApproved runs only the member's first waiting call, a later one runs when its member
// delivers it again, and an approval of a later call alone runs nothing ahead of the first.
func TestAskedAheadCallsRunInTheOrderProposed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	member := filepath.Join(dir, "member")
	if err := os.Mkdir(member, 0o755); err != nil {
		t.Fatal(err)
	}
	be := fileBackend{dir: dir}
	free := backendTool(be, func() {})
	free.Name = "free"
	tools := func() map[string]Tool { return map[string]Tool{"effect": backendTool(be, func() {}), "free": free} }
	call := func(id, tool, args string) Call {
		c := effectCall(member, id, args)
		c.Tool, c.Allowed = tool, []string{"effect", "free"}
		return c
	}
	c1, c2, c3 := call("c1", "effect", `{"x":1}`), call("c2", "effect", `{"x":2}`), call("c3", "free", `{"x":3}`)

	// The first process: c1 pauses for approval; c2 (ask) and c3 (allow) were proposed after it.
	j := &memJournal{}
	b := NewBoundary(tools(), j, WithPolicy(askFor("d1", "effect")))
	if o, err := b.Invoke(ctx, c1); err != nil || o.State != StateAwaitingApproval {
		t.Fatalf("c1: %+v %v", o, err)
	}
	if asked, err := b.AskAhead(ctx, c2); err != nil || !asked {
		t.Fatalf("c2 was not asked ahead: %v %v", asked, err)
	}
	if asked, err := b.AskAhead(ctx, c3); err != nil || asked {
		t.Fatalf("c3, which the policy allows, was asked ahead: %v %v", asked, err)
	}
	if asked, err := b.AskAhead(ctx, c2); err != nil || asked {
		t.Fatalf("c2 asked twice: %v %v", asked, err)
	}
	bad := c2
	bad.Arguments = `{"x":9}`
	if _, err := b.AskAhead(ctx, bad); err == nil {
		t.Fatal("c2 with other arguments was not refused as a duplicate call")
	}
	if !slices.Equal(j.log, []string{"intent:c1", "outcome:c1:awaiting_approval", "intent:c2", "outcome:c2:awaiting_approval"}) {
		t.Fatalf("journal %v: want c1 and c2 asked, c3 untouched", j.log)
	}
	for _, k := range []string{"run-1:m1:c1", "run-1:m1:c2", "run-1:m1:c3"} {
		if n := be.commits(k); n != 0 {
			t.Fatalf("%s dispatched %d times before any approval", k, n)
		}
	}

	members := func(m string) (MemberContext, bool) {
		return MemberContext{Root: member, Allowed: []string{"effect", "free"}}, m == "m1"
	}
	restart := func(approve ...string) *Boundary {
		t.Helper()
		probe := NewBoundary(tools(), &memJournal{}, WithPolicy(askFor("d1", "effect")))
		if _, err := probe.Recover(ctx, j.records, members); err != nil {
			t.Fatal(err)
		}
		file := &policy.ApprovalFile{Version: 1}
		for _, k := range approve {
			p, ok := probe.Approvals().Pending(k)
			if !ok {
				t.Fatalf("%s was not restored as a question", k)
			}
			file.Approvals = append(file.Approvals, approvalFileFor(t, p).Approvals...)
		}
		nb := NewBoundary(tools(), &memJournal{}, WithPolicy(askFor("d1", "effect")))
		if rec, err := nb.Recover(ctx, j.records, members); err != nil || len(rec) != 2 {
			t.Fatalf("recovered %+v %v, want the two questions", rec, err)
		}
		nb.Approvals().Preload(file, "run-1", func(m string) string { return "run-1-" + m })
		return nb
	}

	// Only c2 approved: nothing runs ahead of c1, which still waits.
	only2 := restart("run-1:m1:c2")
	if only2.Approved("run-1:m1:c1") || !only2.Approved("run-1:m1:c2") {
		t.Fatal("Approved does not say which waiting call an approval covers")
	}
	if outs, err := only2.DispatchApproved(ctx); err != nil || len(outs) != 0 {
		t.Fatalf("c2 approved alone dispatched %+v %v ahead of c1", outs, err)
	}
	if o, err := only2.Invoke(ctx, c1); err != nil || o.State != StateAwaitingApproval {
		t.Fatalf("c1 without its approval: %+v %v", o, err)
	}
	if be.commits("run-1:m1:c2") != 0 {
		t.Fatal("c2 ran before c1")
	}

	// Both approved: c1 runs on resume, c2 when the member delivers it again, each once.
	both := restart("run-1:m1:c1", "run-1:m1:c2")
	outs, err := both.DispatchApproved(ctx)
	if err != nil || len(outs) != 1 || outs[0].CallID != "c1" || outs[0].State != StateSucceeded {
		t.Fatalf("DispatchApproved %+v %v, want c1 alone", outs, err)
	}
	if be.commits("run-1:m1:c2") != 0 {
		t.Fatal("c2 ran before its member reached it")
	}
	for _, c := range []Call{c1, c2, c2, c3} {
		if o, err := both.Invoke(ctx, c); err != nil || o.State != StateSucceeded {
			t.Fatalf("%s delivered again: %+v %v", c.CallID, o, err)
		}
	}
	for _, k := range []string{"run-1:m1:c1", "run-1:m1:c2", "run-1:m1:c3"} {
		if n := be.commits(k); n != 1 {
			t.Fatalf("%s committed %d times, want once", k, n)
		}
	}
}
