package tool

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/policy"
)

// askInChild runs a child process that asks for approval of run-1:m1:c1 and exits, and returns the
// directory holding its journal, backend and member directory.
func askInChild(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"backend", "member"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, askChildEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "ASKED" {
		t.Fatalf("child: %q %v %s", out, err, stderr.String())
	}
	return dir
}

// approvalFileFor writes what an operator approving the pending call would write.
func approvalFileFor(t *testing.T, p policy.PendingApproval) *policy.ApprovalFile {
	t.Helper()
	return &policy.ApprovalFile{Version: 1, Approvals: []policy.FileApproval{{RunID: p.RunID, SessionID: p.SessionID,
		MemberID: p.MemberID, CallID: p.CallID, Tool: p.Tool, PayloadSHA256: p.PayloadSHA256, SchemaSHA256: p.SchemaSHA256,
		Access: p.Access, PolicyScope: p.Scope, Revision: p.Revision, Approver: "alice", ExpiresAt: time.Now().Add(time.Hour)}}}
}

func TestResumeInANewProcessDispatchesTheApprovedCallOnce(t *testing.T) {
	dir := askInChild(t)
	journalPath := filepath.Join(dir, "journal.jsonl")
	be := fileBackend{dir: filepath.Join(dir, "backend")}
	members := func(m string) (MemberContext, bool) {
		return MemberContext{Root: filepath.Join(dir, "member"), Allowed: []string{"effect"}}, m == "m1"
	}
	key := "run-1:m1:c1"

	// The operator answers the question the paused process left.
	j, err := openFileJournal(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	records, err := readFileRecords(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	probe := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, &memJournal{}, WithPolicy(askFor("d1", "effect")))
	if _, err := probe.Recover(context.Background(), records, members); err != nil {
		t.Fatal(err)
	}
	pending, ok := probe.Approvals().Pending(key)
	if !ok {
		t.Fatal("the question was not restored")
	}
	file := approvalFileFor(t, pending)

	// The resumed process: same journal, the current policy, the approval file.
	b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, j, WithPolicy(askFor("d1", "effect")))
	recovered, err := b.Recover(context.Background(), records, members)
	if err != nil || len(recovered) != 1 || recovered[0].State != StateAwaitingApproval {
		t.Fatalf("%+v %v", recovered, err)
	}
	if n := b.Approvals().Preload(file, "run-1", func(m string) string { return "run-1-" + m }); n != 1 {
		t.Fatalf("preloaded %d", n)
	}
	outs, err := b.DispatchApproved(context.Background())
	if err != nil || len(outs) != 1 || outs[0].State != StateSucceeded {
		t.Fatalf("%+v %v", outs, err)
	}
	again, err := b.DispatchApproved(context.Background())
	if err != nil || len(again) != 0 {
		t.Fatalf("a second resume dispatched %+v %v", again, err)
	}
	if o, err := b.Invoke(context.Background(), effectCall(filepath.Join(dir, "member"), "c1", `{"x":1}`)); err != nil || o.State != StateSucceeded {
		t.Fatalf("re-delivery: %+v %v", o, err)
	}
	if n := be.commits(key); n != 1 {
		t.Fatalf("%d commits, want exactly 1", n)
	}
	// The journal now holds: the question, the question asked again on resume, the dispatch, the outcome.
	all, _ := readFileRecords(journalPath)
	effs, err := Replay(all, false)
	if err != nil || len(effs) != 1 || effs[0].State != "succeeded" {
		t.Fatalf("replayed %+v %v", effs, err)
	}
}

func TestResumeRejectsAnApprovalGivenUnderAnotherPolicy(t *testing.T) {
	dir := askInChild(t)
	journalPath := filepath.Join(dir, "journal.jsonl")
	be := fileBackend{dir: filepath.Join(dir, "backend")}
	members := func(m string) (MemberContext, bool) {
		return MemberContext{Root: filepath.Join(dir, "member"), Allowed: []string{"effect"}}, true
	}
	records, err := readFileRecords(journalPath)
	if err != nil {
		t.Fatal(err)
	}
	probe := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, &memJournal{}, WithPolicy(askFor("d1", "effect")))
	if _, err := probe.Recover(context.Background(), records, members); err != nil {
		t.Fatal(err)
	}
	p, _ := probe.Approvals().Pending("run-1:m1:c1")
	file := approvalFileFor(t, p) // approved under policy d1

	// The policy file changed (digest d2) before the resume.
	b := NewBoundary(map[string]Tool{"effect": backendTool(be, func() {})}, &memJournal{}, WithPolicy(askFor("d2", "effect")))
	if _, err := b.Recover(context.Background(), records, members); err != nil {
		t.Fatal(err)
	}
	b.Approvals().Preload(file, "run-1", func(m string) string { return "run-1-" + m })
	outs, err := b.DispatchApproved(context.Background())
	if err != nil || len(outs) != 0 {
		t.Fatalf("dispatched on a stale approval: %+v %v", outs, err)
	}
	np, ok := b.Approvals().Pending("run-1:m1:c1")
	if !ok || np.Scope == p.Scope || !strings.Contains(np.Scope, "d2") {
		t.Fatalf("the question is not pending under the current policy: %+v", np)
	}
	if be.commits("run-1:m1:c1") != 0 {
		t.Fatal("executed")
	}
}

func TestResumeRefusesWhatCannotBeRestoredExactly(t *testing.T) {
	dir := t.TempDir()
	secret := "tok-5e3c1b9a7d2f"
	j := &memJournal{}
	a := NewBoundary(map[string]Tool{"effect": (&gatedEffect{}).tool()}, j, WithPolicy(askFor("d1", "effect")),
		WithRedactor(policy.NewRedactor(secret)))
	c := effectCall(dir, "c1", fmt.Sprintf(`{"target":%q}`, secret))
	if o, _ := a.Invoke(context.Background(), c); o.State != StateAwaitingApproval {
		t.Fatalf("%+v", o)
	}
	g := &gatedEffect{}
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d1", "effect")))
	outs, err := b.Recover(context.Background(), j.records, func(string) (MemberContext, bool) {
		return MemberContext{Root: dir, Allowed: []string{"effect"}}, true
	})
	if err != nil || len(outs) != 1 || outs[0].State != StateCancelled || !strings.Contains(outs[0].Error, "not resumable") {
		t.Fatalf("%+v %v", outs, err)
	}
	if _, err := b.Confirm(context.Background(), Confirmation{TxID: "run-1:m1:c1", PayloadSHA256: outs[0].IdempotencyKey,
		Interpretation: "approve", Confidence: 1, Approver: "alice", Source: "operator"}); err == nil || g.n.Load() != 0 {
		t.Fatalf("a cancelled recovered call was confirmed: %v", err)
	}
	// A member missing from the resumed team: cancelled too.
	j2 := &memJournal{}
	a2 := NewBoundary(map[string]Tool{"effect": (&gatedEffect{}).tool()}, j2, WithPolicy(askFor("d1", "effect")))
	_, _ = a2.Invoke(context.Background(), effectCall(dir, "c1", `{"x":1}`))
	b2 := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithPolicy(askFor("d1", "effect")))
	outs, err = b2.Recover(context.Background(), j2.records, noMembers)
	if err != nil || len(outs) != 1 || outs[0].State != StateCancelled {
		t.Fatalf("%+v %v", outs, err)
	}
}
