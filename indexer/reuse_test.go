package indexer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// keyModule is a module with a test file, an embedded file, a vendored
// dependency, a file the go command ignores (build-excluded) and go.sum.
var keyModule = map[string]string{
	"go.mod":                        "module example.com/fs\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
	"go.sum":                        "example.com/unused v1.0.0 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
	"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
	"vendor/example.com/dep/dep.go": "package dep\n\nfunc Two() int { return 2 }\n",
	"a/a.go":                        "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { return dep.Two() }\n",
	"a/a_test.go":                   "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { A() }\n",
	"a/never.go":                    "//go:build never\n\npackage a\n\nfunc Never() {}\n",
	"e/e.go":                        "package e\n\nimport \"embed\"\n\n//go:embed data/*.txt\nvar Data embed.FS\n",
	"e/data/one.txt":                "one\n",
}

// TestKeyCatchesEachKindOfChange: an unchanged re-run is reused, also with
// the database inside the module; every change of what the content key
// covers indexes, saying what changed, and the run after that reuses
// again: an edited, added or removed Go file, a new package, an edited,
// added or removed embedded file, an edited test, build-excluded or
// vendored file, go.mod and go.sum, a file the go command ignores, other
// build tags, GOOS, GOFLAGS, cgo flags and C compiler.
//
// A change of configuration is checked at the reuse decision (Index up to
// it, loading nothing), each against the same database: a full index under
// another GOOS, GOFLAGS (-trimpath), C compiler or cgo flags compiles the
// export data of the standard library again, in a fresh build cache, and
// reaches the reuse decision and the content key by the same code as the
// file changes. One configuration change, the build tags, is indexed in
// full, and the run after it must reuse.
func TestKeyCatchesEachKindOfChange(t *testing.T) {
	t.Parallel()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not on PATH")
	}
	dir := t.TempDir()
	writeFiles(t, dir, keyModule)
	env := []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}
	opts := indexer.Options{Dir: dir, DBPath: filepath.Join(dir, "assay-out", "graph.db"), Reuse: true, Tests: true, Env: env}
	first := index(t, opts)
	if first.Reused || first.InputKey == "" {
		t.Fatalf("first index: Reused %v, InputKey %q", first.Reused, first.InputKey)
	}
	if s := index(t, opts); !s.Reused || s.DBSHA256 != first.DBSHA256 || s.InputKey != first.InputKey {
		t.Fatalf("unchanged re-run: Reused %v, same database %v, same key %v", s.Reused, s.DBSHA256 == first.DBSHA256, s.InputKey == first.InputKey)
	}
	remove := func(name string) func(t *testing.T) {
		return func(t *testing.T) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, change := range []struct {
		name   string
		files  map[string]string
		do     func(t *testing.T)
		reason string // what FullReason must say
	}{
		{name: "edited file", files: map[string]string{"a/a.go": "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { return dep.Two() + 1 }\n"},
			reason: "file a/a.go changed"},
		{name: "new file in a package", files: map[string]string{"a/b.go": "package a\n\nfunc B() {}\n"},
			reason: "directory a changed since the last index (an entry was added, removed or renamed)"},
		{name: "removed file", do: remove("a/b.go"), reason: "file a/b.go was removed"},
		{name: "new package", files: map[string]string{"c/c.go": "package c\n\nfunc C() {}\n"}, reason: "directory . changed"},
		{name: "edited embedded file", files: map[string]string{"e/data/one.txt": "uno\n"}, reason: "file e/data/one.txt changed"},
		{name: "new embedded file", files: map[string]string{"e/data/two.txt": "two\n"}, reason: "directory e/data changed"},
		{name: "removed embedded file", do: remove("e/data/two.txt"), reason: "file e/data/two.txt was removed"},
		{name: "edited test file", files: map[string]string{"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { _ = A() }\n"},
			reason: "file a/a_test.go changed"},
		{name: "edited build-excluded file", files: map[string]string{"a/never.go": "//go:build !never\n\npackage a\n\nfunc Never() {}\n"},
			reason: "file a/never.go changed"},
		{name: "edited vendored file", files: map[string]string{"vendor/example.com/dep/dep.go": "package dep\n\nfunc Two() int { return 3 }\n"},
			reason: "file vendor/example.com/dep/dep.go changed"},
		{name: "edited go.mod", files: map[string]string{"go.mod": keyModule["go.mod"] + "\n// a comment\n"}, reason: "file go.mod changed"},
		{name: "edited go.sum", files: map[string]string{"go.sum": ""}, reason: "file go.sum changed"},
		{name: "a file the go command ignores", files: map[string]string{"NOTES.md": "not Go\n"}, reason: "directory . changed"},
	} {
		writeFiles(t, dir, change.files)
		if change.do != nil {
			change.do(t)
		}
		s := index(t, opts)
		if s.Reused || !strings.Contains(s.FullReason, change.reason) {
			t.Errorf("%s: Reused %v, FullReason %q; want an index saying %q", change.name, s.Reused, s.FullReason, change.reason)
		}
		if s := index(t, opts); !s.Reused {
			t.Errorf("%s: the run after the index was not reused: %s", change.name, s.FullReason)
		}
	}

	for _, change := range []struct {
		name   string
		edit   func(o *indexer.Options)
		reason string // what FullReason must say
	}{
		{name: "other GOOS", edit: func(o *indexer.Options) { o.GOOS = "windows" }, reason: "GOOS linux -> windows"},
		{name: "other GOFLAGS", edit: func(o *indexer.Options) { o.Env = []string{"GOFLAGS=-mod=vendor -trimpath", "GOPROXY=off"} },
			reason: "GOFLAGS -mod=vendor -> -mod=vendor -trimpath"},
		// What cgo generates depends on the C toolchain and its flags.
		{name: "other CGO_CFLAGS", edit: func(o *indexer.Options) { o.Env = append(slices.Clip(o.Env), "CGO_CFLAGS=-O1 -DASSAY_TEST=1") },
			reason: "CGO_CFLAGS"},
		{name: "other CC", edit: func(o *indexer.Options) { o.Env = append(slices.Clip(o.Env), "CC="+gcc) }, reason: "CC gcc -> " + gcc},
		{name: "other build tags", edit: func(o *indexer.Options) { o.Tags = []string{"x"} }, reason: "build tags [] -> [x]"},
	} {
		o := opts
		change.edit(&o)
		s, err := indexer.ReuseDecision(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v", change.name, err)
		}
		if s.Reused || !strings.Contains(s.FullReason, change.reason) {
			t.Errorf("%s: Reused %v, FullReason %q; want an index saying %q", change.name, s.Reused, s.FullReason, change.reason)
		}
	}
	// The decisions wrote nothing: the database is still reused as it is.
	if s := index(t, opts); !s.Reused {
		t.Fatalf("after the reuse decisions, an unchanged configuration is not reused: %s", s.FullReason)
	}
	// One configuration change indexed in full: the key its load gives
	// is the one the next run computes.
	opts.Tags = []string{"x"}
	if s := index(t, opts); s.Reused || !strings.Contains(s.FullReason, "build tags [] -> [x]") {
		t.Errorf("other build tags: Reused %v, FullReason %q; want an index saying %q", s.Reused, s.FullReason, "build tags [] -> [x]")
	}
	if s := index(t, opts); !s.Reused {
		t.Errorf("other build tags: the run after the index was not reused: %s", s.FullReason)
	}
}

