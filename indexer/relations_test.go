package indexer_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
)

const rel = "example.com/rel"

// TestRelations checks every edge kind on the relations fixture, in the
// base variant, and that the test variant's relations are its own.
func TestRelations(t *testing.T) {
	t.Parallel()
	// Read only: the shared index (with the metrics, which add their own
	// tables and leave the graph's as they are).
	snap := sharedIndexOf(t, sharedRelations, nil, relationsOptions())
	db := checkDatabaseFile(t, snap)
	g := "example.com/rel/graph"
	short := func(rows [][]string) [][]string {
		for _, r := range rows {
			for i := range r {
				r[i] = strings.ReplaceAll(r[i], rel+"/", "")
			}
		}
		return rows
	}
	edges := func(kind string) [][]string {
		return short(queryRows(t, db, "SELECT src, dst FROM edges WHERE kind = ? AND variant = 'base' ORDER BY src, dst", kind))
	}
	for _, tc := range []struct {
		kind string
		want [][]string
	}{
		{"calls", [][]string{
			{"func:cg.Add", "func:cg._Cfunc_add"},
			{"func:cg.Twice", "func:cg.Add"},
			{"func:graph.Twice", "func:graph.Run"},
			{"func:graph.Twice$1", "func:graph.Twice$1$1"},
			{"func:graph.UseBox", "func:graph.Make"},
			{"func:graph.UseBox", "method:graph.Box.Get"},
			{"method:graph.Node.Describe", "func:fmt.Sprintf"},
			{"method:graph.Node.Describe", "method:graph.Base.ID"},
			{"method:graph.Node.Describe", "method:graph.Node.Name"},
		}},
		{"calls_dynamic", [][]string{
			{"func:graph.Total", "imethod:graph.Sizer.Size"},
			{"method:graph.Node.Apply", "field:graph.Node.hook"},
		}},
		{"embeds", [][]string{
			{"type:graph.Node", "type:graph.Base"},
			{"type:graph.Sizer", "type:graph.Named"},
		}},
		{"field_access", [][]string{
			{"method:graph.Base.ID", "field:graph.Base.id"},
			{"method:graph.Box.Get", "field:graph.Box.v"},
			{"method:graph.Node.Apply", "field:graph.Node.hook"},
			{"method:graph.Node.Describe", "field:graph.Node.Base"}, // promoted method ID
			{"method:graph.Node.Later", "field:graph.Node.size"},    // inside a closure
			{"method:graph.Node.Name", "field:graph.Node.label"},
			{"method:graph.Node.Size", "field:graph.Node.Base"}, // promoted field id
			{"method:graph.Node.Size", "field:graph.Node.size"},
		}},
		{"implements", [][]string{
			{"type:graph.Node", "type:graph.Named"},
			{"type:graph.Node", "type:graph.Sizer"},
			{"type:graph.Sizer", "type:graph.Named"},
		}},
		{"instantiates", [][]string{
			{"func:graph.Make", "type:graph.Box"},
			{"func:graph.UseBox", "func:graph.Make"},
			{"method:graph.Box.Get", "type:graph.Box"},
		}},
		{"receiver_method", [][]string{
			{"method:graph.Node.Describe", "method:graph.Node.Name"},
			{"method:graph.Node.Handler", "method:graph.Node.Name"}, // method value
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, edges(tc.kind)); diff != "" {
				t.Errorf("%s edges (-want +got):\n%s", tc.kind, diff)
			}
		})
	}

	for _, tc := range []struct {
		name  string
		query string
		want  [][]string
	}{
		{
			name:  "references include types and method values, not calls",
			query: "SELECT dst FROM edges WHERE kind = 'references' AND src = 'method:" + g + ".Node.Handler' ORDER BY dst",
			want:  [][]string{{"method:graph.Node.Name"}, {"type:graph.Node"}},
		},
		{
			name:  "dynamic calls say what is known",
			query: "SELECT src, mode, coalesce(target, 'NULL'), expr, signature FROM dynamic_calls WHERE variant = 'base' ORDER BY seq",
			want: [][]string{
				{"method:graph.Node.Apply", "func_value", "field:graph.Node.hook", "n.hook", "func(string) string"},
				{"func:graph.Total", "interface", "imethod:graph.Sizer.Size", "it.Size", "func() int"},
				{"func:graph.Run", "func_value", "NULL", "f", "func() int"},
			},
		},
		{
			name:  "fields and interface methods are nodes with object paths, contained by their type",
			query: "SELECT n.id, n.kind, n.object_path, e.src FROM nodes n JOIN edges e ON e.dst = n.id AND e.kind = 'contains' WHERE n.package_id = 'pkg:" + g + "' AND n.kind IN ('field', 'interface_method') ORDER BY n.id",
			want: [][]string{
				{"field:graph.Base.id", "field", "Base.UF0", "type:graph.Base"},
				{"field:graph.Box.v", "field", "Box.UF0", "type:graph.Box"},
				{"field:graph.Node.Base", "field", "Node.UF0", "type:graph.Node"},
				{"field:graph.Node.hook", "field", "Node.UF3", "type:graph.Node"},
				{"field:graph.Node.label", "field", "Node.UF1", "type:graph.Node"},
				{"field:graph.Node.size", "field", "Node.UF2", "type:graph.Node"},
				{"imethod:graph.Named.Name", "interface_method", "Named.UM0", "type:graph.Named"},
				{"imethod:graph.Sizer.Size", "interface_method", "Sizer.UM1", "type:graph.Sizer"},
			},
		},
		{
			name:  "members table",
			query: "SELECT id, type_id, kind, embedded FROM members WHERE type_id = 'type:" + g + ".Node' ORDER BY id",
			want: [][]string{
				{"field:graph.Node.Base", "type:graph.Node", "field", "1"},
				{"field:graph.Node.hook", "type:graph.Node", "field", "0"},
				{"field:graph.Node.label", "type:graph.Node", "field", "0"},
				{"field:graph.Node.size", "type:graph.Node", "field", "0"},
			},
		},
		{
			name:  "closures are nodes contained by their function",
			query: "SELECT e.src, n.id, n.start_line FROM nodes n JOIN edges e ON e.dst = n.id AND e.kind = 'contains' WHERE n.kind = 'closure' AND n.package_id = 'pkg:" + g + "' ORDER BY n.id",
			want: [][]string{
				{"func:graph.Twice", "func:graph.Twice$1", "65"},
				{"func:graph.Twice$1", "func:graph.Twice$1$1", "66"},
				{"method:graph.Node.Later", "method:graph.Node.Later$1", "48"},
			},
		},
		{
			name:  "origins: example, generated, synthesized cgo function, module",
			query: "SELECT id, kind, origin FROM nodes WHERE origin IN ('example', 'generated', 'synthesized') AND kind != 'file' OR kind = 'module' ORDER BY id",
			want: [][]string{
				{"func:cg._Cfunc_add", "func", "synthesized"},
				{"func:gen.Generated", "func", "generated"},
				{"func:graph [graph.test].ExampleTwice", "func", "example"},
				{"mod:example.com/rel", "module", "production"},
			},
		},
		{
			name:  "a cgo source file's declarations are resolved through the rewritten file",
			query: "SELECT id, resolved, signature FROM funcs WHERE package_id = 'pkg:" + rel + "/cg' ORDER BY id",
			want:  [][]string{{"func:cg.Add", "1", "func(a int, b int) int"}, {"func:cg.Twice", "1", "func(a int) int"}},
		},
		{
			name:  "the test variant has its own relations",
			query: "SELECT src, dst, variant FROM edges WHERE kind = 'calls_dynamic' AND variant != 'base' ORDER BY src",
			want: [][]string{
				{"func:graph [graph.test].Total", "imethod:graph [graph.test].Sizer.Size", "test"},
				{"method:graph [graph.test].Node.Apply", "field:graph [graph.test].Node.hook", "test"},
			},
		},
		{
			name:  "modules contain packages",
			query: "SELECT count(*) FROM edges WHERE kind = 'contains' AND src = 'mod:" + rel + "'",
			want:  [][]string{{itoa(snap.Counts.Packages)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, short(queryRows(t, db, tc.query))); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.query, diff)
			}
		})
	}
}

