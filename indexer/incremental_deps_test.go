package indexer_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// requireSameAsFull indexes opts.Dir afresh (no previous database) and
// fails unless got's database has the same rows.
func requireSameAsFull(t *testing.T, opts indexer.Options, got indexer.Snapshot) {
	t.Helper()
	fullOpts := opts
	fullOpts.DBPath = filepath.Join(t.TempDir(), "full.db")
	want, have := dump(t, index(t, fullOpts).DBPath), dump(t, got.DBPath)
	for table := range want {
		if diff := cmp.Diff(want[table], have[table]); diff != "" {
			t.Errorf("table %s differs from a full index (Reused %v by %q, Incremental %v, Reindexed %v) (-full +got):\n%s",
				table, got.Reused, got.ReusedBy, got.Incremental, got.Reindexed, diff)
		}
	}
}

func withMetricsEnrich(opts indexer.Options) indexer.Options {
	opts.Enrich = metrics.Enrich(metrics.Options{})
	opts.EnrichGraph = metrics.EnrichGraph(metrics.Options{})
	opts.EnrichID = metrics.RegistryID()
	return opts
}

// TestIncrementalSeesDependencyChanges: a dependency that no pattern
// matches but whose files are hashed (a vendored module, a module replaced
// by a directory, a package of the main module outside the patterns) is
// edited so that the body of a matched package calls something else. No
// matched package changed, but the previous database's body relations
// are stale: the result must be what a full index gives, never an
// incremental index that kept them.
func TestIncrementalSeesDependencyChanges(t *testing.T) {
	t.Parallel()
	const (
		depStruct = "package dep\n\ntype T struct{}\n\nfunc (T) M() int { return 1 }\n"
		// T becomes an interface: t.M() is now a dynamic call.
		depIface = "package dep\n\ntype T interface{ M() int }\n"
		user     = "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { var t dep.T; return t.M() }\n"
	)
	leaves := map[string]string{"b/b.go": "package b\n\nfunc B() {}\n", "c/c.go": "package c\n\nfunc C() {}\n"}
	with := func(files map[string]string) map[string]string {
		for k, v := range leaves {
			files[k] = v
		}
		return files
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		dir      string // module directory, relative
		patterns []string
		env      []string
		dep      string // the dependency file edited, relative
	}{
		{name: "vendored module", env: []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}, dep: "vendor/example.com/dep/dep.go",
			files: with(map[string]string{
				"go.mod":                        "module example.com/v\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
				"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
				"vendor/example.com/dep/dep.go": depStruct,
				"a/a.go":                        user,
			})},
		{name: "module replaced by a directory", dir: "main", env: []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}, dep: "dep/dep.go",
			files: map[string]string{
				"main/go.mod": "module example.com/main\n\ngo 1.22\n\nrequire example.com/dep v0.0.0\n\nreplace example.com/dep => ../dep\n",
				"main/a/a.go": user,
				"main/b/b.go": leaves["b/b.go"],
				"main/c/c.go": leaves["c/c.go"],
				"dep/go.mod":  "module example.com/dep\n\ngo 1.22\n",
				"dep/dep.go":  depStruct,
			}},
		{name: "main module package outside the patterns", env: []string{"GOPROXY=off"}, dep: "dep/dep.go",
			patterns: []string{"./a/...", "./b/...", "./c/..."},
			files: with(map[string]string{
				"go.mod":     "module example.com\n\ngo 1.22\n",
				"dep/dep.go": depStruct,
				"a/a.go":     user,
			})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			opts := withMetricsEnrich(indexer.Options{Dir: filepath.Join(root, tc.dir), Patterns: tc.patterns,
				DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: tc.env})
			index(t, opts)
			writeFiles(t, root, map[string]string{tc.dep: depIface})
			s := index(t, opts)
			if s.Reused {
				t.Fatalf("reused (%s) after a dependency changed", s.ReusedBy)
			}
			requireSameAsFull(t, opts, s)
		})
	}
}
