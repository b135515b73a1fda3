package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// runSpec is one run buildRuns writes through the API.
type runSpec struct {
	id       string
	corrects string // run this one corrects; "" for none
	usage    string // status of its required "usage" check
}

// buildRuns writes finalized runs through the API, in order: each has four
// events, an artifact, a passed required "tests" check and a required
// "usage" check of status spec.usage, and is finalized with "accepted"
// requested, which the store turns into "rejected" unless usage passed.
func buildRuns(t *testing.T, specs ...runSpec) string {
	t.Helper()
	return buildRunsAt(t, storePath(t), specs...)
}

// buildRunsCopy is buildRuns's store for specs, written once per test binary and copied into a
// directory of t's own: for a test that changes the store and needs nothing else of buildRuns.
func buildRunsCopy(t *testing.T, specs ...runSpec) string {
	t.Helper()
	return storeCopy(t, fmt.Sprintf("buildRuns %v", specs), func(t *testing.T, path string) { buildRunsAt(t, path, specs...) })
}

func buildRunsAt(t *testing.T, path string, specs ...runSpec) string {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t, path, OpenOptions{Command: "assay matrix run"})
	for _, r := range specs {
		if err := s.OpenRun(ctx, r.id, testEnvelope(ModeLive), r.corrects); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 4; i++ {
			if _, err := s.AppendEvent(ctx, r.id, Event{Type: "step", MemberID: "m1", Parent: int64(i - 1), Payload: payload(`{"step":%d}`, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutArtifact(ctx, r.id, "cases/double.go", "text/x-go", []byte("package cases // "+r.id+"\n")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []Check{
			{Name: "tests", Required: true, Status: CheckPassed, Detail: "ok", Evidence: json.RawMessage(`{"exit":0}`)},
			{Name: "usage", Required: true, Status: r.usage, Detail: "gateway usage " + r.usage},
		} {
			if err := s.RecordCheck(ctx, r.id, c); err != nil {
				t.Fatal(err)
			}
		}
		fin, err := s.Finalize(ctx, r.id, Verdict{Verdict: VerdictAccepted})
		if err != nil {
			t.Fatal(err)
		}
		if want := VerdictRejected; r.usage != CheckPassed && fin.Verdict.Verdict != want {
			t.Fatalf("run %s finalized %s, want %s", r.id, fin.Verdict.Verdict, want)
		}
	}
	mustClose(t, s)
	return path
}

// tablesWithRunID lists the store's tables (other than runs) with a run_id
// column, as an attacker erasing a run would find them.
func tablesWithRunID(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM duckdb_columns() WHERE schema_name = 'main' AND column_name = 'run_id'
		AND table_name <> 'runs' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// eraseRun deletes every row of runID from every table, as the adversarial
// tester did.
func eraseRun(t *testing.T, path, runID string) {
	t.Helper()
	// A thorough eraser also removes the artifacts only this run linked (left, they are found
	// linked by no run).
	stmts := []string{`DELETE FROM runs WHERE run_id = '` + runID + `'`,
		`DELETE FROM artifacts WHERE digest IN (SELECT digest FROM run_artifacts WHERE run_id = '` + runID + `')
			AND digest NOT IN (SELECT digest FROM run_artifacts WHERE run_id <> '` + runID + `')`}
	for _, tb := range tablesWithRunID(t, path) {
		stmts = append(stmts, `DELETE FROM `+tb+` WHERE run_id = '`+runID+`'`)
	}
	rawExec(t, path, stmts...)
}

// rechain renumbers runID's stored events 1..n in seq order and recomputes
// every prev_hash and hash, as a forger who edited or removed events would.
func rechain(t *testing.T, path, runID string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT parent, type, member_id, session_id, time, CAST(payload AS VARCHAR) FROM events
		WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		t.Fatal(err)
	}
	var evs []StoredEvent
	for rows.Next() {
		e := StoredEvent{RunID: runID, Seq: int64(len(evs) + 1)}
		var p string
		if err := rows.Scan(&e.Parent, &e.Type, &e.MemberID, &e.SessionID, &e.Time, &p); err != nil {
			t.Fatal(err)
		}
		if e.Parent >= e.Seq {
			e.Parent = e.Seq - 1
		}
		e.Payload = json.RawMessage(p)
		evs = append(evs, e)
	}
	rows.Close()
	if _, err := db.Exec(`DELETE FROM events WHERE run_id = ?`, runID); err != nil {
		t.Fatal(err)
	}
	prev := ZeroHash
	for _, e := range evs {
		h, err := EventHash(prev, e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			runID, e.Seq, e.Parent, e.Type, e.MemberID, e.SessionID, e.Time, string(e.Payload), prev, h); err != nil {
			t.Fatal(err)
		}
		prev = h
	}
}

// forgeTerminal recomputes runID's event count and terminal hash (under
// terminal definition version) from what is stored now, as a forger who
// edited the run would, and writes them.
func forgeTerminal(t *testing.T, path, runID string, version int) {
	t.Helper()
	ctx := context.Background()
	s := mustOpen(t, path, OpenOptions{ReadOnly: true})
	s.mu.Lock()
	re, err := s.loadRunEvidence(ctx, s.conn, runID)
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	th, err := TerminalHash(re.terminalRecord(*re.summary.Verdict, version))
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	rawExec(t, path, fmt.Sprintf(`UPDATE runs SET terminal_hash = '%s', terminal_version = %d, event_count = %d WHERE run_id = '%s'`,
		th, version, re.chain.count, runID))
}

func verifyAll(t *testing.T, path string, runIDs ...string) map[string]RunVerification {
	t.Helper()
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	vs, err := ro.Verify(context.Background(), runIDs...)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	mustClose(t, ro)
	out := map[string]RunVerification{}
	for _, v := range vs {
		t.Logf("%s %s seq %d: %s", v.RunID, v.Status, v.FirstBadSeq, v.Detail)
		out[v.RunID] = v
	}
	return out
}

type wantVerify struct {
	status string
	detail []string // substrings of Detail
}

func checkVerify(t *testing.T, got map[string]RunVerification, want map[string]wantVerify) {
	t.Helper()
	for id, w := range want {
		v, ok := got[id]
		if !ok {
			t.Errorf("run %s not reported; want %s", id, w.status)
			continue
		}
		if v.Status != w.status {
			t.Errorf("run %s: status %s, want %s (%s)", id, v.Status, w.status, v.Detail)
		}
		for _, d := range w.detail {
			if !strings.Contains(v.Detail, d) {
				t.Errorf("run %s: detail %q lacks %q", id, v.Detail, d)
			}
		}
	}
	for id, v := range got {
		if _, ok := want[id]; !ok && v.Status != VerifyOK {
			t.Errorf("run %s: unexpected %s (%s)", id, v.Status, v.Detail)
		}
	}
}

// Erasing a rejected run must not leave a store that verifies ok.
func TestVerifyFindsErasedRuns(t *testing.T) {
	ok := wantVerify{status: VerifyOK}
	// The writer session's closing record pins the logs as it left them.
	writerSaw := wantVerify{VerifyTampered, []string{"writer 1:", "the session saw 3 entries"}}
	cases := []struct {
		name  string
		specs []runSpec
		erase func(t *testing.T, path string)
		want  map[string]wantVerify
	}{
		{"untouched", []runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}, {"run-c", "", CheckPassed}},
			func(*testing.T, string) {}, map[string]wantVerify{"run-a": ok, "run-b": ok, "run-c": ok}},
		{"only the runs row deleted", []runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}, {"run-c", "", CheckPassed}},
			func(t *testing.T, path string) { rawExec(t, path, `DELETE FROM runs WHERE run_id = 'run-b'`) },
			map[string]wantVerify{"run-a": ok, "run-c": ok, "run-b": {VerifyTampered,
				[]string{"run-b is missing from runs", "envelopes (1)", "events (", "checks (2)", "verdicts (1)", "run_artifacts (1)"}}}},
		{"runs, envelope and verdict deleted, events left", []runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}},
			func(t *testing.T, path string) {
				rawExec(t, path, `DELETE FROM runs WHERE run_id = 'run-b'`, `DELETE FROM envelopes WHERE run_id = 'run-b'`,
					`DELETE FROM verdicts WHERE run_id = 'run-b'`, `DELETE FROM checks WHERE run_id = 'run-b'`)
			},
			map[string]wantVerify{"run-a": ok, "run-b": {VerifyTampered, []string{"run-b is missing from runs", "events ("}}}},
		{"every row of a middle run deleted", []runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}, {"run-c", "", CheckPassed}},
			func(t *testing.T, path string) { eraseRun(t, path, "run-b") },
			map[string]wantVerify{"run-a": ok, "run-c": {VerifyTampered, []string{"admission", "deleted"}}, "": writerSaw}},
		{"middle run erased, next admission renumbered and rehashed but not relinked",
			[]runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}, {"run-c", "", CheckPassed}},
			func(t *testing.T, path string) {
				eraseRun(t, path, "run-b")
				c := mustAdmission(t, path, "run-c")
				c.Ordinal = 2
				h, err := AdmissionHash(c.PrevHash, c)
				if err != nil {
					t.Fatal(err)
				}
				rawExec(t, path, `UPDATE admissions SET ordinal = 2, hash = '`+h+`' WHERE run_id = 'run-c'`, `UPDATE runs SET ordinal = 2 WHERE run_id = 'run-c'`)
				forgeTerminal(t, path, "run-c", TerminalV5)
			},
			map[string]wantVerify{"run-a": ok, "run-c": {VerifyTampered, []string{"admission 2: prev_hash does not link to admission 1"}}, "": writerSaw}},
		{"every row of a corrected run deleted", []runSpec{{"run-a", "", CheckPassed}, {"run-b", "", CheckUnknown}, {"run-d", "run-b", CheckPassed}},
			func(t *testing.T, path string) { eraseRun(t, path, "run-b") },
			map[string]wantVerify{"run-a": ok, "run-d": {VerifyTampered, []string{"admission"}},
				"run-b": {VerifyTampered, []string{"run-b is missing from runs", "runs.corrects_run_id of run-d"}}, "": writerSaw}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := buildRunsCopy(t, tc.specs...)
			tc.erase(t, path)
			checkVerify(t, verifyAll(t, path), tc.want)
		})
	}
	t.Run("a deleted run named explicitly, then a new run admitted", func(t *testing.T) {
		path := buildRuns(t, runSpec{"run-a", "", CheckPassed}, runSpec{"run-b", "", CheckUnknown})
		rawExec(t, path, `DELETE FROM runs WHERE run_id = 'run-b'`)
		checkVerify(t, verifyAll(t, path, "run-b"), map[string]wantVerify{"run-b": {VerifyTampered, []string{"missing from runs"}}})
		ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
		if _, err := ro.Verify(context.Background(), "run-none"); !errorsIs(err, ErrNoRun) {
			t.Errorf("Verify of a run that never existed: %v, want ErrNoRun", err)
		}
		mustClose(t, ro)
		// The deleted run's ordinal is not reused: the new run is admitted
		// after it and verifies, while run-b stays reported.
		s := mustOpen(t, path, OpenOptions{})
		if err := s.OpenRun(context.Background(), "run-c", testEnvelope(ModeLive), ""); err != nil {
			t.Fatalf("OpenRun after a runs row was deleted: %v", err)
		}
		mustClose(t, s)
		if a := mustAdmission(t, path, "run-c"); a.Ordinal != 3 {
			t.Errorf("run-c admitted as %d, want 3", a.Ordinal)
		}
		checkVerify(t, verifyAll(t, path), map[string]wantVerify{"run-a": {status: VerifyOK}, "run-c": {status: VerifyInterrupted},
			"run-b": {VerifyTampered, []string{"missing from runs"}}})
	})
}

