package indexer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestCgoFileModifiedWhileIndexed: a cgo source file is edited while the
// go command runs cgo on it (a C compiler wrapper edits it on cgo's type
// probe, after cgo read it). go/packages type-checks cgo's output of the
// old content, and never parses the source itself, so the key hashes it
// from disk, after the edit. The next run must not present the graph of
// the old content as the graph of the code on disk: not reused, but what a
// fresh index gives.
//
// Both cases use one wrapper, at one path, told through its environment
// what to edit (the go command caches what it compiled with a C compiler
// by the compiler's path): the standard library's runtime/cgo, which cgo
// runs no type probe on, is compiled with it once, by the first case, and
// the cases run one after the other so that the second finds it.
func TestCgoFileModifiedWhileIndexed(t *testing.T) {
	t.Parallel()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not on PATH")
	}
	const (
		v0 = "package a\n\n// int twice(int x) { return 2*x; }\nimport \"C\"\n\nfunc A() int { return int(C.twice(3)) }\n"
		v1 = "package a\n\n// int twice(int x) { return 2*x; }\nimport \"C\"\n\nfunc A() int { return int(C.twice(2)) }\n"
		v2 = "package a\n\n// int twice(int x) { return 2*x; }\nimport \"C\"\n\nfunc A() int { return B() }\n"
	)
	// cgo runs the C compiler with -gdwarf-2 to learn the C types,
	// after it has read the Go file.
	cc := filepath.Join(t.TempDir(), "cc")
	script := "#!/bin/sh\ncase \"$*\" in\n*-gdwarf-2*)\n\tif [ ! -e \"$ASSAY_TEST_FLAG\" ]; then\n\t\ttouch \"$ASSAY_TEST_FLAG\"" +
		"\n\t\tcp \"$ASSAY_TEST_FROM\" \"$ASSAY_TEST_TO\"\n\tfi;;\nesac\nexec " + gcc + " \"$@\"\n"
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		previous bool // a database of v0 exists
	}{
		{name: "cold index"},
		{name: "previous database", previous: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"go.mod": "module example.com/cgomod\n\ngo 1.22\n",
				"a/b.go": "package a\n\nfunc B() int { return 1 }\n",
				"b/b.go": "package b\n\nfunc B() {}\n",
				"c/c.go": "package c\n\nfunc C() {}\n",
				"d/d.go": "package d\n\nfunc D() {}\n",
			})
			bin := t.TempDir()
			flag := filepath.Join(bin, "edited")
			writeFiles(t, bin, map[string]string{"v2.go": v2})
			opts := withMetricsEnrich(indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true,
				Env: []string{"GOPROXY=off", "CC=" + cc, "ASSAY_TEST_FLAG=" + flag,
					"ASSAY_TEST_FROM=" + filepath.Join(bin, "v2.go"), "ASSAY_TEST_TO=" + filepath.Join(dir, "a", "a.go")}})
			if tc.previous {
				writeFiles(t, bin, map[string]string{"edited": ""})
				writeFiles(t, dir, map[string]string{"a/a.go": v0})
				index(t, opts)
				if err := os.Remove(flag); err != nil {
					t.Fatal(err)
				}
			}
			writeFiles(t, dir, map[string]string{"a/a.go": v1})
			index(t, opts)
			if _, err := os.Stat(flag); err != nil {
				t.Fatalf("the compiler wrapper did not edit a/a.go while indexing: %v", err)
			}
			requireSameAsFull(t, opts, index(t, opts))
		})
	}
}
