package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// buildV2Store writes a schema v2 store at path from testdata/schema-v2.sql
// holding runs v2-a, v2-b, v2-c (finalized under terminal version 2, as v2
// wrote them: checks and verdict in their tables only, no check_recorded or
// run_finalized events) and v2-open (left open). Their events, artifacts,
// usage and checkpoints come from a store written through today's API.
func buildV2Store(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src.duckdb")
	s := mustOpen(t, src, OpenOptions{})
	finalized := []string{"v2-a", "v2-b", "v2-c"}
	for _, run := range append(finalized, "v2-open") {
		if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if _, err := s.AppendEvent(ctx, run, Event{Type: "step", Parent: int64(i - 1), Payload: payload(`{"i":%d}`, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutArtifact(ctx, run, "a.go", "text/x-go", []byte("package a // "+run+"\n")); err != nil {
			t.Fatal(err)
		}
		calls := []UsageCall{
			{CallID: run + "-m/1", Source: SourceWire, SessionID: run + "-m", MemberID: "m", Messages: i64(1), PromptTokens: i64(5), CompletionTokens: i64(1), TotalTokens: i64(6)},
			{CallID: run + "-m/1", Source: SourceStore, SessionID: run + "-m", MemberID: "m", Messages: i64(1), PromptTokens: i64(5), CompletionTokens: i64(1), TotalTokens: i64(6)},
		}
		gw := UsageRow{MemberID: "m", SessionID: run + "-m", Source: SourceGateway, State: UsageReported, Requests: 1, PromptTokens: i64(5), CompletionTokens: i64(1), TotalTokens: i64(6)}
		if err := s.RecordUsageCalls(ctx, run, calls...); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordUsage(ctx, run, gw); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordUsageVerdicts(ctx, run, ReconcileUsageCalls(calls, []UsageRow{gw})); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SaveCheckpoint(ctx, run, 1, json.RawMessage(`{"round":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{`ATTACH '` + src + `' AS src (READ_ONLY)`}
	for i, run := range finalized {
		sum, err := s.Run(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		verdict := Verdict{Verdict: VerdictAccepted, Reasons: []string{}}
		status := CheckPassed
		if i == 1 {
			verdict = Verdict{Verdict: VerdictRejected, Reasons: []string{"required check tests failed"}}
			status = CheckFailed
		}
		check := Check{Name: "tests", Required: true, Status: status, Detail: "go test"}
		rec := TerminalRecord{Version: TerminalV2, RunID: run, EnvelopeDigest: sum.EnvelopeDigest, LastEventHash: evs[len(evs)-1].Hash,
			EventCount: int64(len(evs)), Artifacts: sum.Artifacts, Checks: []Check{check}, Usage: sum.Usage, UsageCalls: sum.UsageCalls,
			UsageVerdicts: sum.UsageVerdicts, Checkpoints: sum.Checkpoints, Verdict: verdict}
		th, err := TerminalHash(rec)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts,
			fmt.Sprintf(`INSERT INTO checks VALUES ('%s', 'tests', true, '%s', 'go test', NULL, TIMESTAMP '2026-11-30 00:00:01')`, run, status),
			fmt.Sprintf(`INSERT INTO verdicts VALUES ('%s', '%s', 'accepted', %s, TIMESTAMP '2026-11-30 00:00:02')`, run, verdict.Verdict, sqlList(verdict.Reasons)),
			fmt.Sprintf(`UPDATE runs SET status = 'finalized', finalized_at = TIMESTAMP '2026-11-30 00:00:02', event_count = %d,
				terminal_hash = '%s', terminal_version = 2 WHERE run_id = '%s'`, len(evs), th, run))
	}
	mustClose(t, s)
	ddl, err := os.ReadFile(filepath.Join("testdata", "schema-v2.sql"))
	if err != nil {
		t.Fatal(err)
	}
	copyRows := []string{string(ddl),
		`INSERT INTO meta VALUES ('app', 'assay-evidence'), ('schema_version', '2'), ('created_at', '2026-11-30T00:00:00Z')`}
	copyRows = append(copyRows, `INSERT INTO writers SELECT writer_id, pid, command, host, opened_at, closed_at FROM src.writers`)
	for _, tb := range []string{"runs", "envelopes", "events", "artifacts", "run_artifacts", "usage", "usage_calls", "usage_verdicts", "checkpoints"} {
		sel := `SELECT * FROM src.` + tb
		if tb == "envelopes" {
			sel = envelopesBeforeV6
		}
		copyRows = append(copyRows, `INSERT INTO `+tb+` `+sel)
	}
	// The finalization statements run after the rows they update are copied.
	rawExec(t, path, append(append(copyRows[:2:2], stmts[0]), append(copyRows[2:], append(stmts[1:], `DETACH src`)...)...)...)
}

func sqlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + strings.ReplaceAll(x, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]::VARCHAR[]"
}

func TestMigrateV2(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV2Store(t, path)
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open of a v2 store: %v, want *SchemaVersionError", err)
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 2 || res.To != SchemaVersion || len(res.Steps) != SchemaVersion-2 || !strings.Contains(res.Steps[0], "admissions") {
		t.Fatalf("Migrate result %+v", res)
	}
	got := map[string]RunVerification{}
	for _, v := range res.Verification {
		got[v.RunID] = v
	}
	checkVerify(t, got, map[string]wantVerify{"v2-a": {status: VerifyOK}, "v2-b": {status: VerifyOK}, "v2-c": {status: VerifyOK},
		"v2-open": {status: VerifyInterrupted}})

	// Every run was chained into the admissions, backfilled, in ordinal order.
	s := mustOpen(t, path, OpenOptions{})
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	prev := ZeroHash
	for i, r := range runs {
		a, err := loadAdmission(ctx, s.conn, r.RunID)
		if err != nil || a == nil || !a.Backfilled || a.Ordinal != int64(i+1) || a.PrevHash != prev || a.Hash != r.AdmissionHash {
			t.Fatalf("admission of %s: %+v, %v", r.RunID, a, err)
		}
		prev = a.Hash
	}
	if runs[0].TerminalVersion != TerminalV2 {
		t.Fatalf("a v2 run changed terminal version: %d", runs[0].TerminalVersion)
	}
	// A run admitted after the migration continues the chain under v3.
	if err := s.OpenRun(ctx, "v3-new", testEnvelope(ModeLive), "v2-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "v3-new", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	fin, err := s.Finalize(ctx, "v3-new", Verdict{Verdict: VerdictAccepted})
	if err != nil || fin.Verdict.Verdict != VerdictAccepted || fin.EventCount != 2 {
		t.Fatalf("Finalize after migration: %+v, %v", fin, err)
	}
	a, err := loadAdmission(ctx, s.conn, "v3-new")
	if err != nil || a == nil || a.Backfilled || a.Ordinal != 5 || a.PrevHash != prev || a.CorrectsRunID != "v2-b" {
		t.Fatalf("admission after migration: %+v, %v", a, err)
	}
	mustClose(t, s)
	checkVerify(t, verifyAll(t, path), map[string]wantVerify{"v2-a": {status: VerifyOK}, "v2-b": {status: VerifyOK}, "v2-c": {status: VerifyOK},
		"v2-open": {status: VerifyInterrupted}, "v3-new": {status: VerifyOK}})

	// A migrated v2 run keeps its own protection: its terminal hash covers
	// its checks, so an edit that does not recompute it is found.
	rawExec(t, path, `UPDATE checks SET status = 'passed' WHERE run_id = 'v2-b'`)
	checkVerify(t, verifyAll(t, path, "v2-b"), map[string]wantVerify{"v2-b": {VerifyTampered, []string{"terminal hash mismatch"}}})
}

// Schema v3 reserves check_recorded and run_finalized for the store: a v2
// file holding events of those types is refused, not carried over.
func TestMigrateV2RefusesReservedEventTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV2Store(t, path)
	rawExec(t, path, `UPDATE events SET type = 'check_recorded' WHERE run_id = 'v2-a' AND seq = 2`)
	_, err := Migrate(context.Background(), path, OpenOptions{})
	if err == nil || !strings.Contains(err.Error(), "reserves for the store") {
		t.Fatalf("Migrate of a v2 store with a check_recorded event: %v", err)
	}
	if _, err := Open(context.Background(), path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a refused migration must leave schema 2: %v", err)
	}
}

// A run deleted from a v2 store, where no admissions chain existed yet, still
// leaves a gap in runs.ordinal, which the backfilled chain keeps.
func TestMigrateV2KeepsTheGapOfADeletedRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV2Store(t, path)
	eraseRun(t, path, "v2-b")
	res, err := Migrate(context.Background(), path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RunVerification{}
	for _, v := range res.Verification {
		got[v.RunID] = v
	}
	checkVerify(t, got, map[string]wantVerify{"v2-a": {status: VerifyOK},
		"v2-c":    {VerifyTampered, []string{"admission 3: admission 2 is missing: the run admitted there was deleted"}},
		"v2-open": {status: VerifyInterrupted}})
}

// referenceAdmissionHash is the admission hash as specified, built with
// json.Marshal of a map and RFC 8785 canonicalization by jcs.
func referenceAdmissionHash(t *testing.T, prev string, a Admission) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"ordinal": a.Ordinal, "run_id": a.RunID, "envelope_digest": a.EnvelopeDigest,
		"corrects_run_id": a.CorrectsRunID, "admitted_at": a.AdmittedAt.UTC().Format(EventTimeLayout), "backfilled": a.Backfilled})
	if err != nil {
		t.Fatal(err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 32)
	for i := range p {
		fmt.Sscanf(prev[2*i:2*i+2], "%02x", &p[i])
	}
	return sha256Hex(append(p, canon...))
}

// Pinned: these definitions must never drift, or stored stores stop verifying.
const (
	goldenAdmissionHash = "cd7fbf1c249a3a313a785e2602b44ccdafe0a8f167b918d9287e3779d36af499"
	goldenTerminalV2    = "1be7f51119c914f662d0b3396b74913ee39f5029d4214ddc907280759aec1622"
)

func goldenAdmission() Admission {
	return Admission{Ordinal: 7, RunID: "run-v3", EnvelopeDigest: goldenArtifactHash, CorrectsRunID: "run-é<1>",
		AdmittedAt: time.Date(2026, 11, 30, 10, 15, 0, 123456000, time.UTC)}
}

func TestAdmissionHashMatchesJCS(t *testing.T) {
	for _, a := range []Admission{goldenAdmission(), {Ordinal: 1, RunID: "r", EnvelopeDigest: ZeroHash, AdmittedAt: time.Unix(0, 0), Backfilled: true}} {
		for _, prev := range []string{ZeroHash, goldenPrevHash} {
			got, err := AdmissionHash(prev, a)
			if want := referenceAdmissionHash(t, prev, a); err != nil || got != want {
				t.Errorf("AdmissionHash(%s, %+v) = %s, %v; JCS reference %s", prev, a, got, err, want)
			}
		}
	}
	if got, err := AdmissionHash(goldenPrevHash, goldenAdmission()); err != nil || got != goldenAdmissionHash {
		t.Errorf("golden admission hash %s, %v; want %s", got, err, goldenAdmissionHash)
	}
	for _, bad := range []struct {
		prev string
		a    Admission
	}{{"xyz", goldenAdmission()}, {ZeroHash, Admission{Ordinal: 0, RunID: "r"}}, {ZeroHash, Admission{Ordinal: 1, RunID: "\xff"}}} {
		if _, err := AdmissionHash(bad.prev, bad.a); err == nil {
			t.Errorf("AdmissionHash(%q, %+v) accepted", bad.prev, bad.a)
		}
	}
}

func TestTerminalHashV2AndV3(t *testing.T) {
	r := TerminalRecord{Version: TerminalV2, RunID: "run-v1", EnvelopeDigest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		LastEventHash: goldenPrevHash, EventCount: 3,
		Artifacts:     []ArtifactLink{{Name: "b.go", Digest: goldenArtifactHash, MediaType: "text/x-go"}},
		Checks:        []Check{{Name: "tests", Required: true, Status: "passed", Detail: "ok", Evidence: json.RawMessage(`{"exit":0}`)}},
		Usage:         []UsageRow{{MemberID: "m", SessionID: "s", Source: "wire", State: "reported", Requests: 1, PromptTokens: i64(3), CompletionTokens: i64(2), TotalTokens: i64(5)}},
		UsageCalls:    []UsageCall{{Source: "wire", CallID: "s/1", SessionID: "s", MemberID: "m", State: "reported", PromptTokens: i64(3), CompletionTokens: i64(2), TotalTokens: i64(5)}},
		UsageVerdicts: []UsageVerdict{{MemberID: "m", SessionID: "s", Verdict: "unknown", Detail: "source store missing", Duplicated: true, Multiple: 2}},
		Checkpoints:   []CheckpointInfo{{Seq: 1, Hash: goldenArtifactHash, EventHash: goldenPrevHash}},
		Verdict:       Verdict{Verdict: "rejected", Reasons: []string{"x"}},
		AdmissionHash: goldenAdmissionHash}
	// The schema v2 code computed this (without an admission hash): v2 runs
	// keep verifying under their own definition.
	if got, err := TerminalHash(r); err != nil || got != goldenTerminalV2 {
		t.Fatalf("v2 terminal hash %s, %v; schema v2 computed %s", got, err, goldenTerminalV2)
	}
	r.Version = TerminalV3
	v3, err := TerminalHash(r)
	if err != nil || v3 == goldenTerminalV2 {
		t.Fatalf("v3 terminal hash %s, %v: must differ from v2", v3, err)
	}
	r.Version = 0
	if cur, _ := TerminalHash(r); cur != v3 {
		t.Fatal("version 0 is not read as the current definition (v3)")
	}
	r.Version = TerminalV3
	r.AdmissionHash = goldenPrevHash
	if other, _ := TerminalHash(r); other == v3 {
		t.Fatal("the v3 terminal hash ignores the admission hash")
	}
	r.AdmissionHash = ""
	if _, err := TerminalHash(r); err == nil {
		t.Fatal("a v3 terminal record without an admission hash was hashed")
	}
	r.Version = 4
	if _, err := TerminalHash(r); err == nil {
		t.Fatal("an unknown terminal version was hashed")
	}
}

func TestStoreEventTypesAreReserved(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{EventCheckRecorded, EventRunFinalized} {
		_, err := s.AppendEvent(ctx, "r", Event{Type: typ, Payload: json.RawMessage(`{"name":"tests","status":"passed"}`)})
		wantFieldError(t, err, ErrInvalidEvent, "type")
		_, err = s.AppendEvents(ctx, "r", []Event{{Type: "step", Payload: json.RawMessage(`{}`)}, {Type: typ, Payload: json.RawMessage(`{}`)}})
		wantFieldError(t, err, ErrInvalidEvent, "events[1].type")
	}
	if evs, _ := s.Events(ctx, "r"); len(evs) != 0 {
		t.Fatalf("%d events stored by refused appends", len(evs))
	}
	// A refused check writes neither the row nor the event; a duplicate check
	// writes no second event.
	if err := s.RecordCheck(ctx, "r", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "r", Check{Name: "tests", Required: true, Status: CheckFailed}); !errors.Is(err, ErrCheckExists) {
		t.Fatalf("second RecordCheck: %v", err)
	}
	if err := s.RecordCheck(ctx, "r", Check{Name: "bad", Status: "maybe"}); err == nil {
		t.Fatal("a check of unknown status was recorded")
	}
	// Events appended after a check continue the chain the check extended.
	if _, err := s.AppendEvent(ctx, "r", Event{Type: "step", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events(ctx, "r")
	if len(evs) != 2 || evs[0].Type != EventCheckRecorded || evs[1].PrevHash != evs[0].Hash {
		t.Fatalf("events after RecordCheck: %+v", evs)
	}
	if vs, err := s.Verify(ctx, "r"); err != nil || vs[0].Status != VerifyUnfinalized {
		t.Fatalf("Verify of the open run: %+v, %v", vs, err)
	}
}

// Forgeries beyond flipping rows: each rewrites as much as a forger would
// need to get past the terminal hash, and is still caught.
func TestVerifyDetectsDeeperForgeries(t *testing.T) {
	const run = "run-b"
	cases := []struct {
		name   string
		forge  func(t *testing.T, path string)
		status string
		detail []string
	}{
		{"terminal version downgraded to 2 and recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE checks SET status = 'passed' WHERE run_id = 'run-b'`,
				`UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`)
			forgeTerminal(t, path, run, TerminalV2)
		}, VerifyTampered, []string{"terminal version 2, but the run was admitted under schema 3", "check usage: status passed"}},
		{"check_recorded event removed with its row, chain and terminal recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `DELETE FROM checks WHERE run_id = 'run-b' AND name = 'usage'`,
				`DELETE FROM events WHERE run_id = 'run-b' AND type = 'check_recorded' AND (payload->>'$.name') = 'usage'`,
				`UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`)
			rechain(t, path, run)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"verdict accepted but its run_finalized event (seq 6) says rejected"}},
		{"event appended after run_finalized, chain and terminal recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `INSERT INTO events SELECT run_id, seq + 1, 0, 'step', '', '', time, '{}', '', '' FROM events
				WHERE run_id = 'run-b' AND type = 'run_finalized'`)
			rechain(t, path, run)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"run_finalized event (seq 7) is not the last event (seq 8)"}},
		{"second run_finalized event appended", func(t *testing.T, path string) {
			rawExec(t, path, `INSERT INTO events SELECT run_id, seq + 1, 0, type, '', '', time,
				'{"reasons":[],"requested_verdict":"accepted","verdict":"accepted"}', '', '' FROM events WHERE run_id = 'run-b' AND type = 'run_finalized'`,
				`UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`)
			rechain(t, path, run)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"2 run_finalized events record a verdict"}},
		{"check row added without RecordCheck, terminal recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `INSERT INTO checks VALUES ('run-b', 'waiver', false, 'passed', 'operator', NULL, now())`)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"check waiver: no check_recorded event records it"}},
		{"check evidence edited, terminal recomputed", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE checks SET evidence = '{"exit":1}' WHERE run_id = 'run-b' AND name = 'tests'`)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"check tests: evidence differs"}},
		{"admission deleted", func(t *testing.T, path string) {
			rawExec(t, path, `DELETE FROM admissions WHERE run_id = 'run-b'`)
		}, VerifyTampered, []string{"no admission record"}},
		{"admission edited", func(t *testing.T, path string) {
			rawExec(t, path, `UPDATE admissions SET envelope_digest = '`+ZeroHash+`' WHERE run_id = 'run-b'`)
		}, VerifyTampered, []string{"admission 2 differs from the runs row in envelope digest", "admission 2: hash mismatch"}},
		{"admission marked backfilled and rehashed", func(t *testing.T, path string) {
			a := mustAdmission(t, path, run)
			a.Backfilled = true
			h, err := AdmissionHash(a.PrevHash, a)
			if err != nil {
				t.Fatal(err)
			}
			rawExec(t, path, `UPDATE admissions SET backfilled = true, hash = '`+h+`' WHERE run_id = 'run-b'`)
			forgeTerminal(t, path, run, TerminalV5)
		}, VerifyTampered, []string{"terminal version 5 on a run admitted before schema 3"}},
		{"admission marked backfilled, checks and verdict flipped, terminal recomputed under v2", func(t *testing.T, path string) {
			a := mustAdmission(t, path, run)
			a.Backfilled = true
			h, err := AdmissionHash(a.PrevHash, a)
			if err != nil {
				t.Fatal(err)
			}
			rawExec(t, path, `UPDATE admissions SET backfilled = true, hash = '`+h+`' WHERE run_id = 'run-b'`,
				`UPDATE checks SET status = 'passed' WHERE run_id = 'run-b'`,
				`UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`)
			forgeTerminal(t, path, run, TerminalV2)
		}, VerifyTampered, []string{"admission 2 is marked backfilled, but admission 1 before it was written by OpenRun",
			"event 5 is a check_recorded event, which the store writes only for runs admitted under schema 3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := buildRunsCopy(t, runSpec{"run-a", "", CheckPassed}, runSpec{run, "", CheckUnknown})
			tc.forge(t, path)
			want := map[string]wantVerify{"run-a": {status: VerifyOK}, run: {tc.status, tc.detail}}
			if strings.HasPrefix(tc.name, "admission") && tc.name != "admission edited" {
				// The writer session's closing record pinned the admissions as it left them.
				want[""] = wantVerify{VerifyTampered, []string{"writer 1: admissions at close"}}
			}
			checkVerify(t, verifyAll(t, path), want)
		})
	}
}

