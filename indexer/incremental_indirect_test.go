package indexer_test

import (
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestIncrementalSeesImportsThroughUnmatchedPackages: k imports d, which
// no pattern matches, and d imports the matched package a. When a
// changes, k's body relations may change with it (k calls a method d's
// type promotes from a's), so k must be re-indexed although it does not
// import a itself: the result is what a full index gives.
func TestIncrementalSeesImportsThroughUnmatchedPackages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/ind\n\ngo 1.22\n",
		"a/a.go": "package a\n\ntype Inner struct{}\n\nfunc (Inner) M() {}\n",
		"d/d.go": "package d\n\nimport \"example.com/ind/a\"\n\ntype T struct{ a.Inner }\n",
		"k/k.go": "package k\n\nimport \"example.com/ind/d\"\n\nfunc F() { var t d.T; t.M() }\n",
		"b/b.go": "package b\n\nfunc B() {}\n",
		"c/c.go": "package c\n\nfunc C() {}\n",
	})
	opts := withMetricsEnrich(indexer.Options{Dir: dir, Patterns: []string{"./a", "./b", "./c", "./k"},
		DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}})
	index(t, opts)
	// a.Inner becomes an interface: t.M() in k is now a dynamic call.
	writeFiles(t, dir, map[string]string{"a/a.go": "package a\n\ntype Inner interface{ M() }\n"})
	s := index(t, opts)
	if s.Reused {
		t.Fatalf("reused (%s) after a matched package changed", s.ReusedBy)
	}
	requireSameAsFull(t, opts, s)
}
