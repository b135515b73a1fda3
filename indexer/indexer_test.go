package indexer_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/indexer"
)

// index runs indexer.Index into a fresh database under t.TempDir.
func index(t *testing.T, opts indexer.Options) indexer.Snapshot {
	t.Helper()
	if opts.DBPath == "" {
		opts.DBPath = filepath.Join(t.TempDir(), "out", "graph.db")
	}
	snap, err := indexer.Index(context.Background(), opts)
	if err != nil {
		t.Fatalf("Index(%+v): %v", opts, err)
	}
	return snap
}

// openDB opens a written graph database read-only.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	return n
}

// queryRows returns every row of q with each column rendered as a string
// ("NULL" for NULL).
func queryRows(t *testing.T, db *sql.DB, q string, args ...any) [][]string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// physicalLine returns the 1-based line of the first line of path that
// starts with prefix.
func physicalLine(t *testing.T, path, prefix string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.HasPrefix(sc.Text(), prefix) {
			return n
		}
	}
	t.Fatalf("%s: no line starts with %q", path, prefix)
	return 0
}

// checkDatabaseFile asserts what every written database must satisfy:
// the reported hash is the file's, PRAGMA integrity_check is ok, the
// schema version is recorded, and the snapshot row matches the Snapshot.
func checkDatabaseFile(t *testing.T, snap indexer.Snapshot) *sql.DB {
	t.Helper()
	if got := fileSHA256(t, snap.DBPath); got != snap.DBSHA256 {
		t.Errorf("DBSHA256 = %s, file hashes to %s", snap.DBSHA256, got)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(snap.ID) {
		t.Errorf("snapshot ID %q is not SHA-256 hex", snap.ID)
	}
	entries, err := os.ReadDir(filepath.Dir(snap.DBPath))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case filepath.Base(snap.DBPath):
		case filepath.Base(snap.DBPath) + "-sha256":
			// The record the next index checks the file against.
			if b, err := os.ReadFile(snap.DBPath + "-sha256"); err != nil || string(b) != snap.DBSHA256+"\n" {
				t.Errorf("SHA-256 record %q (%v), want %s", b, err, snap.DBSHA256)
			}
		default:
			t.Errorf("leftover file %s next to the database", e.Name())
		}
	}
	db := openDB(t, snap.DBPath)
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Errorf("integrity_check = %q, %v", integrity, err)
	}
	if v := queryInt(t, db, "PRAGMA user_version"); v != indexer.SchemaVersion {
		t.Errorf("user_version = %d, want %d", v, indexer.SchemaVersion)
	}
	c := snap.Counts
	for _, tc := range []struct {
		name  string
		query string
		want  int
	}{
		{"one snapshot row", "SELECT count(*) FROM snapshots WHERE id = ?", 1},
		{"nodes rows", "SELECT count(*) FROM nodes", c.Nodes},
		{"edges rows", "SELECT count(*) FROM edges", c.Edges},
		{"snapshot nodes", "SELECT nodes FROM snapshots WHERE id = ?", c.Nodes},
		{"snapshot edges", "SELECT edges FROM snapshots WHERE id = ?", c.Edges},
		{"packages rows", "SELECT count(*) FROM packages", c.Packages},
		{"files rows", "SELECT count(*) FROM files", c.Files},
		{"types rows", "SELECT count(*) FROM types", c.Types},
		{"func rows", "SELECT count(*) FROM funcs WHERE is_method = 0", c.Funcs},
		{"method rows", "SELECT count(*) FROM funcs WHERE is_method = 1", c.Methods},
		{"imports rows", "SELECT count(*) FROM imports", c.Imports},
		{"load_errors rows", "SELECT count(*) FROM load_errors", c.LoadErrors},
		{"snapshot packages", "SELECT packages FROM snapshots WHERE id = ?", c.Packages},
		{"snapshot funcs", "SELECT funcs FROM snapshots WHERE id = ?", c.Funcs},
		{"snapshot load errors", "SELECT load_errors FROM snapshots WHERE id = ?", c.LoadErrors},
		{"packages with errors", "SELECT count(*) FROM packages WHERE error_count > 0", c.PackagesWithErrors},
		{"ill-typed packages", "SELECT count(*) FROM packages WHERE ill_typed = 1", c.PackagesIllTyped},
		{"snapshot ill-typed packages", "SELECT packages_ill_typed FROM snapshots WHERE id = ?", c.PackagesIllTyped},
		{"covered packages", "SELECT packages_ok FROM snapshots WHERE id = ?", c.Packages - queryInt(t, db, "SELECT count(*) FROM packages WHERE error_count > 0 OR ill_typed = 1")},
		{"unmatched patterns", "SELECT count(DISTINCT go_id) FROM load_errors WHERE package_id IS NULL AND go_id NOT LIKE '%.test'", c.UnmatchedPatterns},
	} {
		var args []any
		if strings.Contains(tc.query, "?") {
			args = append(args, snap.ID)
		}
		if got := queryInt(t, db, tc.query, args...); got != tc.want {
			t.Errorf("%s: %s = %d, want %d", tc.name, tc.query, got, tc.want)
		}
	}
	var coverage float64
	if err := db.QueryRow("SELECT coverage FROM snapshots").Scan(&coverage); err != nil {
		t.Fatal(err)
	}
	if coverage != snap.Coverage {
		t.Errorf("snapshots.coverage = %v, Snapshot.Coverage = %v", coverage, snap.Coverage)
	}
	return db
}

