package indexer_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestTreeChangedWhileColdIndexed: the content key is taken after the
// graph is built, after the go command listed the tree. A package added,
// or an embedded file removed, after that listing is not in the graph; the
// next run must not reuse the graph as if it described the tree (the key
// would find the tree it hashed), but give what a fresh index of the tree
// gives. Each change is made at the start of the graph build, several
// times.
func TestTreeChangedWhileColdIndexed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(dir string) error
	}{
		{"package added", func(dir string) error {
			if err := os.Mkdir(filepath.Join(dir, "c"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "c", "c.go"), []byte("package c\n\nfunc C() {}\n"), 0o644)
		}},
		{"embedded file removed", func(dir string) error {
			return os.Remove(filepath.Join(dir, "a", "data.txt"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Every round starts from the same tree at the same path and
			// makes the same change: a fresh index of the changed tree
			// gives the same rows each round, and is taken once.
			dir := filepath.Join(t.TempDir(), "m")
			var want [][]string
			for round := range 4 {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				writeFiles(t, dir, map[string]string{
					"go.mod":     "module example.com/coldtree\n\ngo 1.22\n",
					"a/a.go":     "package a\n\nimport _ \"embed\"\n\n//go:embed data.txt\nvar Data string\n\nfunc A() int { return 1 }\n",
					"a/data.txt": "one\n",
					"b/b.go":     "package b\n\nfunc B() {}\n",
				})
				opts := indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}
				cold := opts
				cold.Progress = func(s string) {
					if strings.HasPrefix(s, "building the graph") {
						if err := tc.change(dir); err != nil {
							t.Error(err)
						}
					}
				}
				if _, err := indexer.Index(context.Background(), cold); err != nil {
					t.Fatal(err)
				}
				again, err := indexer.Index(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				const q = `SELECT id FROM nodes UNION ALL SELECT message FROM load_errors ORDER BY 1`
				if want == nil {
					fresh := opts
					fresh.Reuse, fresh.DBPath = false, filepath.Join(t.TempDir(), "graph.db")
					index(t, fresh)
					want = queryRows(t, openDB(t, fresh.DBPath), q)
				}
				got := queryRows(t, openDB(t, opts.DBPath), q)
				if !slices.EqualFunc(got, want, slices.Equal) {
					t.Fatalf("round %d: the run after the change (reused %v) has nodes and load errors\n%q\na fresh index has\n%q",
						round, again.Reused, got, want)
				}
			}
		})
	}
}