// TestUnchangedTreeIsReused: the key a cold index takes from its load is
// the key the next run computes from the disk, on modules with a
// directory replace, a go.work workspace, cgo, and on two packages of this
// repository (the vendored and embedded files are
// TestKeyCatchesEachKindOfChange's).
func TestUnchangedTreeIsReused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		files      map[string]string
		dir        string
		env        []string
		shared     string // instead of files: the shared index of sharedOpts
		sharedOpts func() indexer.Options
	}{
		{name: "directory replace", dir: "main", env: []string{"GOPROXY=off", "GOFLAGS=-mod=mod"}, files: map[string]string{
			"main/go.mod": "module example.com/main\n\ngo 1.22\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n",
			"main/m.go":   "package main\n\nimport \"example.com/lib\"\n\nfunc main() { lib.L() }\n",
			"lib/go.mod":  "module example.com/lib\n\ngo 1.22\n",
			"lib/l.go":    "package lib\n\nfunc L() {}\n",
		}},
		{name: "workspace", files: map[string]string{
			"go.work":  "go 1.22\n\nuse (\n\t./a\n\t./b\n)\n",
			"a/go.mod": "module example.com/wa\n\ngo 1.22\n",
			"a/a.go":   "package a\n\nimport \"example.com/wb\"\n\nfunc A() { b.B() }\n",
			"b/go.mod": "module example.com/wb\n\ngo 1.22\n",
			"b/b.go":   "package b\n\nfunc B() {}\n",
		}},
		// The cold index of these two is a shared one (with the metrics),
		// copied: the same bytes a cold index of the copy's path gives.
		{name: "cgo", shared: sharedRelations, sharedOpts: relationsOptions},
		{name: "this repository", shared: sharedIndexerAndMetrics, sharedOpts: indexerAndMetricsOptions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var first indexer.Snapshot
			var opts indexer.Options
			if tc.shared != "" {
				opts = tc.sharedOpts()
				first = sharedIndexOf(t, tc.shared, nil, opts)
				opts.DBPath, opts.Reuse = copyShared(t, first), true
			} else {
				root := t.TempDir()
				writeFiles(t, root, tc.files)
				dir := filepath.Join(root, tc.dir)
				opts = indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: tc.env}
				first = index(t, opts)
			}
			if first.InputKey == "" {
				t.Fatalf("no content key")
			}
			if s := index(t, opts); !s.Reused {
				t.Fatalf("unchanged re-run not reused: %s", s.FullReason)
			}
			if tc.name == "workspace" {
				writeFiles(t, opts.Dir, map[string]string{"b/c/c.go": "package c\n\nfunc C() {}\n"})
				if s := index(t, opts); s.Reused || s.Counts.Packages != first.Counts.Packages+1 {
					t.Errorf("a new package in a workspace module: Reused %v, %d packages (were %d)", s.Reused, s.Counts.Packages, first.Counts.Packages)
				}
			}
		})
	}
}

