package indexer_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// excludedFixture is a module with a normal package, a cgo-only package
// (its only file imports "C") and a package whose only file is
// //go:build ignore, plus directories the go command never matches
// (testdata, _hidden, a nested module), which must not be reported.
var excludedFixture = map[string]string{
	"go.mod":             "module example.com/ex\n\ngo 1.22\n",
	"ok/ok.go":           "package ok\n\nfunc OK() int { return 1 }\n",
	"cgo/cgo.go":         "package cgo\n\n// int twice(int x) { return 2*x; }\nimport \"C\"\n\nfunc Twice() int { return int(C.twice(2)) }\n",
	"ignored/ignored.go": "//go:build ignore\n\npackage ignored\n\nfunc I() {}\n",
	"ok/testdata/t.go":   "//go:build ignore\n\npackage t\n",
	"_hidden/h.go":       "//go:build ignore\n\npackage h\n",
	"nested/go.mod":      "module example.com/nested\n\ngo 1.22\n",
	"nested/n.go":        "//go:build ignore\n\npackage n\n",
}

// TestExcludedByBuildContext: with CGO_ENABLED=0 the go command's "./..."
// silently drops the cgo-only package and the //go:build ignore one. The
// index must list them as excluded, with the go command's reason and the
// ignored files, and coverage must not read 1; with CGO_ENABLED=1 the cgo
// package is indexed and only the ignored one is excluded.
func TestExcludedByBuildContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, excludedFixture)
	for _, tc := range []struct {
		cgo          string
		wantExcluded []string
		wantIndexed  []string
	}{
		{cgo: "0", wantExcluded: []string{"example.com/ex/cgo", "example.com/ex/ignored"}, wantIndexed: []string{"example.com/ex/ok"}},
		{cgo: "1", wantExcluded: []string{"example.com/ex/ignored"}, wantIndexed: []string{"example.com/ex/cgo", "example.com/ex/ok"}},
	} {
		t.Run("CGO_ENABLED="+tc.cgo, func(t *testing.T) {
			t.Parallel()
			if tc.cgo == "1" {
				if _, err := exec.LookPath("gcc"); err != nil {
					t.Skip("gcc not on PATH")
				}
			}
			snap := index(t, indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "g.db"), Env: []string{"CGO_ENABLED=" + tc.cgo}})
			if snap.CGOEnabled != tc.cgo {
				t.Fatalf("CGOEnabled %q, want %q", snap.CGOEnabled, tc.cgo)
			}
			if snap.Counts.PackagesExcluded != len(tc.wantExcluded) {
				t.Errorf("PackagesExcluded %d, want %d", snap.Counts.PackagesExcluded, len(tc.wantExcluded))
			}
			want := float64(len(tc.wantIndexed)) / float64(len(tc.wantIndexed)+len(tc.wantExcluded))
			if snap.Coverage != want {
				t.Errorf("Coverage %v, want %v (excluded packages count as not loaded)", snap.Coverage, want)
			}
			db := openDB(t, snap.DBPath)
			var indexed []string
			for _, r := range queryRows(t, db, "SELECT import_path FROM packages ORDER BY 1") {
				indexed = append(indexed, r[0])
			}
			if !slices.Equal(indexed, tc.wantIndexed) {
				t.Errorf("indexed %v, want %v", indexed, tc.wantIndexed)
			}
			rep, err := indexer.LoadErrors(context.Background(), db, "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rep.PackagesExcluded, tc.wantExcluded) {
				t.Errorf("PackagesExcluded %v, want %v", rep.PackagesExcluded, tc.wantExcluded)
			}
			if rep.PackagesMatched != len(tc.wantIndexed)+len(tc.wantExcluded) || rep.PackagesOK != len(tc.wantIndexed) {
				t.Errorf("matched %d ok %d, want %d %d", rep.PackagesMatched, rep.PackagesOK, len(tc.wantIndexed)+len(tc.wantExcluded), len(tc.wantIndexed))
			}
			var got []string
			for _, e := range rep.Errors {
				if e.Kind != indexer.ExcludedByBuildContext {
					t.Errorf("unexpected load error %+v", e)
					continue
				}
				got = append(got, e.Package)
				base := filepath.Base(e.Package)
				if !strings.Contains(e.Message, "build constraints exclude all Go files") ||
					!strings.Contains(e.Message, "1 ignored Go file: "+base+".go") ||
					!strings.Contains(e.Message, "CGO_ENABLED="+tc.cgo) {
					t.Errorf("message of %s = %q, want the go command's reason, the ignored file and CGO_ENABLED", e.Package, e.Message)
				}
			}
			if !slices.Equal(got, tc.wantExcluded) {
				t.Errorf("excluded load errors %v, want %v", got, tc.wantExcluded)
			}
			reread, err := indexer.ReadSnapshot(context.Background(), snap.DBPath)
			if err != nil {
				t.Fatal(err)
			}
			if reread.Counts.PackagesExcluded != len(tc.wantExcluded) {
				t.Errorf("ReadSnapshot PackagesExcluded %d, want %d", reread.Counts.PackagesExcluded, len(tc.wantExcluded))
			}
		})
	}
}
