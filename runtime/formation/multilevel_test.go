package formation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestSplitPreservesEveryByte(t *testing.T) {
	cases := []struct {
		input, strategy string
		n               int
		want            []string
		used            string
	}{
		{"a\nb\nc\n", "line", 2, []string{"a\nb\n", "c\n"}, "line"},
		{"a\nb\nc", "line", 2, []string{"a\nb\n", "c"}, "line"},
		{"a\nb", "line", 3, []string{"a\n", "b", ""}, "line"},
		{"abcdefg", "count", 3, []string{"abc", "de", "fg"}, "count"},
		{"héllo", "count", 2, []string{"hél", "lo"}, "count"},
		{"ab", "count", 4, []string{"a", "b", "", ""}, "count"},
		{"", "auto", 2, []string{"", ""}, "count"},
		{"x\ny\nz\n", "auto", 3, []string{"x\n", "y\n", "z\n"}, "line"},
		{"one line only", "auto", 2, []string{"one lin", "e only"}, "count"},
		// The task has lines: auto splits by line even with fewer lines than leaves (the seed's
		// contract); the leaf beyond the lines gets an explicit empty portion.
		{"a\nb\n", "auto", 3, []string{"a\n", "b\n", ""}, "line"},
		{"a\nbc", "auto", 3, []string{"a\n", "bc", ""}, "line"},
	}
	for _, c := range cases {
		got, used := Split(c.input, c.n, c.strategy)
		if strings.Join(got, "") != c.input {
			t.Fatalf("Split(%q,%d,%s) lost input: %q", c.input, c.n, c.strategy, got)
		}
		if len(got) != len(c.want) || used != c.used {
			t.Fatalf("Split(%q,%d,%s) = %q (%s), want %q (%s)", c.input, c.n, c.strategy, got, used, c.want, c.used)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("Split(%q,%d,%s) = %q, want %q", c.input, c.n, c.strategy, got, c.want)
			}
		}
	}
}

func TestMultiLevelHierarchyRunsTheTree(t *testing.T) {
	e, sink, _ := setup(t)
	tm := build(t, "multi_level_hierarchy", withRoleSpec("root", RoleSupervisor), withRoleSpec("lead", RoleSupervisor), writer("a"), writer("b"))
	tm.Task = "first portion\nsecond portion\nthird portion\n"
	tree := &TreeNode{MemberID: "root", Children: []TreeNode{{MemberID: "lead", Children: []TreeNode{{MemberID: "a"}, {MemberID: "b"}}}}}
	res := mustRun(t, e, tm, Options{Hierarchy: HierarchyOptions{Tree: tree}})
	if !res.Success || res.Metadata["depth"] != "3" || res.Metadata["split"] != "line" || len(res.Members) != 4 {
		t.Fatalf("%+v", res)
	}
	// The final output is the root's synthesis followed by every member's own finding, in tree
	// order (the seed's contract), not the root's synthesis alone.
	m := byID(res)
	want := "synthesis of lead\n\nMember findings:\n[lead] " + m["lead"].Output + "\n[a] " + m["a"].Output + "\n[b] " + m["b"].Output
	if res.FinalOutput != want {
		t.Fatalf("final output %q, want %q", res.FinalOutput, want)
	}
	requestText := func(session string) string {
		var req map[string]any
		if err := json.Unmarshal(sink.artifacts["provider/"+session+"/0/request.json"], &req); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(req["messages"])
		return string(b)
	}
	if a := requestText("run-test-a"); !strings.Contains(a, `first portion\nsecond portion`) || strings.Contains(a, "third") {
		t.Fatalf("leaf a's portion: %s", a)
	}
	if b := requestText("run-test-b"); !strings.Contains(b, "third portion") || strings.Contains(b, "first") {
		t.Fatalf("leaf b's portion: %s", b)
	}
	if l := requestText("run-test-lead"); !strings.Contains(l, "[a] ") || !strings.Contains(l, "[b] ") {
		t.Fatalf("lead did not see its children's outcomes: %s", l)
	}
}