// TestFileEditedDuringIndexing: a file edited while Index runs, before
// go/packages parses it, is indexed as parsed and recorded with that
// content's SHA-256; the next run indexes again (the file was modified
// while indexed, so the graph may mix contents), also when the file was put
// back to what it was before, and the run after that reuses.
func TestFileEditedDuringIndexing(t *testing.T) {
	t.Parallel()
	v1 := "package a\n\nfunc A() int { return 1 }\n"
	v2 := "package a\n\nfunc A() int { return 3 }\n\nfunc C() int { return 3 }\n"
	for _, putBack := range []bool{false, true} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{
			"go.mod": "module example.com/race\n\ngo 1.22\n",
			"a/a.go": v1,
			"b/b.go": "package b\n\nfunc B() {}\n",
		})
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		opts := indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}
		var stages []string
		o := indexer.WithBeforeLoad(opts, func(d string) {
			if d == abs {
				writeFiles(t, dir, map[string]string{"a/a.go": v2})
			}
		})
		o.Progress = func(s string) { stages = append(stages, s) }
		index(t, o)
		if !slices.ContainsFunc(stages, func(s string) bool { return strings.Contains(s, "modified while being indexed") }) {
			t.Errorf("no progress message about the file modified while indexed: %q", stages)
		}
		db := openDB(t, opts.DBPath)
		sum := sha256.Sum256([]byte(v2))
		if n := queryInt(t, db, `SELECT count(*) FROM nodes WHERE id = 'func:example.com/race/a.C'`); n != 1 {
			t.Errorf("the graph is not of the parsed content (func C): %d nodes", n)
		}
		if got := queryRows(t, db, `SELECT sha256 FROM files WHERE path = ?`, filepath.Join(abs, "a", "a.go")); len(got) != 1 || got[0][0] != hex.EncodeToString(sum[:]) {
			t.Errorf("a.go recorded with SHA-256 %q, want the parsed content's", got)
		}
		if putBack {
			writeFiles(t, dir, map[string]string{"a/a.go": v1})
		}
		s := index(t, opts)
		if s.Reused || !strings.Contains(s.FullReason, "was modified while the last index read it") {
			t.Errorf("put back %v: Reused %v, FullReason %q; want an index because a.go was modified while indexed", putBack, s.Reused, s.FullReason)
		}
		if s := index(t, opts); !s.Reused {
			t.Errorf("put back %v: unchanged afterwards, not reused: %s", putBack, s.FullReason)
		}
	}
}

