package indexer_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
)

// TestIncrementalUsesPackageNamesNotPaths: u is not re-indexed, so its
// bodies are stripped and the imports only they used are blanked. Its
// imports live at paths ending in "-go" whose packages are named otherwise
// (example.com/thing-go/v2 is package thing, example.com/other-go is
// package other, as github.com/openai/openai-go/v3 is package openai):
// thing appears in a signature and must stay imported, other appears in a
// body only and must be blanked. Guessing names from the paths got both
// wrong and fell back to a full index on every edit.
func TestIncrementalUsesPackageNamesNotPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/app\n\ngo 1.22\n\n" +
			"require (\n\texample.com/thing-go/v2 v2.0.0\n\texample.com/other-go v0.0.0\n)\n\n" +
			"replace example.com/thing-go/v2 => ./deps/thing\n\nreplace example.com/other-go => ./deps/other\n",
		"deps/thing/go.mod":   "module example.com/thing-go/v2\n\ngo 1.22\n",
		"deps/thing/thing.go": "package thing\n\n// Client is a client.\ntype Client struct{ Name string }\n",
		"deps/other/go.mod":   "module example.com/other-go\n\ngo 1.22\n",
		"deps/other/other.go": "package other\n\n// Hello greets.\nfunc Hello(s string) string { return \"hello \" + s }\n",
		"u/u.go": `package u

import (
	"example.com/other-go"
	"example.com/thing-go/v2"
)

// Greet greets c.
func Greet(c *thing.Client) string { return other.Hello(c.Name) }
`,
		"b/b.go": "package b\n\nfunc B() int { return 1 }\n",
		"c/c.go": "package c\n\nfunc C() {}\n",
	})
	opts := withMetricsEnrich(indexer.Options{Dir: dir, Patterns: []string{"./..."},
		DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off", "GOFLAGS=-mod=mod"}})
	if first := index(t, opts); first.Counts.LoadErrors != 0 {
		t.Fatalf("the module does not load cleanly: %d load errors", first.Counts.LoadErrors)
	}
	writeFiles(t, dir, map[string]string{"b/b.go": "package b\n\nfunc B() int { return 2 }\n"})
	s := index(t, opts)
	if !s.Incremental {
		t.Fatalf("edit of b indexed in full: %s", s.FullReason)
	}
	if diff := cmp.Diff([]string{"example.com/app/b"}, s.Reindexed); diff != "" {
		t.Errorf("Reindexed (-want +got):\n%s", diff)
	}
	requireSameAsFull(t, opts, s)
}
