package evidence

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// buildV4Store writes a store as schema v4 left it: run "a" finalized under terminal version 3, run
// "b" left open by a writer that crashed, run "c" recorded interrupted by a v4 writer (a status
// change, no seal).
func buildV4Store(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t, path, OpenOptions{Command: "v4 writer"})
	for _, id := range []string{"a", "b", "c"} {
		if err := s.OpenRun(ctx, id, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendEvent(ctx, id, Event{Type: "step", Payload: payload(`{"run":%q}`, id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordCheck(ctx, "a", Check{Name: "tests", Required: true, Status: CheckPassed, Detail: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, "a", Verdict{Verdict: VerdictAccepted}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	downgradeToV4(t, path)
	rawExec(t, path, `UPDATE writers SET closed_at = NULL`, // the writer crashed
		`UPDATE runs SET status = 'interrupted' WHERE run_id = 'c'`,
		`INSERT INTO run_status_changes VALUES ('c', 1, 'open', 'interrupted', 'interrupted: writer 1 (pid 1, v4 writer) ended without closing the store (crashed or killed)', 1, now())`)
}

func TestMigrateV4ChainsWritersAndFinalizationsAndSealsInterruptedRuns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV4Store(t, path)
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open of a v4 store: %v, want *SchemaVersionError", err)
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 4 || res.To != SchemaVersion || len(res.Steps) != SchemaVersion-4 || !strings.Contains(res.Steps[0], "writer sessions form a hash chain") {
		t.Fatalf("Migrate result %+v", res)
	}
	if strings.Join(res.Interrupted, ",") != "b,c" {
		t.Fatalf("sealed %v, want b and c", res.Interrupted)
	}
	got := map[string]RunVerification{}
	for _, v := range res.Verification {
		got[v.RunID] = v
	}
	checkVerify(t, got, map[string]wantVerify{"a": {status: VerifyOK},
		"b": {VerifyInterrupted, []string{"writer 1 (pid", "v4 writer) ended without closing the store", "sealed by writer 2"}},
		"c": {VerifyInterrupted, []string{"sealed by writer 2"}}})

	s := mustOpen(t, path, OpenOptions{})
	ws, err := loadWriters(ctx, s.conn)
	if err != nil || len(ws) != 2 || !ws[0].Backfilled || ws[0].AdmissionsAtOpen != nil || ws[1].Backfilled || ws[1].AdmissionsAtOpen == nil ||
		ws[1].AdmissionsAtOpen.Size != 3 || ws[1].PrevHash != ws[0].Hash {
		t.Fatalf("writers after migration: %+v %v", ws, err)
	}
	fins, err := loadFinalizations(ctx, s.conn)
	if err != nil || len(fins) != 3 || fins[0].RunID != "a" || !fins[0].Backfilled || fins[1].Backfilled || fins[1].Status != StatusInterrupted {
		t.Fatalf("finalizations after migration: %+v %v", fins, err)
	}
	a, err := s.Run(ctx, "a")
	if err != nil || a.TerminalVersion != TerminalV3 {
		t.Fatalf("the v4 run changed terminal version: %+v %v", a.TerminalVersion, err)
	}
	b, err := s.Run(ctx, "b")
	if err != nil || !b.Sealed || b.TerminalVersion != TerminalV5 || b.Verdict.Reasons[0] != ReasonInterrupted {
		t.Fatalf("the sealed run: %+v %v", b, err)
	}
	// A run admitted after the migration finalizes under version 5.
	if err := s.OpenRun(ctx, "d", testEnvelope(ModeLive), "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "d", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	if fin, err := s.Finalize(ctx, "d", Verdict{Verdict: VerdictAccepted}); err != nil || fin.Verdict.Verdict != VerdictAccepted {
		t.Fatalf("Finalize after migration: %+v %v", fin, err)
	}
	mustClose(t, s)
	checkVerify(t, verifyAll(t, path), map[string]wantVerify{"a": {status: VerifyOK}, "b": {status: VerifyInterrupted},
		"c": {status: VerifyInterrupted}, "d": {status: VerifyOK}})

	// The backfilled records are chained too.
	for _, tc := range []struct {
		name, stmt string
		want       wantVerify
		key        string
	}{
		{"backfilled writer's command edited", `UPDATE writers SET command = 'other' WHERE writer_id = 1`,
			wantVerify{VerifyTampered, []string{"writer 1: hash mismatch"}}, ""},
		{"backfilled finalization re-marked live", `UPDATE finalizations SET backfilled = false WHERE run_id = 'a'`,
			wantVerify{VerifyTampered, []string{"finalization 1: hash mismatch"}}, "a"},
		{"v3 run's check edited", `UPDATE checks SET detail = 'edited' WHERE run_id = 'a'`,
			wantVerify{VerifyTampered, []string{"terminal hash mismatch"}}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "evidence.duckdb")
			copyFile(t, path, p)
			rawExec(t, p, tc.stmt)
			got := verifyAll(t, p)
			v := got[tc.key]
			if v.Status != tc.want.status {
				t.Fatalf("%q: %+v", tc.key, v)
			}
			for _, d := range tc.want.detail {
				if !strings.Contains(v.Detail, d) {
					t.Errorf("detail %q lacks %q", v.Detail, d)
				}
			}
		})
	}
}

// Opening to write and writing nothing leaves the store byte-identical: no writer session, no seal,
// and a reader creates no lock file; a file refused as no store of this version gets none either.
func TestOpeningWritesNothingUntilTheFirstWrite(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "first"})
	if err := s.OpenRun(ctx, "left", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	before := fileDigest(t, path)
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	if _, err := ro.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	mustClose(t, ro)
	if _, err := os.Lstat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a reader created the lock file: %v", err)
	}
	w := mustOpen(t, path, OpenOptions{Command: "refusing"})
	if _, err := w.Runs(ctx); err != nil {
		t.Fatal(err)
	}
	mustClose(t, w)
	if fileDigest(t, path) != before {
		t.Fatal("a writer that wrote nothing changed the store")
	}
	w = mustOpen(t, path, OpenOptions{Command: "sealing"})
	if err := w.StartSession(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Recovered(); len(got) != 1 || got[0] != "left" {
		t.Fatalf("Recovered() = %v", got)
	}
	mustClose(t, w)

	other := filepath.Join(t.TempDir(), "notes.duckdb")
	if err := os.WriteFile(other, []byte("not a database at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, other, OpenOptions{}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("Open(not a store): %v", err)
	}
	if _, err := os.Lstat(other + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refusing a file left a lock file beside it: %v", err)
	}
	buildV4Store(t, filepath.Join(filepath.Dir(other), "old.duckdb"))
	old := filepath.Join(filepath.Dir(other), "old.duckdb")
	_ = os.Remove(old + ".lock")
	if _, err := Open(ctx, old, OpenOptions{}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open(v4): %v", err)
	}
	if _, err := os.Lstat(old + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refusing an older store left a lock file: %v", err)
	}
}

// What is outside every run's rows is covered too: the store's creation time, an artifacts row no
// run links, a status change on a run that is open.
func TestStoreIdentityAndStrayRowsAreCaught(t *testing.T) {
	src := buildRuns(t, runSpec{"run-a", "", CheckPassed})
	for _, tc := range []struct {
		name, stmt, key, want string
	}{
		{"meta.created_at edited", `UPDATE meta SET value = '2020-01-01T00:00:00Z' WHERE key = 'created_at'`, "", "writer 1: hash mismatch"},
		{"an artifacts row no run links", `INSERT INTO artifacts VALUES ('` + digestOf("x") + `', 1, 'inline', 'x'::BLOB, now())`, "", "linked by no run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "evidence.duckdb")
			copyFile(t, src, p)
			rawExec(t, p, tc.stmt)
			if v := verifyAll(t, p)[tc.key]; v.Status != VerifyTampered || !strings.Contains(v.Detail, tc.want) {
				t.Fatalf("%+v, want tampered with %q", v, tc.want)
			}
		})
	}
	t.Run("a status change added to an open run", func(t *testing.T) {
		ctx := context.Background()
		p := storePath(t)
		s := mustOpen(t, p, OpenOptions{})
		if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		mustClose(t, s)
		rawExec(t, p, `INSERT INTO run_status_changes VALUES ('r', 1, 'open', 'interrupted', 'made up', 1, now())`)
		if v := verifyAll(t, p)["r"]; v.Status != VerifyTampered || !strings.Contains(v.Detail, "made up") {
			t.Fatalf("%+v", v)
		}
	})
}