// A forger who flips checks and the verdict and recomputes the terminal hash
// must be caught by the chained check_recorded and run_finalized events.
func TestVerifyDetectsForgedChecksAndVerdict(t *testing.T) {
	const run = "run-b"
	flipVerdict := `UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`
	cases := []struct {
		name   string
		forge  func(t *testing.T, path string)
		detail []string
	}{
		{"checks and verdict flipped, terminal hash recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE checks SET status = 'passed' WHERE run_id = 'run-b'`, flipVerdict)
			forgeTerminal(t, path, run, TerminalV3)
		}, []string{"check usage", "check_recorded", "run_finalized"}},
		{"failing check deleted, verdict flipped, terminal hash recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `DELETE FROM checks WHERE run_id = 'run-b' AND name = 'usage'`, flipVerdict)
			forgeTerminal(t, path, run, TerminalV3)
		}, []string{"check usage", "check_recorded", "run_finalized"}},
		{"check detail edited, terminal hash recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE checks SET detail = 'gateway usage conserved' WHERE run_id = 'run-b' AND name = 'usage'`)
			forgeTerminal(t, path, run, TerminalV3)
		}, []string{"check usage", "detail"}},
		{"requested verdict edited", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE verdicts SET requested_verdict = 'rejected' WHERE run_id = 'run-b'`)
		}, []string{"run_finalized", "requested"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := buildRunsCopy(t, runSpec{"run-a", "", CheckPassed}, runSpec{run, "", CheckUnknown})
			tc.forge(t, path)
			checkVerify(t, verifyAll(t, path), map[string]wantVerify{"run-a": {status: VerifyOK}, run: {VerifyTampered, tc.detail}})
		})
	}
}

// buildManifest verifies every run of the store at path and builds its manifest.
func buildManifest(t *testing.T, path string, final bool) Manifest {
	t.Helper()
	ctx := context.Background()
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	defer mustClose(t, ro)
	vs, err := ro.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ro.BuildManifest(ctx, vs, final)
	if err != nil {
		t.Fatalf("BuildManifest: %v", err)
	}
	return m
}

// checkManifestAll verifies every run of the store at path and checks the
// results against m, keyed by run id, or "table:<table>" for a store-level entry.
func checkManifestAll(t *testing.T, path string, m Manifest, strict bool) map[string]RunVerification {
	t.Helper()
	ctx := context.Background()
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	defer mustClose(t, ro)
	vs, err := ro.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := ro.CheckManifest(ctx, m, vs, strict)
	if err != nil {
		t.Fatalf("CheckManifest: %v", err)
	}
	out := map[string]RunVerification{}
	for _, v := range checked {
		key := v.RunID
		if key == "" {
			key = "table:" + v.Table
		}
		t.Logf("%s %s manifest %s: %s", key, v.Status, v.Manifest, v.Detail)
		out[key] = v
	}
	return out
}