// TestKeySeesDependencyChanges: a dependency that no pattern matches but
// whose files are hashed (a vendored module, a module replaced by a
// directory, a package of the main module outside the patterns) is edited
// so that the body of a matched package calls something else. No matched
// package changed; the result must still be what a fresh index gives.
func TestKeySeesDependencyChanges(t *testing.T) {
	t.Parallel()
	const (
		depStruct = "package dep\n\ntype T struct{}\n\nfunc (T) M() int { return 1 }\n"
		// T becomes an interface: t.M() is now a dynamic call.
		depIface = "package dep\n\ntype T interface{ M() int }\n"
		user     = "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { var t dep.T; return t.M() }\n"
	)
	for _, tc := range []struct {
		name     string
		files    map[string]string
		dir      string // module directory, relative
		patterns []string
		env      []string
		dep      string // the dependency file edited, relative
	}{
		{name: "vendored module", env: []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}, dep: "vendor/example.com/dep/dep.go",
			files: map[string]string{
				"go.mod":                        "module example.com/v\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
				"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
				"vendor/example.com/dep/dep.go": depStruct,
				"a/a.go":                        user,
			}},
		{name: "module replaced by a directory", dir: "main", env: []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}, dep: "dep/dep.go",
			files: map[string]string{
				"main/go.mod": "module example.com/main\n\ngo 1.22\n\nrequire example.com/dep v0.0.0\n\nreplace example.com/dep => ../dep\n",
				"main/a/a.go": user,
				"dep/go.mod":  "module example.com/dep\n\ngo 1.22\n",
				"dep/dep.go":  depStruct,
			}},
		{name: "main module package outside the patterns", env: []string{"GOPROXY=off"}, dep: "dep/dep.go",
			patterns: []string{"./a/..."},
			files: map[string]string{
				"go.mod":     "module example.com\n\ngo 1.22\n",
				"dep/dep.go": depStruct,
				"a/a.go":     user,
			}},
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
			if s.Reused || !strings.Contains(s.FullReason, "dep.go changed") {
				t.Fatalf("after a dependency changed: Reused %v, FullReason %q", s.Reused, s.FullReason)
			}
			requireSameAsFull(t, opts, s)
		})
	}
}

// TestFullReasonNamesTheChange: when a database's snapshot was taken with
// another configuration, the index says which of its fields changed (the
// root directory, the build tags), not a list of what might have.
func TestFullReasonNamesTheChange(t *testing.T) {
	t.Parallel()
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := os.CopyFS(d, os.DirFS("testdata/fixture")); err != nil {
			t.Fatal(err)
		}
	}
	opts := indexer.Options{Dir: a, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}
	index(t, opts)
	opts.Dir = b
	snap := index(t, opts)
	if want := "root directory " + a + " -> " + b; snap.Reused || !strings.Contains(snap.FullReason, want) {
		t.Errorf("another directory: reused %v, full reason %q; want it to say %q", snap.Reused, snap.FullReason, want)
	}
	opts.Tags = []string{"extra"}
	snap = index(t, opts)
	if want := "build tags [] -> [extra]"; !strings.Contains(snap.FullReason, want) || strings.Contains(snap.FullReason, "root directory") {
		t.Errorf("other tags: full reason %q; want only %q", snap.FullReason, want)
	}
}

// TestContextChangeQuotesWhatItCannotPrint: a recorded value with a
// terminal escape or a newline is shown quoted, not written raw.
func TestContextChangeQuotesWhatItCannotPrint(t *testing.T) {
	t.Parallel()
	got := indexer.ContextChange("/a\x1b[2J\n", "/b")
	if strings.ContainsAny(got, "\x1b\n") || !strings.Contains(got, `"/a\x1b[2J\n" -> /b`) {
		t.Errorf("contextChange = %q", got)
	}
}

// TestPatternsThatAreNotDirectoriesAreNeverReused: an import path pattern
// can match packages anywhere, so the index has no content key: every run
// indexes, saying why.
func TestPatternsThatAreNotDirectoriesAreNeverReused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"go.mod": "module example.com/ip\n\ngo 1.22\n", "a/a.go": "package a\n\nfunc A() {}\n"})
	opts := indexer.Options{Dir: dir, Patterns: []string{"example.com/ip/..."}, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Env: []string{"GOPROXY=off"}}
	if s := index(t, opts); s.InputKey != "" {
		t.Errorf("InputKey %q for an import path pattern, want none", s.InputKey)
	}
	if s := index(t, opts); s.Reused || !strings.Contains(s.FullReason, "no content key") {
		t.Errorf("Reused %v, FullReason %q; want an index saying there is no content key", s.Reused, s.FullReason)
	}
}
