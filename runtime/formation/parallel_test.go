package formation

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

func TestParallelRetriesOnlyFailedIdempotentMembers(t *testing.T) {
	// c's first request fails; with one retry it succeeds on its second attempt. d is not idempotent
	// and fails every time: it is not retried. a succeeds at once and is never retried.
	e, sink, _ := setup(t, reference.Fault{Member: "c", Turn: 0, Kind: reference.FaultHTTP500},
		reference.Fault{Member: "d", Turn: -1, Kind: reference.FaultHTTP500})
	d := writer("d")
	d.Idempotent = false
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("c"), d), Options{Parallel: ParallelOptions{MemberRetries: 2}})
	m := byID(res)
	if !m["a"].Success || m["a"].Turns != 1 || m["a"].Metadata["attempts"] != "1" {
		t.Fatalf("a: %+v", m["a"])
	}
	if !m["c"].Success || m["c"].Turns != 2 || m["c"].ToolCalls != 2 || m["c"].Usage.Requests != 3 {
		t.Fatalf("c should succeed on its second attempt with accumulated counts: %+v", m["c"])
	}
	if m["d"].Success || m["d"].Turns != 1 {
		t.Fatalf("d (not idempotent) was retried or succeeded: %+v", m["d"])
	}
	if res.Success || !strings.Contains(res.FinalOutput, "failed members:\n- d: ") {
		t.Fatalf("team %+v", res)
	}
	warned := false
	for _, w := range sink.ofType("warning") {
		warned = warned || (w.MemberID == "d" && strings.Contains(string(w.Payload), "not declared idempotent"))
	}
	if !warned {
		t.Fatal("no warning that d is not retried")
	}
}

func TestParallelRetriesConfiguration(t *testing.T) {
	e, sink, _ := setup(t)
	for _, n := range []int{-1, 4} {
		wantConfigError(t, e, sink, build(t, "parallel", writer("a"), writer("b")), Options{Parallel: ParallelOptions{MemberRetries: n}}, "parallel_member_retries")
	}
	wantConfigError(t, e, sink, build(t, "parallel", writer("a"), withRoleSpec("j", RoleJudge)), Options{}, "formation role")
}

func TestCapacityAdmissionThrottlesAndRecordsTheLimit(t *testing.T) {
	e, sink, _ := setupWith(t, reference.Config{ParallelCapacity: 1})
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), writer("c")), Options{Capacity: CapacityOptions{Aware: true}})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	throttled := sink.ofType("member_throttled")
	// Admission is in configuration order: a takes the one slot, b and c wait.
	if len(throttled) != 2 || throttled[0].MemberID != "b" || throttled[1].MemberID != "c" {
		t.Fatalf("three members through one slot: throttled %v, want b then c", throttled)
	}
	for _, ev := range throttled {
		if p := payload(t, ev); p["limit"] != float64(1) {
			t.Fatalf("throttle event without the limit: %v", p)
		}
		events := sink.memberEvents(ev.MemberID)
		if events[0] != "member_throttled" || events[1] != "member_started" {
			t.Fatalf("member %s: started before admission: %v", ev.MemberID, events)
		}
	}
	// The provider-declared capacity is overridden downward by max_workers and by a declared value.
	e2, sink2, _ := setupWith(t, reference.Config{ParallelCapacity: 8})
	mustRun(t, e2, build(t, "parallel", writer("a"), writer("b")), Options{Capacity: CapacityOptions{Aware: true, MaxWorkers: 1}})
	if th := sink2.ofType("member_throttled"); len(th) != 1 || th[0].MemberID != "b" {
		t.Fatalf("max_workers 1 and two members: throttled %v, want b alone", th)
	}
}

// Which members wait is decided by configuration order and the free slots, never by scheduling:
// two slots and three members queue exactly the third, every time; the first two never wait.
func TestCapacityAdmissionQueuesExactlyTheMembersBeyondTheSlots(t *testing.T) {
	for range 5 {
		e, sink, _ := setupWith(t, reference.Config{ParallelCapacity: 2})
		res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), writer("c")), Options{Capacity: CapacityOptions{Aware: true}})
		if !res.Success {
			t.Fatalf("%+v", res)
		}
		th := sink.ofType("member_throttled")
		if len(th) != 1 || th[0].MemberID != "c" {
			t.Fatalf("capacity 2, members a b c: throttled %v, want c alone", th)
		}
		if p := payload(t, th[0]); p["limit"] != float64(2) {
			t.Fatalf("throttle limit %v, want 2", p)
		}
	}
}