func TestMultiLevelHierarchyFromMemberOrderAndEmptyPortions(t *testing.T) {
	e, sink, _ := setup(t)
	// root -> (a, b), a -> (c); leaves b and c. Two leaves, a one-character task: one portion empty.
	tm := build(t, "multi_level_hierarchy", withRoleSpec("root", RoleSupervisor), withRoleSpec("a", RoleSupervisor), writer("b"), writer("c"))
	tm.Task = "x"
	res := mustRun(t, e, tm, Options{})
	if !res.Success || res.Metadata["tree"] != `{"member_id":"root","children":[{"member_id":"a","children":[{"member_id":"c"}]},{"member_id":"b"}]}` {
		t.Fatalf("%+v", res.Metadata)
	}
	var req map[string]any
	_ = json.Unmarshal(sink.artifacts["provider/run-test-b/0/request.json"], &req)
	if b, _ := json.Marshal(req["messages"]); !strings.Contains(string(b), "is empty: the split left nothing for you") {
		t.Fatalf("empty portion not stated explicitly: %s", b)
	}
}

func TestMultiLevelHierarchyFailedLeafStaysFailed(t *testing.T) {
	e, _, _ := setup(t, reference.Fault{Member: "a", Turn: -1, Kind: reference.FaultHTTP500})
	res := mustRun(t, e, build(t, "multi_level_hierarchy", withRoleSpec("root", RoleSupervisor), writer("a"), writer("b")), Options{})
	m := byID(res)
	if res.Success || m["a"].Success || !m["root"].Success || !strings.Contains(res.FinalOutput, "- a: ") {
		t.Fatalf("%+v", res)
	}
}

func TestMultiLevelHierarchyValidation(t *testing.T) {
	e, sink, _ := setup(t)
	members := build(t, "multi_level_hierarchy", withRoleSpec("root", RoleSupervisor), writer("a"), writer("b")).Members
	tree := func(n TreeNode) Options { return Options{Hierarchy: HierarchyOptions{Tree: &n}} }
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown id", tree(TreeNode{MemberID: "root", Children: []TreeNode{{MemberID: "a"}, {MemberID: "b"}, {MemberID: "zz"}}}), "unknown member"},
		{"duplicate", tree(TreeNode{MemberID: "root", Children: []TreeNode{{MemberID: "a"}, {MemberID: "a"}}}), "more than once"},
		{"missing", tree(TreeNode{MemberID: "root", Children: []TreeNode{{MemberID: "a"}}}), "missing from the tree"},
		{"too deep", Options{Hierarchy: HierarchyOptions{Fanout: 1, MaxDepth: 2}}, "exceeds max_depth 2"},
		{"unknown split", Options{Hierarchy: HierarchyOptions{Split: "words"}}, "split strategy"},
		{"writer inside the tree", tree(TreeNode{MemberID: "a", Children: []TreeNode{{MemberID: "root"}, {MemberID: "b"}}}), "may hold only readonly tools"},
		{"negative fanout", Options{Hierarchy: HierarchyOptions{Fanout: -1}}, "fanout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantConfigError(t, e, sink, build(t, "multi_level_hierarchy", members...), c.opts, c.want)
		})
	}
}

// Under capacity admission a supervisor holds no slot while its members run: with one slot,
// root -> lead -> (a, b) completes (it deadlocked until the deadline; issue 22 defect 2).
func TestMultiLevelUnderCapacityOneDoesNotDeadlock(t *testing.T) {
	e, sink, _ := setupWith(t, reference.Config{ParallelCapacity: 1})
	tm := build(t, "multi_level_hierarchy", withRoleSpec("root", RoleSupervisor), withRoleSpec("lead", RoleSupervisor), writer("a"), writer("b"))
	opts := Options{Capacity: CapacityOptions{Aware: true}, Hierarchy: HierarchyOptions{Tree: &TreeNode{MemberID: "root",
		Children: []TreeNode{{MemberID: "lead", Children: []TreeNode{{MemberID: "a"}, {MemberID: "b"}}}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunWith(ctx, e, tm, opts)
	if err != nil || ctx.Err() != nil {
		t.Fatalf("RunWith: %v (context %v)", err, ctx.Err())
	}
	if !res.Success || len(res.Members) != 4 {
		t.Fatalf("team %+v", res)
	}
	if len(sink.ofType("member_throttled")) == 0 {
		t.Error("with one slot and two leaves, a leaf must have queued")
	}
}
