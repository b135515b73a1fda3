package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
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

func rawSQL(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

func TestStoreMigrate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.duckdb")
	ddl, err := os.ReadFile("../../evidence/testdata/schema-v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	rawSQL(t, path, string(ddl), `INSERT INTO meta VALUES ('app', 'assay-evidence'), ('schema_version', '1')`)
	for _, args := range [][]string{{"verify", "--store", path}, {"sql", "--store", path, "SELECT 1"}} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Fatalf("%v on a v1 store: exit %d", args, r.code)
		}
		oneLine(t, r, "assay store migrate")
	}
	r := runCLI(t, "store", "migrate", "--store", path)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("from schema version 1 to %d", evidence.SchemaVersion)) {
		t.Fatalf("migrate: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "store", "migrate", "--store", path, "--format", "json")
	var res evidence.MigrateResult
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.From != evidence.SchemaVersion {
		t.Fatalf("second migrate: exit %d %q", r.code, r.stdout)
	}
	if r := runCLI(t, "sql", "--store", path, "--format", "csv", "SELECT value FROM meta WHERE key = 'schema_version'"); r.code != 0 ||
		!strings.Contains(r.stdout, fmt.Sprint(evidence.SchemaVersion)) {
		t.Fatalf("schema version after migrate: %q %q", r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"store", "migrate", "--store", filepath.Join(dir, "none.duckdb")},
		{"store", "migrate", "--store", path, "extra"},
		{"store", "nosuch"},
	} {
		if r := runCLI(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none.duckdb")); err == nil {
		t.Error("migrate created a store")
	}
}

func TestExportParquet(t *testing.T) {
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b")
	out := filepath.Join(dir, "parquet")
	r := runCLI(t, "export", "--store", path, "--parquet", out, "--format", "json")
	if r.code != 0 {
		t.Fatalf("export: exit %d %s", r.code, r.stderr)
	}
	var res evidence.ExportResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, tb := range res.Tables {
		rows[tb.Table] = tb.Rows
		if got := fileDigest(t, filepath.Join(out, tb.File)); got != tb.SHA256 {
			t.Errorf("%s: sha256 %s, export.json says %s", tb.File, got, tb.SHA256)
		}
	}
	// Per run: 5 events, then the store's check_recorded and run_finalized.
	for table, want := range map[string]int64{"runs": 2, "admissions": 2, "events": 14, "checks": 2, "verdicts": 2, "artifacts": 2, "envelopes": 2} {
		if rows[table] != want {
			t.Errorf("%s: %d rows exported, want %d", table, rows[table], want)
		}
	}
	// Another engine reads the files: a fresh DuckDB with no store attached.
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	var last string
	if err := db.QueryRow(`SELECT count(*), max(hash) FILTER (WHERE seq = 5 AND run_id = 'run-b') FROM read_parquet('`+filepath.Join(out, "events.parquet")+`')`).Scan(&n, &last); err != nil || n != 14 || len(last) != 64 {
		t.Fatalf("reading events.parquet: %d %q %v", n, last, err)
	}
	// One run only.
	one := filepath.Join(dir, "one")
	if r := runCLI(t, "export", "--store", path, "--parquet", one, "run-a"); r.code != 0 {
		t.Fatalf("export run-a: %s", r.stderr)
	}
	if err := db.QueryRow(`SELECT count(*) FROM read_parquet('` + filepath.Join(one, "events.parquet") + `') WHERE run_id <> 'run-a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("run filter leaked %d events (%v)", n, err)
	}
	// Refusals: a non-empty DIR, a missing run, no --parquet.
	for _, args := range [][]string{
		{"export", "--store", path, "--parquet", out},
		{"export", "--store", path, "--parquet", filepath.Join(dir, "x"), "run-none"},
		{"export", "--store", path},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
		oneLine(t, r, "")
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused export left its directory")
	}
}
