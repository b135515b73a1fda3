package main

import (
	"strings"
	"testing"
)

// TestGraphCallsOfNonFunctionsAreRefused: callers/callees of a package or
// type, callers of a field no call goes through and callees of an
// interface method or a field (no body) exit 2 saying what the symbol is,
// instead of "no callers" with exit 0; a closure found by its suffix is
// accepted, and when it has no callees the output says where a closure's
// calls are recorded.
func TestGraphCallsOfNonFunctionsAreRefused(t *testing.T) {
	out := indexFixture(t)
	for _, c := range []struct{ query, sym, want string }{
		{"callers", "example.com/mx/cx", "is a package"},
		{"callers", "cx.Tree", "is a type"},
		{"callers", "Tree.kids", "is a field that no call goes through"},
		{"callees", "Tree.kids", "has no body"},
		{"callees", "cx.Tree", "has no body"},
	} {
		r := runCLI(t, "graph", c.query, "--out", out, c.sym)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q; want 2 and %q", c.query, c.sym, r.code, r.stderr, c.want)
		}
		oneLine(t, r, c.want)
	}
	r := runCLI(t, "graph", "callees", "--out", out, "cx.WithClosure$1")
	if r.code != 0 || !strings.Contains(r.stdout, "recorded on the declaration it is in: assay graph callees 'func:example.com/mx/cx.WithClosure'") {
		t.Errorf("callees of a closure by suffix: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestGraphCallsThroughFuncValues: on one index of the relations
// fixture, the calls through a func-valued field (calls_dynamic edges to
// it) are its callers; a call of a func value with no node to go through
// is a dynamic site whose callee is unknown, not a resolved call; an
// interface method has no callees to list (exit 2).
func TestGraphCallsThroughFuncValues(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../indexer/testdata/relations"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"callers", "graph.Node.hook"}, "method:example.com/rel/graph.Node.Apply"},
		{[]string{"callees", "graph.Run"}, "f (func_value call; callee unknown)"},
	} {
		r := runCLI(t, append([]string{"graph", c.args[0], "--out", out}, c.args[1:]...)...)
		if r.code != 0 || !strings.Contains(r.stdout, c.want) {
			t.Errorf("graph %v: exit %d, stdout %q, stderr %q; want %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
	r := runCLI(t, "graph", "callees", "--out", out, "graph.Sizer.Size")
	if r.code != 2 || !strings.Contains(r.stderr, "has no body") {
		t.Errorf("callees of an interface method: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestMetricsSortOfAnotherScope: --sort naming a metric of another scope
// says which scope to add.
func TestMetricsSortOfAnotherScope(t *testing.T) {
	out := indexFixture(t)
	r := runCLI(t, "metrics", "--out", out, "--sort", "lcom4")
	if r.code != 2 || !strings.Contains(r.stderr, "is a type metric, not a package one: add --scope type") {
		t.Errorf("--sort lcom4 without --scope: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLine(t, r, "add --scope type")
}

// TestMetricsOfAnIndexWithoutThem: metrics on a database indexed with
// --metrics=false says how to get them, in one line, exit 2; the index's
// warning counts in the singular when one.
func TestMetricsOfAnIndexWithoutThem(t *testing.T) {
	out := indexFixture(t, "--metrics=false")
	r := runCLI(t, "metrics", "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, "unless given --metrics=false") {
		t.Errorf("metrics of an index without them: exit %d, stderr %q", r.code, r.stderr)
	}
	oneLine(t, r, "--metrics=false")
	if got := plural(1, "error") + ", " + plural(2, "pattern"); got != "1 error, 2 patterns" {
		t.Errorf("plural: %q", got)
	}
}
