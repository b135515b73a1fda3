package evidence

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// buildV3Store writes a store as schema v3 left it: a finalized run with a passed and a failed
// check, the checks table allowing only passed, failed and unknown, and schema_version 3.
func buildV3Store(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t, path, OpenOptions{})
	if err := s.OpenRun(ctx, "v3-a", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, "v3-a", Event{Type: "step", Payload: payload(`{"i":1}`)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Check{{Name: "files", Required: true, Status: CheckPassed, Detail: "2 files"},
		{Name: "effects", Required: true, Status: CheckFailed, Detail: "1 unknown"}} {
		if err := s.RecordCheck(ctx, "v3-a", c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finalize(ctx, "v3-a", Verdict{Verdict: VerdictRejected, Reasons: []string{"effects failed"}}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	rawExec(t, path,
		`CREATE TABLE checks_v3 (run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, required BOOLEAN NOT NULL,
			status VARCHAR NOT NULL CHECK (status IN ('passed', 'failed', 'unknown')), detail VARCHAR NOT NULL, evidence JSON,
			recorded_at TIMESTAMP NOT NULL, PRIMARY KEY (run_id, name))`,
		`INSERT INTO checks_v3 SELECT * FROM checks`,
		`DROP TABLE checks`,
		`ALTER TABLE checks_v3 RENAME TO checks`,
		`UPDATE meta SET value = '3' WHERE key = 'schema_version'`)
}

func TestMigrateV3AllowsSimulatedAndNotEnforced(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV3Store(t, path)
	// A v3 file cannot hold the new statuses: the constraint is what the migration changes.
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open of a v3 store: %v, want *SchemaVersionError", err)
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 3 || res.To != SchemaVersion || len(res.Steps) != 1 || !strings.Contains(res.Steps[0], "not_enforced") {
		t.Fatalf("Migrate result %+v", res)
	}
	for _, v := range res.Verification {
		if v.RunID == "v3-a" && v.Status != VerifyOK {
			t.Fatalf("the v3 run does not verify after the migration: %+v", v)
		}
	}
	s := mustOpen(t, path, OpenOptions{})
	defer mustClose(t, s)
	sum, err := s.Run(ctx, "v3-a")
	if err != nil || len(sum.Checks) != 2 {
		t.Fatalf("checks carried over: %+v %v", sum.Checks, err)
	}
	if err := s.OpenRun(ctx, "v4-dry", testEnvelope(ModeDryRun), ""); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{CheckSimulated, CheckNotEnforced} {
		if err := s.RecordCheck(ctx, "v4-dry", Check{Name: "effects-" + st, Required: true, Status: st, Detail: st}); err != nil {
			t.Fatalf("RecordCheck(%s) after the migration: %v", st, err)
		}
	}
	fin, err := s.Finalize(ctx, "v4-dry", Verdict{Verdict: VerdictAccepted})
	if err != nil {
		t.Fatal(err)
	}
	if fin.Verdict.Verdict == VerdictAccepted {
		t.Fatalf("a run whose required checks are simulated and not_enforced was accepted: %+v", fin.Verdict)
	}
	if err := s.RecordCheck(ctx, "v4-dry", Check{Name: "bogus", Status: "skipped", Detail: "x"}); err == nil {
		t.Fatal("an unknown status was recorded")
	}
}
