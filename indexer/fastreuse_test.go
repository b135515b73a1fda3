package indexer_test

import (
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

// TestReuseByFiles: an unchanged re-run is decided by the file-system check
// without the go command's listing ("files"), also with the database inside
// the module; a file the go command ignores makes the check fall back to
// the listing, which still reuses ("listing"); and every change the go
// command would see — a new file in a package, a new package, a new
// embedded file, an edited test file, an edited vendored file, another
// GOFLAGS, other cgo flags or C compiler — is not reused.
func TestReuseByFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":                        "module example.com/fs\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
		"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
		"vendor/example.com/dep/dep.go": "package dep\n\nfunc Two() int { return 2 }\n",
		"a/a.go":                        "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { return dep.Two() }\n",
		"a/a_test.go":                   "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { A() }\n",
		"e/e.go":                        "package e\n\nimport \"embed\"\n\n//go:embed data/*.txt\nvar Data embed.FS\n",
		"e/data/one.txt":                "one\n",
	})
	env := []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not on PATH")
	}
	dbPath := filepath.Join(dir, "assay-out", "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Reuse: true, Tests: true, Env: env}
	first := index(t, opts)
	if first.Reused || first.ReusedBy != "" {
		t.Fatalf("first index: Reused %v ReusedBy %q", first.Reused, first.ReusedBy)
	}
	if s := index(t, opts); !s.Reused || s.ReusedBy != "files" || s.DBSHA256 != first.DBSHA256 {
		t.Fatalf("unchanged re-run: Reused %v ReusedBy %q, same database %v", s.Reused, s.ReusedBy, s.DBSHA256 == first.DBSHA256)
	}

	writeFiles(t, dir, map[string]string{"NOTES.md": "not Go\n"})
	if s := index(t, opts); !s.Reused || s.ReusedBy != "listing" {
		t.Fatalf("a file the go command ignores: Reused %v ReusedBy %q, want reused by the listing", s.Reused, s.ReusedBy)
	}
	if err := os.Remove(filepath.Join(dir, "NOTES.md")); err != nil {
		t.Fatal(err)
	}
	if s := index(t, opts); s.ReusedBy != "files" {
		t.Fatalf("back as indexed: ReusedBy %q, want files", s.ReusedBy)
	}

	for _, change := range []struct {
		name  string
		files map[string]string
		env   []string
	}{
		{name: "new file in a package", files: map[string]string{"a/b.go": "package a\n\nfunc B() {}\n"}},
		{name: "new package", files: map[string]string{"c/c.go": "package c\n\nfunc C() {}\n"}},
		{name: "new embedded file", files: map[string]string{"e/data/two.txt": "two\n"}},
		{name: "edited test file", files: map[string]string{"a/a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { _ = A() }\n"}},
		{name: "edited vendored file", files: map[string]string{"vendor/example.com/dep/dep.go": "package dep\n\nfunc Two() int { return 3 }\n"}},
		{name: "other GOFLAGS", env: []string{"GOFLAGS=-mod=vendor -tags=x", "GOPROXY=off"}},
		// What cgo generates depends on the C toolchain and its flags.
		{name: "other CGO_CFLAGS", env: []string{"GOFLAGS=-mod=vendor -tags=x", "GOPROXY=off", "CGO_CFLAGS=-O1 -DASSAY_TEST=1"}},
		{name: "other CC", env: []string{"GOFLAGS=-mod=vendor -tags=x", "GOPROXY=off", "CGO_CFLAGS=-O1 -DASSAY_TEST=1", "CC=" + gcc}},
	} {
		writeFiles(t, dir, change.files)
		o := opts
		if change.env != nil {
			o.Env = change.env
		}
		if s := index(t, o); s.Reused {
			t.Errorf("%s: reused (%s)", change.name, s.ReusedBy)
		}
		// Indexed again, so the next change starts from an up-to-date database.
		if s := index(t, o); !s.Reused || s.ReusedBy != "files" {
			t.Errorf("%s: the run after the re-index: Reused %v ReusedBy %q", change.name, s.Reused, s.ReusedBy)
		}
	}
}