const fx = "example.com/fixture"

func TestIndexFixture(t *testing.T) {
	t.Parallel()
	snap := sharedIndexOf(t, sharedFixtureTests, nil, fixtureTestsOptions())
	db := checkDatabaseFile(t, snap)

	wantCounts := indexer.Counts{Packages: 4, Files: 7, Types: 12, Funcs: 12, Methods: 5, Imports: 6}
	wantCounts.Nodes = queryInt(t, db, "SELECT count(*) FROM nodes")
	wantCounts.Edges = queryInt(t, db, "SELECT count(*) FROM edges")
	if diff := cmp.Diff(wantCounts, snap.Counts); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if snap.Coverage != 1 {
		t.Errorf("Coverage = %v, want 1", snap.Coverage)
	}
	if diff := cmp.Diff([]string{fx}, snap.ModulePaths); diff != "" {
		t.Errorf("ModulePaths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"./..."}, snap.Patterns); diff != "" {
		t.Errorf("Patterns (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(snap.GoVersion, "go") || snap.GOOS == "" || snap.GOARCH == "" {
		t.Errorf("toolchain not recorded: GoVersion %q GOOS %q GOARCH %q", snap.GoVersion, snap.GOOS, snap.GOARCH)
	}

	shapesGo, _ := filepath.Abs("testdata/fixture/shapes/shapes.go")
	rectLine := physicalLine(t, shapesGo, "type Rect struct")
	lineDirected := physicalLine(t, shapesGo, "func lineDirected")
	sh, shT, shX := "pkg:"+fx+"/shapes", "pkg:"+fx+"/shapes ["+fx+"/shapes.test]", "pkg:"+fx+"/shapes_test ["+fx+"/shapes.test]"

	for _, tc := range []struct {
		name  string
		query string
		args  []any
		want  [][]string
	}{
		{
			name:  "three distinct shapes variants and units",
			query: "SELECT go_id, name, variant, for_test, module_path FROM packages ORDER BY go_id",
			want: [][]string{
				{fx + "/shapes", "shapes", "base", "NULL", fx},
				{fx + "/shapes [" + fx + "/shapes.test]", "shapes", "test", fx + "/shapes", fx},
				{fx + "/shapes_test [" + fx + "/shapes.test]", "shapes_test", "xtest", fx + "/shapes", fx},
				{fx + "/units", "units", "base", "NULL", fx},
			},
		},
		{
			name: "method receivers in the base package",
			query: `SELECT f.name, f.receiver, f.receiver_type_name, f.receiver_pointer, f.receiver_type_id, f.signature, f.resolved
				FROM funcs f WHERE f.package_id = ? AND f.is_method = 1 ORDER BY f.name`,
			args: []any{sh},
			want: [][]string{
				{"Area", "Rect", "Rect", "0", "type:" + fx + "/shapes.Rect", "func() example.com/fixture/units.Area", "1"},
				{"Scale", "*Rect", "Rect", "1", "type:" + fx + "/shapes.Rect", "func(f float64)", "1"},
			},
		},
		{
			name:  "method_of edge",
			query: "SELECT src, dst, variant FROM edges WHERE kind = 'method_of' AND src = ?",
			args:  []any{"method:" + fx + "/shapes.Rect.Scale"},
			want:  [][]string{{"method:" + fx + "/shapes.Rect.Scale", "type:" + fx + "/shapes.Rect", "base"}},
		},
		{
			name:  "generated flag per variant",
			query: "SELECT f.package_id, f.generated, f.is_test, n.origin FROM files f JOIN nodes n ON n.id = f.id WHERE f.name = 'zz_generated.go' ORDER BY f.package_id",
			want:  [][]string{{sh, "1", "0", "generated"}, {shT, "1", "0", "generated"}},
		},
		{
			name:  "declarations from generated files are marked",
			query: "SELECT id, origin FROM nodes WHERE name = 'GeneratedName' ORDER BY id",
			want: [][]string{
				{"func:" + fx + "/shapes [" + fx + "/shapes.test].GeneratedName", "generated"},
				{"func:" + fx + "/shapes.GeneratedName", "generated"},
			},
		},
		{
			name:  "test files",
			query: "SELECT f.package_id, f.name, f.is_test, f.generated, f.compiled, f.indexed, f.rel_path, n.origin FROM files f JOIN nodes n ON n.id = f.id WHERE f.is_test = 1 ORDER BY f.id",
			want: [][]string{
				{shT, "shapes_test.go", "1", "0", "1", "1", "shapes/shapes_test.go", "test"},
				{shX, "example_test.go", "1", "0", "1", "1", "shapes/example_test.go", "test"},
			},
		},
		{
			name:  "import edges",
			query: "SELECT src, dst FROM edges WHERE kind = 'imports' ORDER BY src, dst",
			want: [][]string{
				{sh, "pkg:" + fx + "/units"},
				{shT, "pkg:" + fx + "/units"},
				{shT, "pkg:testing"},
				{shX, shT},
				{shX, "pkg:fmt"},
				{"pkg:" + fx + "/units", "pkg:fmt"},
			},
		},
		{
			name:  "xtest imports the test variant, which is indexed",
			query: "SELECT import_path, imported_id, imported_indexed FROM imports WHERE package_id = ? ORDER BY import_path",
			args:  []any{shX},
			want:  [][]string{{fx + "/shapes", shT, "1"}, {"fmt", "pkg:fmt", "0"}},
		},
		{
			name:  "dependency packages are nodes without a name, their declarations only where used",
			query: "SELECT id, kind, name, origin FROM nodes WHERE origin = 'dependency' ORDER BY id",
			want: [][]string{
				{"func:fmt.Println", "func", "Println", "dependency"},
				{"func:fmt.Sprintf", "func", "Sprintf", "dependency"},
				{"method:testing.common.Errorf", "method", "Errorf", "dependency"},
				{"pkg:fmt", "package", "NULL", "dependency"},
				{"pkg:testing", "package", "NULL", "dependency"},
				{"type:fmt.Stringer", "type", "Stringer", "dependency"}, // units.Area implements it
				{"type:testing.T", "type", "T", "dependency"},
			},
		},
		{
			name:  "type kinds and type parameters",
			query: "SELECT name, type_kind, exported, type_params, resolved FROM types WHERE package_id = ? ORDER BY name",
			args:  []any{sh},
			want: [][]string{
				{"Box", "alias", "1", "0", "1"},
				{"Count", "other", "1", "0", "1"},
				{"Pair", "struct", "1", "2", "1"},
				{"Rect", "struct", "1", "0", "1"},
				{"Shape", "interface", "1", "0", "1"},
			},
		},
		{
			name:  "generic func and repeated init",
			query: "SELECT id, type_params, exported FROM funcs WHERE package_id = ? AND is_method = 0 ORDER BY id",
			args:  []any{sh},
			want: [][]string{
				{"func:" + fx + "/shapes.GeneratedName", "0", "1"},
				{"func:" + fx + "/shapes.Map", "2", "1"},
				{"func:" + fx + "/shapes.init", "0", "0"},
				{"func:" + fx + "/shapes.init#2", "0", "0"},
				{"func:" + fx + "/shapes.lineDirected", "0", "0"},
			},
		},
		{
			name:  "physical position of a type",
			query: "SELECT file_id, start_line, start_col, end_line, end_col FROM nodes WHERE id = ?",
			args:  []any{"type:" + fx + "/shapes.Rect"},
			want:  [][]string{{"file:" + fx + "/shapes:shapes.go", itoa(rectLine), "1", itoa(rectLine + 2), "2"}},
		},
		{
			name:  "//line directives are not applied",
			query: "SELECT n.start_line, f.name FROM nodes n JOIN files f ON f.id = n.file_id WHERE n.id = ?",
			args:  []any{"func:" + fx + "/shapes.lineDirected"},
			want:  [][]string{{itoa(lineDirected), "shapes.go"}},
		},
		{
			name:  "package contains files, files contain declarations",
			query: "SELECT count(*) FROM edges WHERE kind = 'contains' AND src = ?",
			args:  []any{"file:" + fx + "/shapes:shapes.go"},
			want:  [][]string{{"11"}},
		},
		{
			name:  "snapshot row",
			query: "SELECT module_paths, patterns, tests, tool_version, coverage, packages_matched, packages_ok, schema_version FROM snapshots",
			want:  [][]string{{`["example.com/fixture"]`, `["./..."]`, "1", "test-1", "1", "4", "4", "4"}},
		},
		{
			name:  "no load errors",
			query: "SELECT count(*) FROM load_errors",
			want:  [][]string{{"0"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, queryRows(t, db, tc.query, tc.args...)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.query, diff)
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestIndexIsReproducible: the same inputs give the same snapshot id and
// the same database bytes; different inputs give a different id.
func TestIndexIsReproducible(t *testing.T) {
	t.Parallel()
	// a is the shared index (into another path than b).
	a := sharedIndexOf(t, sharedFixtureTests, nil, fixtureTestsOptions())
	b := index(t, fixtureTestsOptions())
	if a.ID != b.ID {
		t.Errorf("snapshot IDs differ for the same inputs: %s vs %s", a.ID, b.ID)
	}
	if a.DBSHA256 != b.DBSHA256 {
		t.Errorf("database hashes differ for the same inputs: %s vs %s", a.DBSHA256, b.DBSHA256)
	}
	noTests := sharedIndexOf(t, sharedFixture, nil, indexer.Options{Dir: "testdata/fixture", Tests: false})
	if noTests.ID == a.ID {
		t.Errorf("snapshot ID did not change when tests were excluded")
	}
	want := indexer.Counts{Packages: 2, Files: 3, Types: 6, Funcs: 5, Methods: 3, Imports: 2}
	want.Nodes, want.Edges = noTests.Counts.Nodes, noTests.Counts.Edges
	if want.Nodes == 0 || want.Edges == 0 {
		t.Errorf("Counts without tests: no nodes or edges counted: %+v", noTests.Counts)
	}
	if diff := cmp.Diff(want, noTests.Counts); diff != "" {
		t.Errorf("Counts without tests (-want +got):\n%s", diff)
	}
}

// TestIndexReplacesDatabaseAtomically: an existing database is replaced by
// the new one, and nothing else is left in the directory.
func TestIndexReplacesDatabaseAtomically(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "graph.db")
	previous := writePreviousGraph(t, dbPath)
	snap := index(t, indexer.Options{Dir: "testdata/fixture", DBPath: dbPath})
	if snap.DBSHA256 == previous {
		t.Errorf("the previous database was not replaced")
	}
	checkDatabaseFile(t, snap)
	if snap.DBPath != dbPath {
		t.Errorf("DBPath = %s, want %s", snap.DBPath, dbPath)
	}
}

// writePreviousGraph writes a minimal graph database (SQLite with a snapshots table) at path, as
// an earlier index would have left, and returns its SHA-256.
func writePreviousGraph(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE snapshots (id TEXT); INSERT INTO snapshots VALUES ('previous')"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fileSHA256(t, path)
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIndexNoPackages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		files    map[string]string
		patterns []string
	}{
		{"no go.mod and no Go files", map[string]string{"README": "hello\n"}, nil},
		{"go.mod but no Go files", map[string]string{"go.mod": "module example.com/empty\n\ngo 1.22\n"}, nil},
		{"Go file but no go.mod", map[string]string{"a.go": "package a\n"}, nil},
		{"pattern names a missing directory", map[string]string{"go.mod": "module example.com/m\n\ngo 1.22\n", "a/a.go": "package a\n"}, []string{"./missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			outDir := t.TempDir()
			dbPath := filepath.Join(outDir, "graph.db")
			previous := writePreviousGraph(t, dbPath)
			_, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, Patterns: tc.patterns, Tests: true, DBPath: dbPath})
			if !errors.Is(err, indexer.ErrNoPackages) {
				t.Fatalf("Index error = %v, want ErrNoPackages", err)
			}
			entries, err := os.ReadDir(outDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("output dir holds %d entries, want only the previous graph.db", len(entries))
			}
			if got := fileSHA256(t, dbPath); got != previous {
				t.Errorf("previous database changed: sha256 %s, was %s", got, previous)
			}
			// No database appears where none was.
			fresh := filepath.Join(t.TempDir(), "out", "graph.db")
			if _, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, Patterns: tc.patterns, DBPath: fresh}); !errors.Is(err, indexer.ErrNoPackages) {
				t.Fatalf("Index error = %v, want ErrNoPackages", err)
			}
			if _, err := os.Stat(filepath.Dir(fresh)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output directory created for a failed index: %v", err)
			}
		})
	}
}

func TestIndexInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts indexer.Options
	}{
		{"empty DBPath", indexer.Options{Dir: "testdata/fixture"}},
		{"missing Dir", indexer.Options{Dir: "testdata/does-not-exist", DBPath: filepath.Join(t.TempDir(), "g.db")}},
		{"Dir is a file", indexer.Options{Dir: "testdata/fixture/go.mod", DBPath: filepath.Join(t.TempDir(), "g.db")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := indexer.Index(context.Background(), tc.opts); !errors.Is(err, indexer.ErrInvalidOptions) {
				t.Errorf("Index error = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestIndexCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dbPath := filepath.Join(t.TempDir(), "out", "graph.db")
	_, err := indexer.Index(ctx, indexer.Options{Dir: "testdata/fixture", DBPath: dbPath})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Index error = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(dbPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("database written by a cancelled index: %v", err)
	}
}

// TestIndexLoadErrors: packages that fail to load are indexed as far as
// possible, their errors recorded, and coverage says so.
func TestIndexLoadErrors(t *testing.T) {
	t.Parallel()
	syntaxDir := t.TempDir()
	writeFiles(t, syntaxDir, map[string]string{
		"go.mod":         "module example.com/syntax\n\ngo 1.22\n",
		"ok/ok.go":       "package ok\n\nfunc OK() {}\n",
		"broken/good.go": "package broken\n\nfunc Good() int { return 1 }\n",
		"broken/bad.go":  "package broken\n\nfunc Bad( {\n",
	})
	for _, tc := range []struct {
		name       string
		dir        string
		patterns   []string
		coverage   float64
		withErrors int
		illTyped   int
		unmatched  int
		// errors are (package_id, kind, file base name) of load_errors rows,
		// one per failing package.
		errors [][]string
		// decls are node ids that must be indexed despite the errors.
		decls []string
	}{
		{
			name: "type error, and an importer of the broken package", dir: "testdata/broken",
			coverage: 1.0 / 3, withErrors: 1, illTyped: 2,
			errors: [][]string{{"pkg:example.com/broken/bad", "type", "bad.go"}},
			decls:  []string{"type:example.com/broken/bad.Holder", "method:example.com/broken/bad.Holder.Value", "func:example.com/broken/bad.Fine", "func:example.com/broken/user.UseFine"},
		},
		{
			name: "syntax error", dir: syntaxDir, coverage: 0.5, withErrors: 1, illTyped: 1,
			errors: [][]string{{"pkg:example.com/syntax/broken", "parse", "bad.go"}},
			decls:  []string{"func:example.com/syntax/broken.Good", "func:example.com/syntax/ok.OK"},
		},
		{
			name: "pattern without a package", dir: "testdata/broken", patterns: []string{"./good", "./missing"},
			coverage: 0.5, unmatched: 1,
			errors: [][]string{{"NULL", "list", "NULL"}},
			decls:  []string{"func:example.com/broken/good.Answer"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := indexer.Options{Dir: tc.dir, Patterns: tc.patterns, Tests: true}
			var snap indexer.Snapshot
			if tc.dir == "testdata/broken" && tc.patterns == nil {
				snap = sharedIndexOf(t, sharedBroken, nil, opts) // read only
			} else {
				snap = index(t, opts)
			}
			db := checkDatabaseFile(t, snap)
			if snap.Coverage != tc.coverage {
				t.Errorf("Coverage = %v, want %v", snap.Coverage, tc.coverage)
			}
			c := snap.Counts
			if c.PackagesWithErrors != tc.withErrors || c.PackagesIllTyped != tc.illTyped || c.UnmatchedPatterns != tc.unmatched {
				t.Errorf("PackagesWithErrors %d PackagesIllTyped %d UnmatchedPatterns %d, want %d, %d and %d",
					c.PackagesWithErrors, c.PackagesIllTyped, c.UnmatchedPatterns, tc.withErrors, tc.illTyped, tc.unmatched)
			}
			if snap.Counts.LoadErrors == 0 {
				t.Errorf("LoadErrors = 0, want > 0")
			}
			// The go command may report the same error again in its own
			// words (as a list error); the rows asked for must be present,
			// and errors must belong to the failing packages only.
			for _, want := range tc.errors {
				if n := queryInt(t, db, `SELECT count(*) FROM load_errors WHERE coalesce(package_id, 'NULL') = ? AND kind = ?
					AND coalesce(replace(file, rtrim(file, replace(file, '/', '')), ''), 'NULL') = ?`, want[0], want[1], want[2]); n == 0 {
					t.Errorf("no load_errors row (package_id, kind, file base name) = %q", want)
				}
			}
			var wantPkgs [][]string
			for _, e := range tc.errors {
				wantPkgs = append(wantPkgs, []string{e[0]})
			}
			gotPkgs := queryRows(t, db, "SELECT DISTINCT coalesce(package_id, 'NULL') FROM load_errors ORDER BY 1")
			if diff := cmp.Diff(wantPkgs, gotPkgs); diff != "" {
				t.Errorf("packages with load errors (-want +got):\n%s", diff)
			}
			if n := queryInt(t, db, "SELECT count(*) FROM load_errors WHERE message = ''"); n != 0 {
				t.Errorf("%d load errors without a message", n)
			}
			for _, id := range tc.decls {
				if n := queryInt(t, db, "SELECT count(*) FROM nodes WHERE id = ? AND start_line IS NOT NULL", id); n != 1 {
					t.Errorf("declaration %s not indexed", id)
				}
			}
		})
	}
}

// TestIndexVCS: the revision and dirty flag come from git; outside a
// checkout they are unknown (NULL), never a made-up value.
func TestIndexVCS(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/vcs\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() {}\n",
	})
	noVCS := index(t, indexer.Options{Dir: dir})
	db := openDB(t, noVCS.DBPath)
	if noVCS.VCSRevision != "" {
		t.Errorf("VCSRevision = %q outside a checkout", noVCS.VCSRevision)
	}
	if diff := cmp.Diff([][]string{{"NULL", "NULL"}}, queryRows(t, db, "SELECT vcs_revision, vcs_dirty FROM snapshots")); diff != "" {
		t.Errorf("VCS columns outside a checkout (-want +got):\n%s", diff)
	}

	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-C", dir, "-c", "user.name=assay", "-c", "user.email=assay@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	run("add", ".")
	run("commit", "-q", "-m", "fixture")
	head := run("rev-parse", "HEAD")

	clean := index(t, indexer.Options{Dir: filepath.Join(dir, "a"), Patterns: []string{"."}})
	if clean.VCSRevision != head || clean.VCSDirty {
		t.Errorf("clean checkout: revision %q dirty %v, want %q false", clean.VCSRevision, clean.VCSDirty, head)
	}
	if diff := cmp.Diff([][]string{{head, "0"}}, queryRows(t, openDB(t, clean.DBPath), "SELECT vcs_revision, vcs_dirty FROM snapshots")); diff != "" {
		t.Errorf("VCS columns in a clean checkout (-want +got):\n%s", diff)
	}

	// The database, its lock and its temporary file inside the checkout
	// are the index's own files, not changes: the first run creates the
	// directory and lock, the second finds the database there too.
	inRepo := filepath.Join(dir, "assay-out", "graph.db")
	for i := range 2 {
		s := index(t, indexer.Options{Dir: filepath.Join(dir, "a"), Patterns: []string{"."}, DBPath: inRepo})
		if s.VCSDirty || s.VCSRevision != head {
			t.Errorf("run %d with the database inside the checkout: revision %q dirty %v, want %q false", i+1, s.VCSRevision, s.VCSDirty, head)
		}
	}
	writeFiles(t, dir, map[string]string{"assay-out/graph.db-journal": "", "assay-out/.graph.db.tmp-123": ""})
	if s := index(t, indexer.Options{Dir: filepath.Join(dir, "a"), Patterns: []string{"."}, DBPath: inRepo}); s.VCSDirty {
		t.Errorf("the database's journal and temporary file count as changes")
	}
	writeFiles(t, dir, map[string]string{"assay-out/notes.txt": "untracked beside the database\n"})
	if s := index(t, indexer.Options{Dir: filepath.Join(dir, "a"), Patterns: []string{"."}, DBPath: inRepo}); !s.VCSDirty {
		t.Errorf("an untracked file beside the database does not count as a change")
	}
	if err := os.RemoveAll(filepath.Join(dir, "assay-out")); err != nil {
		t.Fatal(err)
	}

	writeFiles(t, dir, map[string]string{"notes.txt": "untracked\n"})
	dirty := index(t, indexer.Options{Dir: filepath.Join(dir, "a"), Patterns: []string{"."}})
	if dirty.VCSRevision != head || !dirty.VCSDirty {
		t.Errorf("dirty checkout: revision %q dirty %v, want %q true", dirty.VCSRevision, dirty.VCSDirty, head)
	}
	if dirty.ID == clean.ID {
		t.Errorf("snapshot ID unchanged when the work tree became dirty")
	}
}

// moduleDir returns the module cache directory of module@version, skipping
// the test only when the module proxy cannot be reached.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		t.Fatalf("go mod download -json %s: decode %q: %v", module, out, jerr)
	}
	if err != nil || info.Error != "" {
		reason := info.Error
		if reason == "" {
			reason = err.Error()
		}
		for _, s := range []string{"dial tcp", "no such host", "connection refused", "network is unreachable", "i/o timeout", "proxyconnect", "TLS handshake timeout"} {
			if strings.Contains(reason, s) {
				t.Skipf("module proxy unreachable: go mod download %s: %s", module, reason)
			}
		}
		t.Fatalf("go mod download -json %s: %v: %s", module, err, reason)
	}
	return info.Dir
}

