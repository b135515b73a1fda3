package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/storetest"
)

// storeWithRuns writes a store with finalized runs through the API; one has
// a large (file-backed) artifact. It returns the store path.
func storeWithRuns(t *testing.T, dir string, runs ...string) string {
	t.Helper()
	return storeWithEvents(t, dir, 5, runs...)
}

// storeWithEvents is storeWithRuns with events events per run.
func storeWithEvents(t *testing.T, dir string, events int, runs ...string) string {
	t.Helper()
	return copyOfTemplateStore(t, dir, fmt.Sprint("events", events, runs), func(t *testing.T, dir string) string {
		return writeStoreWithEvents(t, dir, events, runs...)
	})
}

// storeTemplate is a store written once per test binary (storeTemplates), copied for each caller.
type storeTemplate struct {
	once sync.Once
	dir  string
	err  string
}

// storeTemplates maps a template's key to its *storeTemplate. Writing a store through the API costs
// about half a CPU-second (DuckDB creates its schema and checkpoints), a copy of its files a few
// milliseconds; the stores these helpers write hold nothing that names their directory.
var storeTemplates sync.Map

// copyOfTemplateStore copies into dir every file of the store write(t, templateDir) wrote, the
// first time key was asked for, and returns the path of the copy's evidence.duckdb. Each caller
// gets its own copy, file modes kept, so a test may tamper with it.
func copyOfTemplateStore(t *testing.T, dir, key string, write func(t *testing.T, dir string) string) string {
	t.Helper()
	v, _ := storeTemplates.LoadOrStore(key, &storeTemplate{})
	tmpl := v.(*storeTemplate)
	tmpl.once.Do(func() {
		// t.Fatal in write ends the goroutine before the assignment below: err stays.
		tmpl.err = "the store template " + key + " failed in the test that wrote it: " + t.Name()
		tmpl.dir = fixtureDir("store")
		if path := write(t, tmpl.dir); path != filepath.Join(tmpl.dir, "evidence.duckdb") {
			t.Fatalf("the template store is at %s, want evidence.duckdb in %s", path, tmpl.dir)
		}
		tmpl.err = ""
	})
	if tmpl.err != "" {
		t.Fatal(tmpl.err)
	}
	dirModes := map[string]os.FileMode{} // set once the files are in
	err := filepath.WalkDir(tmpl.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tmpl.dir, p)
		target := filepath.Join(dir, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." {
				dirModes[target] = info.Mode().Perm()
			}
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o600); err != nil {
			return err
		}
		return os.Chmod(target, info.Mode().Perm())
	})
	for d, mode := range dirModes {
		if err == nil {
			err = os.Chmod(d, mode)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "evidence.duckdb")
}