func TestCapacityAdmissionFailsWithoutDeclaredCapacity(t *testing.T) {
	e, sink, _ := setupWith(t, reference.Config{ParallelCapacity: -1})
	_, err := RunWith(context.Background(), e, build(t, "parallel", writer("a"), writer("b")), Options{Capacity: CapacityOptions{Aware: true}})
	if !errors.Is(err, runtime.ErrCapacityUnavailable) || sink.count() != 0 {
		t.Fatalf("err %v, events %d: missing capacity must fail before anything runs", err, sink.count())
	}
	wantConfigError(t, e, sink, build(t, "parallel", writer("a"), writer("b")), Options{Capacity: CapacityOptions{Declared: 2}}, "capacity-aware")
	// An operator-declared capacity is used without asking the provider.
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b")), Options{Capacity: CapacityOptions{Aware: true, Declared: 2}})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
}

// gitRepo makes a repository with one commit.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; worktree isolation needs it")
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/double\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.mod"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return dir
}

func TestIsolationGivesEachMemberItsOwnWorktree(t *testing.T) {
	repo := gitRepo(t)
	e, sink, _ := setup(t)
	shared := t.TempDir()
	a, b := writer("a"), writer("b")
	a.Dir, b.Dir = shared, shared // shared paths are fine: each member gets a worktree
	tm := build(t, "parallel", a, b)
	res := mustRun(t, e, tm, Options{Isolation: IsolationOptions{Enabled: true, Repo: repo}})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	seen := map[string]bool{}
	for _, m := range res.Members {
		wt := m.Metadata["worktree"]
		if wt == "" || seen[wt] {
			t.Fatalf("member %s worktree %q (shared or missing)", m.MemberID, wt)
		}
		seen[wt] = true
		// A worktree member's session has the colon format {parent}:{team}:{member}.
		if want := "run-test:parallel:" + m.MemberID; m.SessionID != want {
			t.Fatalf("member %s session %q, want %q", m.MemberID, m.SessionID, want)
		}
		for _, f := range []string{"double.go", "double_test.go", "go.mod"} {
			if _, err := os.Stat(filepath.Join(wt, f)); err != nil {
				t.Fatalf("worktree %s lacks %s: %v", wt, f, err)
			}
		}
	}
	if tm.Members[0].Dir != shared {
		t.Fatal("the caller's team was modified")
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 0 {
		t.Fatal("a member wrote into the shared parent directory instead of its worktree")
	}
	if len(sink.ofType("worktree_allocated")) != 2 {
		t.Fatal("worktree allocations not recorded")
	}
	// Kept by default; removed with cleanup.
	e2, _, _ := setup(t)
	res2 := mustRun(t, e2, build(t, "parallel", writer("c"), writer("d")), Options{Isolation: IsolationOptions{Enabled: true, Repo: repo, Cleanup: true}})
	for _, m := range res2.Members {
		if _, err := os.Stat(m.Metadata["worktree"]); !os.IsNotExist(err) {
			t.Fatalf("worktree %s kept despite cleanup: %v", m.Metadata["worktree"], err)
		}
	}
	for p := range seen {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("worktree %s not kept for inspection: %v", p, err)
		}
	}
}

func TestIsolationAllocationFailureStopsTheRun(t *testing.T) {
	e, sink, _ := setup(t)
	_, err := RunWith(context.Background(), e, build(t, "parallel", writer("a"), writer("b")),
		Options{Isolation: IsolationOptions{Enabled: true, Repo: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "allocate worktree") {
		t.Fatalf("err %v", err)
	}
	if len(sink.ofType("member_started")) != 0 {
		t.Fatal("a member ran although worktree allocation failed")
	}
	wantConfigError(t, e, sink, build(t, "sequential", writer("a")), Options{Isolation: IsolationOptions{Enabled: true, Repo: "x"}}, "isolation")
}

// A member that stops at a call awaiting approval is paused, not failed, on any engine: parallel
// retries never re-run it (issue 22, defect 3: on an engine that is not durable it was re-run once
// per retry, and each run asked again).
func TestParallelNeverRetriesAMemberPausedForApproval(t *testing.T) {
	ref, err := reference.Start(context.Background(), reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	pf, digest, err := policy.ParseFile([]byte(askTestFile))
	if err != nil {
		t.Fatal(err)
	}
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	approvals := policy.NewApprovals(nil)
	e, err := runtime.NewEngine(runtime.EngineConfig{Provider: client, Model: reference.ModelID, Sink: &memSink{},
		BoundaryOptions: []tool.Option{tool.WithPolicy(policy.NewEngine(digest, 0, pf.Policy("p.yaml"))), tool.WithApprovals(approvals)}})
	if err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b")), Options{Parallel: ParallelOptions{MemberRetries: 2}})
	a := byID(res)["a"]
	if !a.Paused || a.Success || a.Turns != 1 {
		t.Fatalf("a: paused %v success %v turns %d, want paused after one turn, never retried", a.Paused, a.Success, a.Turns)
	}
	if n := len(approvals.ListPending()); n != 1 {
		t.Fatalf("%d approvals pending, want the one question a asked", n)
	}
	if b := byID(res)["b"]; !b.Success {
		t.Fatalf("b: %+v", b)
	}
}