// TestFileChangedWhileIndexed: a file edited after the reuse key hashed it
// and before go/packages parsed it is indexed as parsed, and the stored
// keys describe that content: when the file is put back to what the key
// saw, the next run re-indexes instead of reusing a graph of other code.
func TestFileChangedWhileIndexed(t *testing.T) {
	// Not parallel: the load hook is process-wide.
	dir := t.TempDir()
	v1 := "package a\n\nfunc A() int { return 1 }\n"
	v2 := "package a\n\nfunc A() int { return 2 }\n"
	v3 := "package a\n\nfunc A() int { return 3 }\n\nfunc C() int { return 3 }\n"
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
	index(t, opts)

	writeFiles(t, dir, map[string]string{"a/a.go": v2})
	t.Cleanup(func() { indexer.SetTestHookBeforeLoad(nil) })
	indexer.SetTestHookBeforeLoad(func(d string) {
		if d == abs {
			writeFiles(t, dir, map[string]string{"a/a.go": v3})
		}
	})
	var stages []string
	o := opts
	o.Progress = func(s string) { stages = append(stages, s) }
	index(t, o)
	indexer.SetTestHookBeforeLoad(nil)
	if !slices.ContainsFunc(stages, func(s string) bool { return strings.Contains(s, "changed while being indexed") }) {
		t.Errorf("no progress message about the file that changed while indexed: %q", stages)
	}
	db := openDB(t, opts.DBPath)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM nodes WHERE id = 'func:example.com/race/a.C'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the graph should be of the parsed content (func C): count %d, err %v", n, err)
	}
	db.Close()

	writeFiles(t, dir, map[string]string{"a/a.go": v2})
	s := index(t, opts)
	if s.Reused {
		t.Fatalf("the file is back to the content the key saw, not to the indexed one, and the graph was reused (%s)", s.ReusedBy)
	}
	db = openDB(t, opts.DBPath)
	defer db.Close()
	sum := sha256.Sum256([]byte(v2))
	var got string
	if err := db.QueryRow(`SELECT sha256 FROM files WHERE path = ?`, filepath.Join(abs, "a", "a.go")).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != hex.EncodeToString(sum[:]) {
		t.Errorf("a.go recorded with SHA-256 %s, want the content on disk", got)
	}
	if s := index(t, opts); !s.Reused {
		t.Errorf("unchanged afterwards: not reused")
	}
}

// TestUnaffectedFileChangedWhileIndexed: in an incremental index, a file of
// a package the plan keeps (its bodies' relations copied from the previous
// database) that changes before it is parsed makes the index full: the
// relations of its new body are in the graph, not the old ones.
func TestUnaffectedFileChangedWhileIndexed(t *testing.T) {
	// Not parallel: the load hook is process-wide.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/race2\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() int { return 1 }\n",
		"b/b.go": "package b\n\nfunc Helper() {}\n\nfunc B() {}\n",
	})
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db"), Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}
	index(t, opts)

	writeFiles(t, dir, map[string]string{"a/a.go": "package a\n\nfunc A() int { return 2 }\n"})
	t.Cleanup(func() { indexer.SetTestHookBeforeLoad(nil) })
	indexer.SetTestHookBeforeLoad(func(d string) {
		if d == abs {
			writeFiles(t, dir, map[string]string{"b/b.go": "package b\n\nfunc Helper() {}\n\nfunc B() { Helper() }\n"})
		}
	})
	s := index(t, opts)
	indexer.SetTestHookBeforeLoad(nil)
	if s.Incremental || !strings.Contains(s.FullReason, "changed while being indexed") {
		t.Errorf("Incremental %v, FullReason %q: want a full index because a file changed while indexed", s.Incremental, s.FullReason)
	}
	db := openDB(t, opts.DBPath)
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM edges WHERE src = 'func:example.com/race2/b.B' AND dst = 'func:example.com/race2/b.Helper' AND kind = 'calls'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("calls edge of b.B's new body: count %d, err %v", n, err)
	}
	if s := index(t, opts); !s.Reused {
		t.Errorf("unchanged afterwards: not reused")
	}
}