// TestIndexRealModule indexes cobra from the module cache (read-only, so
// GOFLAGS=-mod=mod and the database in a temp dir).
func TestIndexRealModule(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, "github.com/spf13/cobra@v1.10.2")
	snap := index(t, indexer.Options{Dir: dir, Tests: true, Env: []string{"GOFLAGS=-mod=mod"}})
	db := checkDatabaseFile(t, snap)
	if snap.Counts.Packages == 0 || snap.Counts.Funcs <= 100 {
		t.Errorf("Counts = %+v, want packages > 0 and funcs > 100", snap.Counts)
	}
	if diff := cmp.Diff([]string{"github.com/spf13/cobra"}, snap.ModulePaths); diff != "" {
		t.Errorf("ModulePaths (-want +got):\n%s", diff)
	}
	if snap.Coverage <= 0 || snap.Coverage > 1 {
		t.Errorf("Coverage = %v, want in (0, 1]", snap.Coverage)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM funcs WHERE id = 'method:github.com/spf13/cobra.Command.Execute' AND resolved = 1"); n != 1 {
		t.Errorf("(*Command).Execute not indexed")
	}
	if n := queryInt(t, db, "SELECT count(*) FROM packages WHERE variant = 'test'"); n == 0 {
		t.Errorf("no test variants indexed")
	}
}