// TestBuildContext: tags and GOOS decide which files exist, and are
// recorded in the snapshot.
func TestBuildContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":          "module example.com/bc\n\ngo 1.22\n",
		"p/p.go":          "package p\n\nfunc Always() {}\n",
		"p/special.go":    "//go:build special\n\npackage p\n\nfunc Special() {}\n",
		"p/p_windows.go":  "package p\n\nfunc OnWindows() {}\n",
		"p/p_linux.go":    "package p\n\nfunc OnLinux() {}\n",
		"p/p_darwin.go":   "package p\n\nfunc OnDarwin() {}\n",
		"p/p_freebsd.go":  "package p\n\nfunc OnFreeBSD() {}\n",
		"p/p_openbsd.go":  "package p\n\nfunc OnOpenBSD() {}\n",
		"p/p_netbsd.go":   "package p\n\nfunc OnNetBSD() {}\n",
		"p/p_other.go":    "//go:build !windows && !linux && !darwin && !freebsd && !openbsd && !netbsd\n\npackage p\n\nfunc Other() {}\n",
		"p/p_tagged_x.go": "//go:build special && windows\n\npackage p\n\nfunc SpecialWindows() {}\n",
	})
	funcs := func(snap indexer.Snapshot) []string {
		var out []string
		for _, r := range queryRows(t, openDB(t, snap.DBPath), "SELECT name FROM funcs ORDER BY name") {
			out = append(out, r[0])
		}
		return out
	}
	plain := index(t, indexer.Options{Dir: dir, GOOS: "linux", GOARCH: "amd64"})
	if diff := cmp.Diff([]string{"Always", "OnLinux"}, funcs(plain)); diff != "" {
		t.Errorf("linux funcs (-want +got):\n%s", diff)
	}
	win := index(t, indexer.Options{Dir: dir, GOOS: "windows", GOARCH: "amd64", Tags: []string{"special"}, Env: []string{"CGO_ENABLED=0"}})
	if diff := cmp.Diff([]string{"Always", "OnWindows", "Special", "SpecialWindows"}, funcs(win)); diff != "" {
		t.Errorf("windows+special funcs (-want +got):\n%s", diff)
	}
	if win.GOOS != "windows" || win.CGOEnabled != "0" || !cmp.Equal(win.Tags, []string{"special"}) {
		t.Errorf("snapshot build context = %s %s %v", win.GOOS, win.CGOEnabled, win.Tags)
	}
	row := queryRows(t, openDB(t, win.DBPath), "SELECT goos, goarch, cgo_enabled, build_tags FROM snapshots")
	if diff := cmp.Diff([][]string{{"windows", "amd64", "0", `["special"]`}}, row); diff != "" {
		t.Errorf("snapshot row (-want +got):\n%s", diff)
	}
	if win.ID == plain.ID {
		t.Errorf("snapshot ID did not change with the build context")
	}
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, Tags: []string{"a,b"}, DBPath: filepath.Join(t.TempDir(), "g.db")}); !errors.Is(err, indexer.ErrInvalidOptions) {
		t.Errorf("tag with a comma: err = %v, want ErrInvalidOptions", err)
	}
}

