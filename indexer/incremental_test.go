package indexer_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// incrementalModule has four units: b imports a, d imports c. Bodies use
// imports that signatures do not (fmt, strings), closures, dynamic calls,
// receiver fields and test files, so that whatever an incremental index
// keeps from the previous database is exercised.
var incrementalModule = map[string]string{
	"go.mod": "module example.com/inc\n\ngo 1.22\n",
	"a/a.go": `package a

import "strings"

// Upper upper-cases.
func Upper(s string) string { return strings.ToUpper(s) }
`,
	"b/b.go": `package b

import (
	"fmt"

	"example.com/inc/a"
)

// Greeter greets.
type Greeter struct{ name string; hook func(string) string }

// Greet uses a closure, a field and a func-valued field.
func (g *Greeter) Greet() string {
	f := func() string { return a.Upper(g.name) }
	return fmt.Sprint(g.hook(f()))
}
`,
	"b/b_test.go": `package b

import "testing"

func TestGreet(t *testing.T) {
	g := &Greeter{name: "x", hook: func(s string) string { return s }}
	if g.Greet() != "X" {
		t.Fatal(g.Greet())
	}
}
`,
	"c/c.go": `package c

import "sort"

// Sorted sorts a copy.
func Sorted(xs []int) []int {
	out := append([]int(nil), xs...)
	sort.Ints(out)
	return out
}

// Stringer is implemented by d.Name.
type Stringer interface{ String() string }
`,
	"d/d.go": `package d

import "example.com/inc/c"

// Name implements c.Stringer.
type Name string

// String implements c.Stringer.
func (n Name) String() string { return string(n) }

// First returns the smallest.
func First(xs []int) int { return c.Sorted(xs)[0] }

var _ c.Stringer = Name("")
`,
}

// dump renders every table of a graph database in a canonical order, with
// the columns that legitimately differ between an incremental and a full
// index (dynamic_calls.seq, the snapshot's bookkeeping) left out.
func dump(t *testing.T, path string) map[string][][]string {
	t.Helper()
	db := openDB(t, path)
	out := map[string][][]string{}
	for table, q := range map[string]string{
		// seq is a surrogate key: the rows, not their numbering, are the graph.
		"nodes":         "SELECT id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path FROM nodes ORDER BY id",
		"edges":         "SELECT * FROM edges ORDER BY src, dst, kind",
		"packages":      "SELECT * FROM packages ORDER BY id",
		"files":         "SELECT * FROM files ORDER BY id",
		"types":         "SELECT * FROM types ORDER BY id",
		"funcs":         "SELECT * FROM funcs ORDER BY id",
		"members":       "SELECT * FROM members ORDER BY id",
		"imports":       "SELECT * FROM imports ORDER BY package_id, import_path",
		"load_errors":   "SELECT package_id, go_id, kind, position, message FROM load_errors ORDER BY 1, 2, 3, 4, 5",
		"dynamic_calls": "SELECT src, closure, mode, target, expr, signature, file_id, line, col, variant FROM dynamic_calls ORDER BY src, line, col",
		"metric_values": "SELECT * FROM metric_values ORDER BY metric, subject",
		"snapshot":      "SELECT id, nodes, edges, packages, files, types, funcs, methods, coverage FROM snapshots",
	} {
		out[table] = queryRows(t, db, q)
	}
	return out
}

func TestIncrementalEqualsFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, incrementalModule)
	dbPath := filepath.Join(t.TempDir(), "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Tests: true, Reuse: true,
		Enrich: metrics.Enrich(metrics.Options{}), EnrichGraph: metrics.EnrichGraph(metrics.Options{}), EnrichID: metrics.RegistryID()}
	first := index(t, opts)
	if first.Incremental || first.Reused {
		t.Fatalf("first index: Incremental %v Reused %v", first.Incremental, first.Reused)
	}

	for _, step := range []struct {
		name      string
		file      string
		content   string
		reindexed []string
	}{
		{"change a leaf imported by another unit", "c/c.go", strings.Replace(incrementalModule["c/c.go"], "sort.Ints(out)", "sort.Ints(out)\n\tsort.Ints(out)\n\tif len(out) > 3 {\n\t\treturn out[:3]\n\t}", 1),
			[]string{"example.com/inc/c", "example.com/inc/d"}},
		{"change a test file only", "b/b_test.go", strings.Replace(incrementalModule["b/b_test.go"], `"X"`, `"Y"`, 1),
			[]string{"example.com/inc/b"}},
	} {
		t.Run(step.name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{step.file: step.content})
			inc := index(t, opts)
			checkDatabaseFile(t, inc)
			if !inc.Incremental || inc.Reused {
				t.Fatalf("Incremental %v Reused %v, want an incremental index", inc.Incremental, inc.Reused)
			}
			if diff := cmp.Diff(step.reindexed, inc.Reindexed); diff != "" {
				t.Errorf("Reindexed (-want +got):\n%s", diff)
			}
			fullOpts := opts
			fullOpts.DBPath = filepath.Join(t.TempDir(), "full.db")
			full := index(t, fullOpts)
			if full.Incremental {
				t.Fatalf("fresh database indexed incrementally")
			}
			if inc.ID != full.ID {
				t.Errorf("snapshot ID %s, full index %s", inc.ID, full.ID)
			}
			if diff := cmp.Diff(full.Counts, inc.Counts); diff != "" {
				t.Errorf("Counts (-full +incremental):\n%s", diff)
			}
			want, got := dump(t, full.DBPath), dump(t, inc.DBPath)
			for table := range want {
				if diff := cmp.Diff(want[table], got[table]); diff != "" {
					t.Errorf("table %s differs from a full index (-full +incremental):\n%s", table, diff)
				}
			}
			// The kept unit's body relations came from the previous database.
			db := openDB(t, inc.DBPath)
			if n := queryInt(t, db, "SELECT count(*) FROM edges WHERE src = 'method:example.com/inc/b.Greeter.Greet' AND kind = 'calls'"); n == 0 && step.file != "b/b_test.go" {
				t.Errorf("kept package b lost its calls edges")
			}
		})
	}
}

// TestIncrementalFallsBackToFull: a new package, or more than half of the
// units affected, indexes in full.
func TestIncrementalFallsBackToFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, incrementalModule)
	dbPath := filepath.Join(t.TempDir(), "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Tests: true, Reuse: true}
	index(t, opts)
	writeFiles(t, dir, map[string]string{"e/e.go": "package e\n\nfunc E() {}\n"})
	if s := index(t, opts); s.Incremental {
		t.Errorf("new package: indexed incrementally (%v)", s.Reindexed)
	}
	writeFiles(t, dir, map[string]string{"a/a.go": incrementalModule["a/a.go"] + "\nfunc More() {}\n", "c/c.go": incrementalModule["c/c.go"] + "\nfunc More() {}\n"})
	if s := index(t, opts); s.Incremental {
		t.Errorf("4 of 5 units affected: indexed incrementally (%v)", s.Reindexed)
	}
	var n int
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM funcs WHERE name = 'More'").Scan(&n); err != nil || n != 2 {
		t.Errorf("full re-index lost a change: %d More funcs, %v", n, err)
	}
}

// TestProgress: each stage is reported, in order, from the calling goroutine.
func TestProgress(t *testing.T) {
	t.Parallel()
	var stages []string
	index(t, indexer.Options{Dir: "testdata/fixture", Progress: func(s string) { stages = append(stages, s) }})
	want := []string{"loading and type-checking packages", "building the graph of 2 packages", "writing the database",
		"checking (PRAGMA integrity_check, foreign_key_check), syncing and hashing the database"}
	if diff := cmp.Diff(want, stages); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
}
