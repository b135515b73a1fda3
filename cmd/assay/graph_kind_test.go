package main

import (
	"strings"
	"testing"
)

// TestGraphCallsOfNonFunctionsAreRefused: callers/callees of a package,
// type or field exit 2 saying what the symbol is, instead of "no callers"
// with exit 0; a closure found by its suffix is accepted.
func TestGraphCallsOfNonFunctionsAreRefused(t *testing.T) {
	out := indexFixture(t)
	for _, sym := range []string{"example.com/mx/cx", "cx.Tree", "Tree.kids"} {
		r := runCLI(t, "graph", "callers", "--out", out, sym)
		if r.code != 2 || !strings.Contains(r.stderr, "not a function") {
			t.Errorf("callers %s: exit %d, stderr %q; want 2 and not a function", sym, r.code, r.stderr)
		}
		oneLine(t, r, "not a function")
	}
	if r := runCLI(t, "graph", "callees", "--out", out, "cx.WithClosure$1"); r.code != 0 {
		t.Errorf("callees of a closure by suffix: exit %d, stderr %q", r.code, r.stderr)
	}
}
