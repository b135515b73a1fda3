package evidence

import (
	"context"
	"encoding/json"
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
	downgradeToV4(t, path)
	rawExec(t, path,
		`CREATE TABLE checks_v3 (run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, required BOOLEAN NOT NULL,
			status VARCHAR NOT NULL CHECK (status IN ('passed', 'failed', 'unknown')), detail VARCHAR NOT NULL, evidence JSON,
			recorded_at TIMESTAMP NOT NULL, PRIMARY KEY (run_id, name))`,
		`INSERT INTO checks_v3 SELECT * FROM checks`,
		`DROP TABLE checks`,
		`ALTER TABLE checks_v3 RENAME TO checks`,
		`UPDATE meta SET value = '3' WHERE key = 'schema_version'`)
}

// downgradeToV4 turns a store written through today's API into one as schema
// v4 wrote it: each finalized run's run_finalized event without the status
// key, the chain rehashed and the terminal hash recomputed under version 3;
// no finalizations or run_bindings table; writers without the chain columns.
func downgradeToV4(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	runs, err := ro.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var finalized []string
	payloads := map[string]string{}
	for _, r := range runs {
		if r.Status != StatusFinalized {
			continue
		}
		evs, err := ro.Events(ctx, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		var p runFinalizedPayload
		if err := json.Unmarshal(last.Payload, &p); err != nil || last.Type != EventRunFinalized {
			t.Fatalf("run %s: last event %s %s", r.RunID, last.Type, last.Payload)
		}
		p.Status = ""
		b, err := canonical(p)
		if err != nil {
			t.Fatal(err)
		}
		finalized = append(finalized, r.RunID)
		payloads[r.RunID] = string(b)
	}
	mustClose(t, ro)
	for _, id := range finalized {
		rawExec(t, path, `UPDATE events SET payload = '`+payloads[id]+`' WHERE run_id = '`+id+`' AND type = 'run_finalized'`)
		rechain(t, path, id)
		forgeTerminal(t, path, id, TerminalV3)
	}
	rawExec(t, path, `DROP TABLE finalizations`, `DROP TABLE run_bindings`, writersDDLv2[:len("CREATE TABLE ")]+"writers_v4"+writersDDLv2[len("CREATE TABLE writers"):],
		`INSERT INTO writers_v4 SELECT writer_id, pid, command, host, opened_at, closed_at FROM writers`,
		`DROP TABLE writers`, `ALTER TABLE writers_v4 RENAME TO writers`,
		`UPDATE meta SET value = '4' WHERE key = 'schema_version'`)
	downgradeToV5Columns(t, path)
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
	if res.From != 3 || res.To != SchemaVersion || len(res.Steps) != SchemaVersion-3 || !strings.Contains(res.Steps[0], "not_enforced") {
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