// TestIndexAssayRepository indexes this repository from its root.
func TestIndexAssayRepository(t *testing.T) {
	t.Parallel()
	snap := index(t, indexer.Options{Dir: "..", Tests: true, ToolVersion: "test"})
	db := checkDatabaseFile(t, snap)
	if diff := cmp.Diff([]string{"github.com/assay-audit/assay"}, snap.ModulePaths); diff != "" {
		t.Errorf("ModulePaths (-want +got):\n%s", diff)
	}
	const self = "github.com/assay-audit/assay/indexer"
	for _, id := range []string{
		"pkg:" + self,
		"pkg:" + self + " [" + self + ".test]",
		"pkg:" + self + "_test [" + self + ".test]",
		"func:" + self + ".Index",
		"type:" + self + ".Snapshot",
	} {
		if n := queryInt(t, db, "SELECT count(*) FROM nodes WHERE id = ?", id); n != 1 {
			t.Errorf("node %s not indexed", id)
		}
	}
	if n := queryInt(t, db, "SELECT count(*) FROM files WHERE path LIKE '%/testdata/%'"); n != 0 {
		t.Errorf("%d files under testdata indexed; the go command ignores testdata", n)
	}
}

// TestSnapshotIDCoversTheCToolchainGoModAndLoadOutcome: the snapshot id
// names what the graph was built from. A cgo package indexed without a C
// compiler fails to load and is another snapshot than the same files
// indexed with one; so is the same tree after its go.mod changed.
func TestSnapshotIDCoversTheCToolchainGoModAndLoadOutcome(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/cid\n\ngo 1.22\n",
		"c/c.go": "package c\n\n// int two(void) { return 2; }\nimport \"C\"\n\nfunc Two() int { return int(C.two()) }\n",
	})
	env := []string{"CGO_ENABLED=1", "GOPROXY=off"}
	withCC := index(t, indexer.Options{Dir: dir, Env: append(env, "CC=gcc")})
	without := index(t, indexer.Options{Dir: dir, Env: append(env, "CC="+filepath.Join(dir, "no-such-cc"))})
	if without.Counts.LoadErrors == 0 {
		t.Fatalf("indexing without a C compiler recorded no load error")
	}
	if withCC.ID == without.ID {
		t.Errorf("the same files indexed with and without a C compiler have one snapshot id %s (coverage %v and %v)", withCC.ID, withCC.Coverage, without.Coverage)
	}
	writeFiles(t, dir, map[string]string{"go.mod": "module example.com/cid\n\ngo 1.23\n"})
	if s := index(t, indexer.Options{Dir: dir, Env: append(env, "CC=gcc")}); s.ID == withCC.ID {
		t.Errorf("go.mod changed and the snapshot id did not")
	}
}

