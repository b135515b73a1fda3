package evidence

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestExportParquetWritesEveryTableReadableElsewhere(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := storeWithRunsFile(t, dir, 5, "run-a", "run-b")
	out := filepath.Join(dir, "parquet")
	res, err := ExportParquet(ctx, path, out, ExportOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{}
	for _, tb := range res.Tables {
		rows[tb.Table] = tb.Rows
		data, err := os.ReadFile(filepath.Join(out, tb.File))
		if err != nil {
			t.Fatal(err)
		}
		if got := digestOfBytes(data); got != tb.SHA256 {
			t.Errorf("%s: sha256 %s, the result says %s", tb.File, got, tb.SHA256)
		}
	}
	// Per run: 5 events, then the store's check_recorded and run_finalized.
	for table, want := range map[string]int64{"runs": 2, "admissions": 2, "events": 14, "checks": 2, "verdicts": 2, "artifacts": 2, "envelopes": 2} {
		if rows[table] != want {
			t.Errorf("%s: %d rows exported, want %d", table, rows[table], want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "export.json")); err != nil {
		t.Fatalf("export.json: %v", err)
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
	if _, err := ExportParquet(ctx, path, one, ExportOptions{Runs: []string{"run-a"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM read_parquet('` + filepath.Join(one, "events.parquet") + `') WHERE run_id <> 'run-a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("run filter leaked %d events (%v)", n, err)
	}
}

func TestExportParquetRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := storeWithRunsFile(t, dir, 1, "run-a")
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, dir string
		runs            []string
		want            error
		field           string
	}{
		{"a non-empty directory", path, full, nil, ErrInvalidArgument, "dir"},
		{"no directory", path, "", nil, ErrInvalidArgument, "dir"},
		{"a run that does not exist", path, filepath.Join(dir, "x"), []string{"run-none"}, ErrNoRun, ""},
		{"no store", filepath.Join(dir, "none.duckdb"), filepath.Join(dir, "y"), nil, ErrNoStore, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ExportParquet(ctx, c.path, c.dir, ExportOptions{Runs: c.runs})
			if c.field != "" {
				wantFieldError(t, err, c.want, c.field)
			} else if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if c.dir != "" && c.dir != full {
				if _, err := os.Stat(c.dir); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("a refused export left %s (%v)", c.dir, err)
				}
			}
		})
	}
}

// storeWithRunsFile writes a store at dir/evidence.duckdb holding the named runs, each finalized
// accepted with events step events and one file-backed artifact, and returns its path.
func storeWithRunsFile(t *testing.T, dir string, events int, runs ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "evidence.duckdb")
	s := mustOpen(t, path, OpenOptions{Command: "test"})
	for _, run := range runs {
		if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= events; i++ {
			if _, err := s.AppendEvent(ctx, run, Event{Type: "step", Time: time.Unix(int64(i), 0).UTC(), Payload: payload(`{"n":%d}`, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutArtifact(ctx, run, "big.bin", "", append(largeData(InlineLimit+1, byte(len(run))), run...)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCheck(ctx, run, Check{Name: "c", Required: true, Status: "passed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finalize(ctx, run, Verdict{Verdict: VerdictAccepted}); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, s)
	return path
}