// writeStoreWithEvents writes storeWithEvents' store through the API.
func writeStoreWithEvents(t *testing.T, dir string, events int, runs ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64)}
	for _, run := range runs {
		if err := s.OpenRun(ctx, run, env, ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= events; i++ {
			if _, err := s.AppendEvent(ctx, run, evidence.Event{Type: "step", Time: time.Unix(int64(i), 0).UTC(),
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		big := make([]byte, evidence.InlineLimit+1)
		for i := range big {
			big[i] = byte(i % 251)
		}
		big[0] = byte(len(run))
		if _, err := s.PutArtifact(ctx, run, "big.bin", "", append(big, run...)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCheck(ctx, run, evidence.Check{Name: "c", Required: true, Status: "passed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finalize(ctx, run, evidence.Verdict{Verdict: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// rawSQL edits the closed store at path directly (storetest.Exec).
func rawSQL(t *testing.T, path string, stmts ...string) { storetest.Exec(t, path, stmts...) }

func TestStoreMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.duckdb")
	ddl, err := os.ReadFile("../../evidence/testdata/schema-v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	rawSQL(t, path, string(ddl), `INSERT INTO meta VALUES ('app', 'assay-evidence'), ('schema_version', '1')`)
	for name, r := range map[string]result{"verify": verify(t, path, VerifyOptions{}), "sql": sqlQuery(t, path, SQLOptions{Query: "SELECT 1"})} {
		if r.code != 2 {
			t.Fatalf("%s on a v1 store: exit %d", name, r.code)
		}
		oneLine(t, r, "upgrade it with: assay store migrate --store "+path)
	}
	migrate := func(opts StoreMigrateOptions) result {
		return call(t, "", func(ctx context.Context, io IOStreams) error {
			opts.IO = io
			return runStoreMigrate(ctx, &opts)
		})
	}
	r := migrate(StoreMigrateOptions{Store: storeFlags{store: path}})
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("from schema version 1 to %d", evidence.SchemaVersion)) {
		t.Fatalf("migrate: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = migrate(StoreMigrateOptions{Store: storeFlags{store: path}, Format: "json"})
	var res evidence.MigrateResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.From != evidence.SchemaVersion {
		t.Fatalf("second migrate: exit %d %q", r.code, r.stdout)
	}
	if r := sqlQuery(t, path, SQLOptions{Format: "csv", Query: "SELECT value FROM meta WHERE key = 'schema_version'"}); r.code != 0 ||
		!strings.Contains(r.stdout, fmt.Sprint(evidence.SchemaVersion)) {
		t.Fatalf("schema version after migrate: %q %q", r.stdout, r.stderr)
	}
	// A run that does not verify once migrated (a current store with a tampered run): exit 1 naming it.
	current := storeWithRuns(t, t.TempDir(), "run-x")
	rawSQL(t, current, `UPDATE events SET payload = '{"n":99}' WHERE run_id = 'run-x' AND seq = 3`)
	if r := migrate(StoreMigrateOptions{Store: storeFlags{store: current}}); r.code != 1 || !strings.Contains(r.stdout, "is already at schema version") {
		t.Fatalf("a run that does not verify: exit %d %s %s", r.code, r.stdout, r.stderr)
	} else {
		oneLine(t, r, "migrated, but run run-x does not verify: tampered")
	}
	if r := migrate(StoreMigrateOptions{Store: storeFlags{store: filepath.Join(dir, "none.duckdb")}}); r.code != 2 {
		t.Errorf("no store: exit %d, want 2", r.code)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.duckdb")); err == nil {
		t.Error("migrate created a store")
	}
}

// export prints what evidence.ExportParquet wrote (which evidence's tests check table by table), and
// its refusals are bad input.
func TestExportParquet(t *testing.T) {
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b")
	export := func(opts ExportOptions) result {
		return call(t, "", func(ctx context.Context, io IOStreams) error {
			opts.IO, opts.Store = io, storeFlags{store: path}
			return runExport(ctx, &opts)
		})
	}
	out := filepath.Join(dir, "parquet")
	r := export(ExportOptions{Parquet: out, Format: "json"})
	if r.code != 0 {
		t.Fatalf("export: exit %d %s", r.code, r.stderr)
	}
	var res evidence.ExportResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Dir != out || len(res.Tables) == 0 {
		t.Fatalf("export json: %+v %v", res, err)
	}
	for _, tb := range res.Tables {
		if got := fileDigest(t, filepath.Join(out, tb.File)); got != tb.SHA256 {
			t.Errorf("%s: sha256 %s, export.json says %s", tb.File, got, tb.SHA256)
		}
	}
	one := filepath.Join(dir, "one")
	r = export(ExportOptions{Parquet: one, Runs: []string{"run-a"}})
	if r.code != 0 || !strings.Contains(r.stdout, "events.parquet") || r.stderr != fmt.Sprintf("wrote %d Parquet files and export.json to %s\n", len(res.Tables), one) {
		t.Fatalf("export run-a: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// Refusals: a non-empty DIR, a missing run, no --parquet.
	for _, c := range []struct {
		opts ExportOptions
		want string
	}{
		{ExportOptions{Parquet: out}, "--parquet " + out + " exists and is not empty"},
		{ExportOptions{Parquet: filepath.Join(dir, "x"), Runs: []string{"run-none"}}, "run-none"},
		{ExportOptions{}, "--parquet is required"},
	} {
		r := export(c.opts)
		if r.code != 2 {
			t.Errorf("%+v: exit %d, want 2", c.opts, r.code)
		}
		oneLine(t, r, c.want)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused export left its directory")
	}
}