// TestOnlyTestFilesWithoutTestsIsRefused: packages that match but have
// nothing to index (only _test.go files, tests excluded) are refused like
// no package at all, rather than written as an empty graph of coverage 1.
func TestOnlyTestFilesWithoutTestsIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod":      "module example.com/onlytest\n\ngo 1.22\n",
		"p/p_test.go": "package p\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n",
	})
	db := filepath.Join(t.TempDir(), "out", "graph.db")
	_, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, DBPath: db, Tests: false})
	if !errors.Is(err, indexer.ErrNoPackages) || !strings.Contains(err.Error(), "--tests=false") {
		t.Fatalf("Index = %v, want ErrNoPackages naming --tests=false", err)
	}
	if _, err := os.Stat(filepath.Dir(db)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused index left %s: %v", filepath.Dir(db), err)
	}
	if s := index(t, indexer.Options{Dir: dir, Tests: true}); s.Counts.Files != 1 {
		t.Errorf("with tests: %d files, want 1", s.Counts.Files)
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

// TestIndexLeavesTheGarbageCollectorAlone: Index changes no setting of the
// process that calls it (a server indexing on request wants its own): the
// GC percent and memory limit the caller set hold at every stage and after.
func TestIndexLeavesTheGarbageCollectorAlone(t *testing.T) {
	// Not parallel: the settings are the process's.
	const percent, limit = 137, int64(3 << 30)
	oldPercent := debug.SetGCPercent(percent)
	oldLimit := debug.SetMemoryLimit(limit)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	check := func(when string) {
		p := debug.SetGCPercent(percent)
		l := debug.SetMemoryLimit(-1) // a negative limit only reads it
		if p != percent || l != limit {
			t.Errorf("%s: GC percent %d, memory limit %d; want %d and %d", when, p, l, percent, limit)
		}
	}
	opts := withMetricsEnrich(indexer.Options{Dir: "testdata/fixture", Tests: true, Progress: check})
	index(t, opts)
	check("after Index")
}