// TestWorkspace: in a go.work workspace, "./..." indexes every module.
func TestWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.work":     "go 1.22\n\nuse (\n\t./a\n\t./b\n)\n",
		"a/go.mod":    "module example.com/a\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nimport \"example.com/b\"\n\nfunc A() int { return b.B() }\n",
		"b/go.mod":    "module example.com/b\n\ngo 1.22\n",
		"b/b.go":      "package b\n\nfunc B() int { return 1 }\n",
		"b/sub/s.go":  "package sub\n\nfunc S() {}\n",
		"b/sub/s2.go": "package sub\n\nfunc S2() {}\n",
	})
	snap := index(t, indexer.Options{Dir: dir, Env: []string{"GOWORK=" + filepath.Join(dir, "go.work")}})
	if diff := cmp.Diff([]string{"example.com/a", "example.com/b"}, snap.ModulePaths); diff != "" {
		t.Errorf("ModulePaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"example.com/a/...", "example.com/b/..."}, snap.Patterns); diff != "" {
		t.Errorf("Patterns (-want +got):\n%s", diff)
	}
	db := openDB(t, snap.DBPath)
	if diff := cmp.Diff([][]string{{"func:example.com/a.A", "func:example.com/b.B"}}, queryRows(t, db, "SELECT src, dst FROM edges WHERE kind = 'calls'")); diff != "" {
		t.Errorf("cross-module call (-want +got):\n%s", diff)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM packages"); n != 3 {
		t.Errorf("%d packages, want 3", n)
	}
}