func mustAdmission(t *testing.T, path, runID string) Admission {
	t.Helper()
	s := mustOpen(t, path, OpenOptions{ReadOnly: true})
	defer mustClose(t, s)
	a, err := loadAdmission(context.Background(), s.conn, runID)
	if err != nil || a == nil {
		t.Fatalf("admission of %s: %v", runID, err)
	}
	return *a
}

// An unfinalized run's checks are compared with their events too, and the
// store refuses to accept evidence it cannot reconcile with its chain.
func TestUnfinalizedRunChecksAreCompared(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{})
	if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "r", Check{Name: "tests", Required: true, Status: CheckFailed}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	rawExec(t, path, `UPDATE checks SET status = 'passed'`)
	checkVerify(t, verifyAll(t, path), map[string]wantVerify{"r": {VerifyTampered, []string{"check tests: status passed but its check_recorded event (seq 1) says failed"}}})
}

// What the unkeyed hashes cannot see — a run erased and every later
// admission and terminal hash rewritten consistently, or the latest run
// erased with its admission — a manifest kept elsewhere does.
func TestManifestCatchesConsistentErasure(t *testing.T) {
	path := buildRuns(t, runSpec{"run-a", "", CheckPassed}, runSpec{"run-b", "", CheckUnknown}, runSpec{"run-c", "", CheckPassed},
		runSpec{"run-d", "", CheckUnknown})
	manifest := buildManifest(t, path, false)
	if len(manifest.Runs) != 4 {
		t.Fatalf("manifest pins %d runs", len(manifest.Runs))
	}
	// Erase run-b and rewrite the chain after it: run-c takes ordinal 2,
	// links to run-a's admission, and gets a terminal hash over its new
	// admission hash; run-d likewise. Also erase the latest run, run-d.
	eraseRun(t, path, "run-b")
	eraseRun(t, path, "run-d")
	a, c := mustAdmission(t, path, "run-a"), mustAdmission(t, path, "run-c")
	c.Ordinal, c.PrevHash = 2, a.Hash
	h, err := AdmissionHash(c.PrevHash, c)
	if err != nil {
		t.Fatal(err)
	}
	rawExec(t, path, fmt.Sprintf(`UPDATE admissions SET ordinal = 2, prev_hash = '%s', hash = '%s' WHERE run_id = 'run-c'`, a.Hash, h),
		`UPDATE runs SET ordinal = 2 WHERE run_id = 'run-c'`)
	forgeTerminal(t, path, "run-c", TerminalV5)
	checked := checkManifestAll(t, path, manifest, false)
	for id, want := range map[string]string{"run-a": ManifestMatch, "run-b": ManifestMissing, "run-c": ManifestDiffers, "run-d": ManifestMissing} {
		if checked[id].Manifest != want {
			t.Errorf("manifest check of %s: %+v, want %s", id, checked[id], want)
		}
	}
	if v := checked["table:admissions"]; v.Status != VerifyTampered || !strings.Contains(v.Detail, "the 4 admissions the manifest pins do not verify") {
		t.Errorf("the admissions log's pinned prefix: %+v", v)
	}
}

func mapValues(m map[string]RunVerification) []RunVerification {
	out := make([]RunVerification, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
