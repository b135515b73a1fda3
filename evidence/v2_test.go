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

	"github.com/google/go-cmp/cmp"
)

// buildV1Store writes a schema v1 store at path from testdata/schema-v1.sql
// holding the runs of a store built through today's API: a finalized run
// (whose terminal hash is recomputed under the v1 definition, as v1 wrote
// it) and an open one.
func buildV1Store(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src.duckdb")
	s := mustOpen(t, src, OpenOptions{})
	for _, run := range []string{"v1-final", "v1-open"} {
		if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if _, err := s.AppendEvent(ctx, run, Event{Type: "step", Parent: int64(i - 1), Payload: payload(`{"i":%d}`, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.PutArtifact(ctx, "v1-final", "a.go", "text/x-go", []byte("package a\n")); err != nil {
		t.Fatal(err)
	}
	rows := []UsageRow{reported("v1-final-m", SourceWire, 5, 1, 6), reported("v1-final-m", SourceStore, 5, 1, 6), reported("v1-final-m", SourceGateway, 5, 1, 6)}
	if err := s.RecordUsage(ctx, "v1-final", rows...); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUsageVerdicts(ctx, "v1-final", ReconcileUsage(rows)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "v1-final", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, "v1-final", Verdict{Verdict: VerdictAccepted}); err != nil {
		t.Fatal(err)
	}
	sum, err := s.Run(ctx, "v1-final")
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := s.Events(ctx, "v1-final")
	mustClose(t, s)
	// v1 had no check_recorded or run_finalized events: the fixture keeps the
	// three step events, whose chain is a prefix of today's.
	rec := TerminalRecord{Version: TerminalV1, RunID: sum.RunID, EnvelopeDigest: sum.EnvelopeDigest, LastEventHash: evs[2].Hash,
		EventCount: 3, Artifacts: sum.Artifacts, Checks: sum.Checks, Usage: sum.Usage, UsageVerdicts: sum.UsageVerdicts, Verdict: *sum.Verdict}
	v1Terminal, err := TerminalHash(rec)
	if err != nil {
		t.Fatal(err)
	}
	ddl, err := os.ReadFile(filepath.Join("testdata", "schema-v1.sql"))
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{string(ddl), `ATTACH '` + src + `' AS src (READ_ONLY)`,
		`INSERT INTO meta VALUES ('app', 'assay-evidence'), ('schema_version', '1'), ('created_at', '2026-11-30T00:00:00Z')`,
		`INSERT INTO runs SELECT run_id, ordinal, corrects_run_id, CASE WHEN run_id = 'v1-open' THEN 'open' ELSE status END,
			envelope_digest, created_at, finalized_at, event_count, terminal_hash FROM src.runs`,
		`UPDATE runs SET terminal_hash = '` + v1Terminal + `', event_count = 3 WHERE run_id = 'v1-final'`,
		`INSERT INTO envelopes ` + envelopesBeforeV6,
		`INSERT INTO events SELECT * FROM src.events WHERE type NOT IN ('check_recorded', 'run_finalized')`,
		`INSERT INTO artifacts SELECT * FROM src.artifacts`,
		`INSERT INTO run_artifacts SELECT * FROM src.run_artifacts`,
		`INSERT INTO usage SELECT run_id, ordinal, member_id, session_id, source, state, requests,
			prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens, recorded_at FROM src.usage`,
		`INSERT INTO usage_verdicts SELECT run_id, ordinal, member_id, session_id, verdict, deltas, detail, recorded_at FROM src.usage_verdicts`,
		`INSERT INTO checks SELECT * FROM src.checks`,
		`INSERT INTO verdicts SELECT * FROM src.verdicts`,
		`DETACH src`,
	}
	rawExec(t, path, stmts...)
}

func TestMigrateV1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	buildV1Store(t, path)
	before := fileDigest(t, path)
	for _, ro := range []bool{false, true} {
		_, err := Open(ctx, path, OpenOptions{ReadOnly: ro})
		var se *SchemaVersionError
		if !errors.As(err, &se) || se.Found != 1 || se.Supported != SchemaVersion || !strings.Contains(err.Error(), "must be migrated") {
			t.Fatalf("Open(read-only %v) of a v1 store: %v, want *SchemaVersionError saying it must be migrated", ro, err)
		}
	}
	if after := fileDigest(t, path); after != before {
		t.Fatal("opening a v1 store changed it: reading must never migrate")
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 1 || res.To != SchemaVersion || len(res.Steps) != SchemaVersion-1 {
		t.Fatalf("Migrate result %+v", res)
	}
	status := map[string]RunVerification{}
	for _, v := range res.Verification {
		status[v.RunID] = v
	}
	if status["v1-final"].Status != VerifyOK || status["v1-open"].Status != VerifyInterrupted {
		t.Fatalf("verification after migration: %+v", res.Verification)
	}
	if len(res.Interrupted) != 1 || res.Interrupted[0] != "v1-open" {
		t.Errorf("the v1 run left open should be recorded interrupted: %v", res.Interrupted)
	}
	s := mustOpen(t, path, OpenOptions{})
	sum, err := s.Run(ctx, "v1-final")
	if err != nil || sum.TerminalVersion != TerminalV1 || sum.Usage[0].State != UsageReported {
		t.Fatalf("migrated run: %+v %v", sum, err)
	}
	// The migrated store takes v2 evidence.
	if err := s.OpenRun(ctx, "v2", testEnvelope(ModeLive), "v1-final"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUsage(ctx, "v2", UsageRow{SessionID: "x", Source: SourceGateway, State: UsageSuspectZero, PromptTokens: i64(0), CompletionTokens: i64(1), TotalTokens: i64(1)}); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	again, err := Migrate(ctx, path, OpenOptions{})
	if err != nil || again.From != SchemaVersion || len(again.Steps) != 0 {
		t.Fatalf("second Migrate: %+v %v", again, err)
	}
	if u := again.Unverified(); len(u) != 0 {
		t.Fatalf("a migrated store with an interrupted run: Unverified %+v, want none", u)
	}
	// Tampering a migrated v1 run is still detected under the v1 definition.
	rawExec(t, path, `UPDATE checks SET detail = 'edited' WHERE run_id = 'v1-final'`)
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	vs, _ := ro.Verify(ctx, "v1-final")
	if vs[0].Status != VerifyTampered {
		t.Fatalf("edited migrated run: %+v", vs[0])
	}
	mustClose(t, ro)
	third, err := Migrate(ctx, path, OpenOptions{})
	if u := third.Unverified(); err != nil || len(u) != 1 || u[0].RunID != "v1-final" || u[0].Status != VerifyTampered {
		t.Fatalf("Migrate of a store with an edited run: Unverified %+v (%v), want v1-final tampered", u, err)
	}
}

func TestMigrateRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := Migrate(ctx, filepath.Join(dir, "none.duckdb"), OpenOptions{}); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrNoStore) {
		t.Errorf("Migrate of a missing file: %v", err)
	}
	path := filepath.Join(dir, "v1.duckdb")
	buildV1Store(t, path)
	rawExec(t, path, `INSERT INTO checkpoints VALUES ('v1-final', 1, '{}', 'x', now())`)
	before := fileDigest(t, path)
	if _, err := Migrate(ctx, path, OpenOptions{}); err == nil || !strings.Contains(err.Error(), "checkpoint rows") {
		t.Fatalf("Migrate of a v1 file with foreign checkpoints: %v", err)
	}
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a refused migration must leave schema 1: %v", err)
	}
	_ = before
	newer := filepath.Join(dir, "v99.duckdb")
	mustClose(t, mustOpen(t, newer, OpenOptions{}))
	rawExec(t, newer, `UPDATE meta SET value = '99' WHERE key = 'schema_version'`)
	if _, err := Migrate(ctx, newer, OpenOptions{}); !errors.Is(err, ErrSchemaVersion) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("Migrate of a newer store: %v", err)
	}
}

func TestAppendEventsBatch(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	first, err := s.AppendEvent(ctx, "r", Event{Type: "step", Payload: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	batch := []Event{
		{Type: "step", Parent: 1, Payload: json.RawMessage(`{"b": "<&>"}`)},
		{Type: "tool_call", Parent: 2, Payload: json.RawMessage(`{"call_id":"c","idempotency_key":"k","tool":"t","payload_sha256":"x"}`)},
		{Type: "step", Payload: json.RawMessage(`{"z":1,"a":2}`)},
	}
	out, err := s.AppendEvents(ctx, "r", batch)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || out[0].Seq != 2 || out[2].Seq != 4 || out[0].PrevHash != first.Hash || out[1].PrevHash != out[0].Hash ||
		string(out[0].Payload) != `{"b":"<&>"}` || string(out[2].Payload) != `{"a":2,"z":1}` {
		t.Fatalf("AppendEvents = %+v", out)
	}
	stored, _ := s.Events(ctx, "r")
	if diff := cmp.Diff(append([]StoredEvent{first}, out...), stored); diff != "" {
		t.Fatalf("stored differs from returned (-returned +stored):\n%s", diff)
	}
	// One invalid event refuses the whole batch, naming it.
	bad := []Event{{Type: "step", Payload: json.RawMessage(`{}`)}, {Type: "tool_call", Payload: json.RawMessage(`{"call_id":"c"}`)}}
	if _, err := s.AppendEvents(ctx, "r", bad); err == nil {
		t.Fatal("batch with an invalid event stored")
	} else {
		wantFieldError(t, err, ErrInvalidEvent, "events[1].payload.idempotency_key")
	}
	bad = []Event{{Type: "step", Payload: json.RawMessage(`{}`)}, {Type: "step", Parent: 99, Payload: json.RawMessage(`{}`)}}
	if _, err := s.AppendEvents(ctx, "r", bad); err == nil {
		t.Fatal("batch with a future parent stored")
	} else {
		wantFieldError(t, err, ErrInvalidEvent, "events[1].parent")
	}
	if n, _ := s.Events(ctx, "r"); len(n) != 4 {
		t.Fatalf("refused batches left %d events, want 4", len(n))
	}
	// The chain continues after refusals and the run verifies.
	if _, err := s.AppendEvents(ctx, "r", []Event{{Type: "step", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	vs, _ := s.Verify(ctx, "r")
	if vs[0].Status != VerifyUnfinalized || vs[0].FirstBadSeq != 0 || vs[0].Events != 5 {
		t.Fatalf("Verify %+v", vs[0])
	}
	wantFieldError(t, func() error {
		_, err := s.AppendEvent(ctx, "r", Event{Type: "provider_exchange", Payload: json.RawMessage(`{"seq":0,"status":200}`)})
		return err
	}(), ErrInvalidEvent, "payload.request_sha256")
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{})
	env := testEnvelope(ModeLive)
	if err := s.OpenRun(ctx, "r", env, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.AppendEvent(ctx, "r", Event{Type: "step", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := s.SaveCheckpoint(ctx, "r", 2, json.RawMessage(`{"round": 2, "done": ["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, "r", 2, json.RawMessage(`{}`)); !errors.Is(err, ErrCheckpointExists) {
		t.Errorf("second checkpoint at seq 2: %v", err)
	}
	wantFieldError(t, func() error { _, err := s.SaveCheckpoint(ctx, "r", 9, json.RawMessage(`{}`)); return err }(), ErrInvalidArgument, "seq")
	wantFieldError(t, func() error { _, err := s.SaveCheckpoint(ctx, "r", 1, json.RawMessage(`[1]`)); return err }(), ErrInvalidArgument, "state")
	req := ResumeRequest{Tenant: env.Tenant, ManifestDigest: env.ManifestDigest, Mode: env.Mode, PolicyDigest: env.PolicyDigest, DatasetDigest: env.DatasetDigest}
	got, err := s.LoadCheckpoint(ctx, "r", -1, req)
	if err != nil || got.Hash != cp.Hash || string(got.State) != `{"done":["a"],"round":2}` {
		t.Fatalf("LoadCheckpoint = %+v, %v", got, err)
	}
	for field, mutate := range map[string]func(*ResumeRequest){
		"tenant": func(r *ResumeRequest) { r.Tenant = "other" }, "manifest_digest": func(r *ResumeRequest) { r.ManifestDigest = digestOf("x") },
		"mode": func(r *ResumeRequest) { r.Mode = ModeDryRun }, "policy_digest": func(r *ResumeRequest) { r.PolicyDigest = "" },
		"dataset_digest": func(r *ResumeRequest) { r.DatasetDigest = digestOf("d") },
	} {
		r := req
		mutate(&r)
		_, err := s.LoadCheckpoint(ctx, "r", 2, r)
		var me *EnvelopeMismatchError
		if !errors.As(err, &me) || !errors.Is(err, ErrEnvelopeMismatch) || !strings.Contains(err.Error(), field) {
			t.Errorf("resume with another %s: %v", field, err)
		}
	}
	if _, err := s.LoadCheckpoint(ctx, "r", 1, req); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("missing checkpoint: %v", err)
	}
	if err := s.RecordCheck(ctx, "r", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, "r", Verdict{Verdict: VerdictAccepted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, "r", 3, json.RawMessage(`{}`)); !errors.Is(err, ErrFinalized) {
		t.Errorf("checkpoint on a finalized run: %v", err)
	}
	mustClose(t, s)
	for name, stmt := range map[string]string{
		"state edited":        `UPDATE checkpoints SET state = '{"done":["a","b"],"round":2}'`,
		"event it follows":    `UPDATE events SET hash = '` + strings.Repeat("b", 64) + `' WHERE seq = 2`,
		"checkpoint re-bound": `UPDATE checkpoints SET seq = 1`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "e.duckdb")
			copyFile(t, path, p)
			rawExec(t, p, stmt)
			ro := mustOpen(t, p, OpenOptions{ReadOnly: true})
			_, err := ro.LoadCheckpoint(ctx, "r", -1, req)
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpointCorrupt) {
				t.Fatalf("LoadCheckpoint after %s: %v", name, err)
			}
			vs, _ := ro.Verify(ctx, "r")
			if vs[0].Status != VerifyTampered {
				t.Errorf("Verify after %s: %+v", name, vs[0])
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func call(id, source, session string, messages int64, p, c, tot *int64) UsageCall {
	m := messages
	return UsageCall{CallID: id, Source: source, SessionID: session, MemberID: "m1", Messages: &m, PromptTokens: p, CompletionTokens: c, TotalTokens: tot}
}

func TestReconcileUsageCalls(t *testing.T) {
	gw := func(session string, p, c, tot int64) UsageRow { return reported(session, SourceGateway, p, c, tot) }
	both := func(id, session string, p, c, tot int64) []UsageCall {
		return []UsageCall{call(id, SourceWire, session, 2, i64(p), i64(c), i64(tot)), call(id, SourceStore, session, 2, i64(p), i64(c), i64(tot))}
	}
	cat := func(xs ...[]UsageCall) []UsageCall {
		var out []UsageCall
		for _, x := range xs {
			out = append(out, x...)
		}
		return out
	}
	cases := []struct {
		name      string
		calls     []UsageCall
		rows      []UsageRow
		session   string
		want      string
		dup       int64
		detail    string
		wireState string
	}{
		{"conserved over calls", cat(both("s/0", "s", 10, 2, 12), both("s/1", "s", 20, 3, 23)), []UsageRow{gw("s", 30, 5, 35)}, "s", UsageConserved, 0, "equal", UsageReported},
		{"gateway counts every call twice", cat(both("s/0", "s", 10, 2, 12), both("s/1", "s", 20, 3, 23)), []UsageRow{gw("s", 60, 10, 70)}, "s", UsageMismatch, 2,
			"duplicated: the gateway counts 2 times", UsageReported},
		{"wire groups a call under another session", cat(both("s/0", "s", 10, 2, 12), []UsageCall{
			call("s/1", SourceWire, "t", 2, i64(20), i64(3), i64(23)), call("s/1", SourceStore, "s", 2, i64(20), i64(3), i64(23))}),
			[]UsageRow{gw("s", 10, 2, 12), gw("t", 20, 3, 23)}, "s", UsageMismatch, 0, "call s/1 was grouped under session t by the wire", UsageReported},
		{"a call the gateway never saw", cat(both("s/0", "s", 10, 2, 12), []UsageCall{call("s/1", SourceStore, "s", 2, i64(1), i64(1), i64(2))}),
			[]UsageRow{gw("s", 11, 3, 14)}, "s", UsageMismatch, 0, "call s/1 is in the store but not on the wire", UsageReported},
		{"zero prompt on a request with messages", both("s/0", "s", 0, 2, 2), []UsageRow{gw("s", 0, 2, 2)}, "s", UsageVerdictUnknown, 0, "suspect_zero", UsageSuspectZero},
		{"a call without usage", cat(both("s/0", "s", 10, 2, 12), []UsageCall{call("s/1", SourceWire, "s", 2, nil, nil, nil), call("s/1", SourceStore, "s", 2, nil, nil, nil)}),
			[]UsageRow{gw("s", 10, 2, 12)}, "s", UsageVerdictUnknown, 0, "source wire is partial", UsagePartial},
		{"one zero-prompt call among others", cat(both("s/0", "s", 10, 2, 12), both("s/1", "s", 0, 3, 3)), []UsageRow{gw("s", 10, 5, 15)}, "s",
			UsageVerdictUnknown, 0, "source wire is suspect_zero", UsageSuspectZero},
		{"gateway missing", both("s/0", "s", 10, 2, 12), nil, "s", UsageVerdictUnknown, 0, "source gateway missing", UsageReported},
		{"metadata-only chunk neither zeroes nor replaces", cat(both("s/0", "s", 10, 2, 12), []UsageCall{{CallID: "s/0", Source: SourceWire, SessionID: "s"}}),
			[]UsageRow{gw("s", 10, 2, 12)}, "s", UsageConserved, 0, "", UsageReported},
		{"a later chunk's figures replace the running ones", cat([]UsageCall{call("s/0", SourceWire, "s", 2, i64(10), i64(1), i64(11))}, both("s/0", "s", 10, 2, 12)),
			[]UsageRow{gw("s", 10, 2, 12)}, "s", UsageConserved, 0, "", UsageReported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v *UsageVerdict
			for _, x := range ReconcileUsageCalls(tc.calls, tc.rows) {
				if x.SessionID == tc.session {
					x := x
					v = &x
				}
			}
			if v == nil {
				t.Fatalf("no verdict for session %s", tc.session)
			}
			if v.Verdict != tc.want || v.Multiple != tc.dup || v.Duplicated != (tc.dup > 0) || !strings.Contains(v.Detail, tc.detail) {
				t.Fatalf("verdict %s dup %v×%d detail %q; want %s ×%d containing %q", v.Verdict, v.Duplicated, v.Multiple, v.Detail, tc.want, tc.dup, tc.detail)
			}
			if v.Sources[SourceWire].State != tc.wireState {
				t.Errorf("wire state %s, want %s", v.Sources[SourceWire].State, tc.wireState)
			}
		})
	}
}

func TestUsageCallsStoredAndReconciledAtFinalize(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	calls := []UsageCall{call("s/0", SourceWire, "s", 2, i64(10), i64(2), i64(12)), call("s/0", SourceStore, "s", 2, i64(10), i64(2), i64(12)),
		{CallID: "s/0", Source: SourceWire, SessionID: "s"}}
	if err := s.RecordUsageCalls(ctx, "r", calls...); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUsage(ctx, "r", reported("s", SourceWire, 1, 1, 2)); err == nil {
		t.Error("a wire session row was accepted for a session accounted per call")
	}
	wantFieldError(t, s.RecordUsageCalls(ctx, "r", UsageCall{CallID: "x", Source: "endpoint", SessionID: "s"}), ErrInvalidArgument, "calls[0].source")
	if err := s.RecordUsage(ctx, "r", reported("s", SourceGateway, 20, 4, 24)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "r", Check{Name: "tests", Required: true, Status: CheckPassed}); err != nil {
		t.Fatal(err)
	}
	// Usage recorded but never reconciled: the run cannot be accepted.
	fin, err := s.Finalize(ctx, "r", Verdict{Verdict: VerdictAccepted})
	if err != nil {
		t.Fatal(err)
	}
	if fin.Verdict.Verdict != VerdictRejected || !contains(fin.Verdict.Reasons, "evidence does not reconcile: usage of session s recorded but never reconciled") {
		t.Fatalf("finalize = %+v", fin.Verdict)
	}
	sum, _ := s.Run(ctx, "r")
	if len(sum.UsageCalls) != 3 || sum.UsageCalls[2].State != UsageUnknown {
		t.Fatalf("stored calls %+v", sum.UsageCalls)
	}
	vs, _ := s.Verify(ctx, "r")
	if vs[0].Status != VerifyOK {
		t.Fatalf("a rejected run with intact evidence: %+v", vs[0])
	}
}

func TestRecordedUsageVerdictCarriesTheStoresReading(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	if err := s.OpenRun(ctx, "r", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	calls := []UsageCall{call("s/0", SourceWire, "s", 2, i64(10), i64(2), i64(12)), call("s/0", SourceStore, "s", 2, i64(10), i64(2), i64(12))}
	rows := []UsageRow{reported("s", SourceGateway, 30, 6, 36)}
	if err := s.RecordUsageCalls(ctx, "r", calls...); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordUsage(ctx, "r", rows...); err != nil {
		t.Fatal(err)
	}
	v := ReconcileUsageCalls(calls, rows)
	v[0].Duplicated, v[0].Multiple = false, 0 // a caller hiding the duplication
	if err := s.RecordUsageVerdicts(ctx, "r", v); err != nil {
		t.Fatal(err)
	}
	sum, _ := s.Run(ctx, "r")
	got := sum.UsageVerdicts[0]
	if got.Verdict != UsageMismatch || !got.Duplicated || got.Multiple != 3 || got.Sources[SourceGateway].State != UsageReported {
		t.Fatalf("stored usage verdict %+v", got)
	}
	_ = fmt.Sprint()
}
