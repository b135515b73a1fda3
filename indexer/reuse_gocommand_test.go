package indexer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestKeySeesWhatTheGoCommandSees: changes the go command sees outside the
// directories under the patterns must not reuse the database: a go.mod appearing between the pattern root and the module
// root (the packages move to another module), a new file in a package
// directory reached through a symbolic link (the go command follows it for
// an import path, the walk does not), and the package of a missing import
// appearing outside the pattern roots.
func TestKeySeesWhatTheGoCommandSees(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		files    map[string]string
		symlink  [2]string // link, target, relative; none when empty
		dir      string
		patterns []string
		change   map[string]string
	}{
		{name: "go.mod between the root and the module root", dir: "x/y",
			files: map[string]string{
				"go.mod":     "module example.com/outer\n\ngo 1.22\n",
				"x/y/y.go":   "package y\n\nfunc Y() {}\n",
				"x/y/z/z.go": "package z\n\nimport \"example.com/outer/x/y\"\n\nfunc Z() { y.Y() }\n",
			},
			change: map[string]string{"x/go.mod": "module example.com/inner\n\ngo 1.22\n"}},
		{name: "new file in a symlinked package directory", dir: "m", symlink: [2]string{"m/lnk", "shared"},
			files: map[string]string{
				"m/go.mod":    "module example.com/sl\n\ngo 1.22\n",
				"m/a/a.go":    "package a\n\nimport \"example.com/sl/lnk\"\n\ntype T struct{}\n\nfunc (T) M() {}\n\nfunc A() { lnk.S() }\n",
				"shared/s.go": "package lnk\n\nfunc S() {}\n",
			},
			// a.T now implements lnk.I.
			change: map[string]string{"shared/i.go": "package lnk\n\ntype I interface{ M() }\n"}},
		{name: "missing import appears outside the roots", patterns: []string{"./a/..."},
			files: map[string]string{
				"go.mod": "module example.com/mi\n\ngo 1.22\n",
				"a/a.go": "package a\n\nimport \"example.com/mi/b/c\"\n\nfunc A() { c.C() }\n",
				"b/b.go": "package b\n\nfunc B() {}\n",
			},
			change: map[string]string{"b/c/c.go": "package c\n\nfunc C() {}\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			if tc.symlink[0] != "" {
				if err := os.Symlink(filepath.Join(root, tc.symlink[1]), filepath.Join(root, tc.symlink[0])); err != nil {
					t.Fatal(err)
				}
			}
			opts := withMetricsEnrich(indexer.Options{Dir: filepath.Join(root, tc.dir), Patterns: tc.patterns,
				DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}})
			index(t, opts)
			if s := index(t, opts); !s.Reused {
				t.Fatalf("unchanged re-run not reused")
			}
			writeFiles(t, root, tc.change)
			s := index(t, opts)
			if s.Reused {
				t.Errorf("reused after the change")
			}
			requireSameAsFull(t, opts, s)
		})
	}
}