// TestReuse: an unchanged tree reuses the database without writing it; a
// changed file, or a changed build context, does not.
func TestReuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/re\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() int { return 1 }\n",
		"b/b.go": "package b\n\nimport \"example.com/re/a\"\n\nfunc B() int { return a.A() }\n",
	})
	dbPath := filepath.Join(t.TempDir(), "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Reuse: true, Tests: true}
	first := index(t, opts)
	if first.Reused {
		t.Fatalf("first index reported Reused")
	}
	st, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	second := index(t, opts)
	if !second.Reused || second.ID != first.ID || second.DBSHA256 != first.DBSHA256 || second.InputKey != first.InputKey {
		t.Errorf("unchanged re-run: Reused %v, ID %s vs %s, sha %s vs %s", second.Reused, second.ID, first.ID, second.DBSHA256, first.DBSHA256)
	}
	if diff := cmp.Diff(first.Counts, second.Counts); diff != "" {
		t.Errorf("reused counts (-first +second):\n%s", diff)
	}
	if st2, _ := os.Stat(dbPath); !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("database rewritten on an unchanged re-run")
	}
	withEnrich := opts
	withEnrich.EnrichID = "metrics-v2"
	if s := index(t, withEnrich); s.Reused {
		t.Errorf("reused a database written without the requested enrichment")
	}
	writeFiles(t, dir, map[string]string{"a/a.go": "package a\n\nfunc A() int { return 2 }\n"})
	third := index(t, withEnrich)
	if third.Reused || third.ID == first.ID {
		t.Errorf("changed file: Reused %v, ID unchanged %v", third.Reused, third.ID == first.ID)
	}
	tagged := withEnrich
	tagged.Tags = []string{"x"}
	if s := index(t, tagged); s.Reused {
		t.Errorf("reused a database written for other build tags")
	}
}

// TestSchemaVersionRefused: a database from another schema is refused,
// naming both versions.
func TestSchemaVersionRefused(t *testing.T) {
	t.Parallel()
	// A copy of the shared index: this test writes to it.
	snap := sharedIndexOf(t, sharedFixture, nil, indexer.Options{Dir: "testdata/fixture", Tests: false})
	snap.DBPath = copyShared(t, snap)
	db, err := sql.Open("sqlite3", snap.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = indexer.ReadSnapshot(context.Background(), snap.DBPath)
	var sv *indexer.SchemaVersionError
	if !errors.As(err, &sv) || !errors.Is(err, indexer.ErrSchemaVersion) || sv.Found != 99 || sv.Supported != indexer.SchemaVersion {
		t.Fatalf("ReadSnapshot error = %v, want SchemaVersionError{99, %d}", err, indexer.SchemaVersion)
	}
	if msg := err.Error(); !strings.Contains(msg, "99") || !strings.Contains(msg, "newer") {
		t.Errorf("error %q does not name the versions", msg)
	}
}

// TestVendor: a vendored dependency is loaded as the go command resolves
// it (from vendor/), and calls into it are edges to its declarations.
func TestVendor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":                        "module example.com/app\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
		"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
		"vendor/example.com/dep/dep.go": "package dep\n\n// Two returns 2.\nfunc Two() int { return 2 }\n",
		"app.go":                        "package app\n\nimport \"example.com/dep\"\n\n// Four calls into the vendored module.\nfunc Four() int { return dep.Two() * 2 }\n",
	})
	snap := index(t, indexer.Options{Dir: dir, Env: []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}})
	db := checkDatabaseFile(t, snap)
	if snap.Coverage != 1 {
		t.Errorf("Coverage = %v, want 1", snap.Coverage)
	}
	if diff := cmp.Diff([][]string{{"func:example.com/app.Four", "func:example.com/dep.Two"}}, queryRows(t, db, "SELECT src, dst FROM edges WHERE kind = 'calls'")); diff != "" {
		t.Errorf("call into the vendored module (-want +got):\n%s", diff)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM nodes WHERE id = 'func:example.com/dep.Two' AND origin = 'dependency'"); n != 1 {
		t.Errorf("vendored function is not a dependency node")
	}
}
