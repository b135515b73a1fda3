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

// TestGraphCallersThroughFuncField: the calls through a func-valued field
// (calls_dynamic edges to it) are its callers; an interface method has
// callers but no callees.
func TestGraphCallersThroughFuncField(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../indexer/testdata/relations"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, "graph", "callers", "--out", out, "graph.Node.hook")
	if r.code != 0 || !strings.Contains(r.stdout, "calls_dynamic") || !strings.Contains(r.stdout, "method:example.com/rel/graph.Node.Apply") {
		t.Errorf("callers of a func-valued field: exit %d, stdout %q, stderr %q; want Node.Apply's calls_dynamic", r.code, r.stdout, r.stderr)
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

// TestGraphDynamicSiteSaysWhatIsMissing: a call of a func value with no
// node to go through is listed as a dynamic site whose callee is unknown,
// not as a resolved call.
func TestGraphDynamicSiteSaysWhatIsMissing(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../indexer/testdata/relations"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, "graph", "callees", "--out", out, "graph.Run")
	if r.code != 0 || !strings.Contains(r.stdout, "dynamic_site") || !strings.Contains(r.stdout, "f (func_value call; callee unknown)") {
		t.Errorf("callees of graph.Run: exit %d, stdout %q, stderr %q; want f as a func_value site with its callee unknown", r.code, r.stdout, r.stderr)
	}
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
