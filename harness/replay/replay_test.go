package replay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

func runOf(t *testing.T, f *fixture, catalog string) harness.CaseResult {
	t.Helper()
	for _, r := range f.runs {
		if r.Catalog == catalog {
			return r
		}
	}
	t.Fatalf("no %s run in the fixture", catalog)
	return harness.CaseResult{}
}

// Replaying a run changes nothing of it, records a finalized replay run linked to it whose first
// event is replay_started, and assay verify verifies that run; a replay run is in no other run's
// family and resumes nothing.
func TestARunReplaysExactAndTheReplayIsARunOfItsOwn(t *testing.T) {
	t.Parallel()
	f, results := replayed(t)
	out := copyOut(t, f)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2: %+v", len(results), results)
	}
	for i, name := range []string{"sequential", "parallel"} {
		orig, res := runOf(t, f, name), results[i]
		if res.RunID != orig.RunID || res.Verdict != Exact || res.FirstDivergence != nil || res.ReplayRunID == "" || res.Requests == 0 || res.ToolCalls == 0 {
			t.Fatalf("%s: %+v", name, res)
		}
	}
	ctx := context.Background()
	s := openStore(t, out, true)
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Status != evidence.VerifyOK {
			t.Errorf("run %s does not verify after replays: %+v", v.RunID, v)
		}
	}
	seq := runOf(t, f, "sequential")
	var replays []evidence.RunSummary
	for _, r := range runs {
		if r.RunID == seq.RunID && r.TerminalHash != seq.TerminalHash {
			t.Errorf("the replayed run changed: terminal hash %s, was %s", r.TerminalHash, seq.TerminalHash)
		}
		if harness.IsReplayRun(r) {
			replays = append(replays, r)
		}
	}
	if len(replays) != 2 {
		t.Fatalf("%d replay runs, want 2", len(replays))
	}
	for _, r := range replays {
		evs, err := s.Events(ctx, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if evs[0].Type != event.TypeReplayStarted || payload[event.ReplayStarted](t, evs[0]).ReplaysRunID != r.CorrectsRunID {
			t.Errorf("replay run %s: first event %s, linked to %s", r.RunID, evs[0].Type, r.CorrectsRunID)
		}
		if r.Status != evidence.StatusFinalized || r.Verdict.Verdict != evidence.VerdictAccepted || len(r.Checks) != 1 || r.Checks[0].Name != CheckName {
			t.Errorf("replay run %s: %s %+v %+v", r.RunID, r.Status, r.Verdict, r.Checks)
		}
		// A replay is an invocation of its own, of the replayed run's case.
		replayed := slices.IndexFunc(runs, func(o evidence.RunSummary) bool { return o.RunID == r.CorrectsRunID })
		if replayed < 0 || r.Envelope.InvocationID != "inv-replay" || runs[replayed].Envelope.InvocationID == "inv-replay" ||
			r.Envelope.Case == "" || r.Envelope.Case != runs[replayed].Envelope.Case {
			t.Errorf("replay run %s: invocation %q case %q; the replayed run's invocation %q case %q", r.RunID, r.Envelope.InvocationID,
				r.Envelope.Case, runs[replayed].Envelope.InvocationID, runs[replayed].Envelope.Case)
		}
		if fam := harness.Family(runs, r.CorrectsRunID); slices.ContainsFunc(fam, harness.IsReplayRun) {
			t.Errorf("the family of %s holds a replay run", r.CorrectsRunID)
		}
		if by := harness.ResumedBy(runs, r.CorrectsRunID); by != "" {
			t.Errorf("run %s is taken as resumed by %s", r.CorrectsRunID, by)
		}
	}
	// A replay run is evidence like any other: editing it is tampering.
	s.Close()
	rawExec(t, out, `UPDATE events SET payload = '{"verdict":"exact","forged":true}' WHERE run_id = ? AND type = 'replay_verdict'`, replays[0].RunID)
	s = openStore(t, out, true)
	vs, err = s.Verify(ctx, replays[0].RunID)
	if err != nil || vs[0].Status != evidence.VerifyTampered {
		t.Errorf("a replay run edited: %+v %v", vs, err)
	}
}

// A build that constructs a member's prompt otherwise is a mismatch at that member's request,
// naming the field and both values.
func TestAChangedPromptIsAMismatchAtItsMemberAndRequest(t *testing.T) {
	t.Parallel()
	f := live(t)
	out := copyOut(t, f)
	seq := runOf(t, f, "sequential")
	opts := Options{Runs: []string{seq.RunID}}
	opts.hooks = &hooks{request: func(member string, req *provider.Request) {
		if member == "exec-2" && len(req.Messages) == 2 {
			req.Messages[1].Content += "\n(one more line)"
		}
	}}
	res := one(t, out, opts)
	d := res.FirstDivergence
	if res.Verdict != Mismatch || d == nil || d.Member != "exec-2" || d.Seq == nil || *d.Seq != 0 || d.Pointer != "/messages/1/content" ||
		d.RunID != seq.RunID || d.Event != event.TypeProviderExchange {
		t.Fatalf("%+v (first divergence %+v)", res, d)
	}
	var recorded, replayed string
	if json.Unmarshal(d.Recorded, &recorded) != nil || json.Unmarshal(d.Replayed, &replayed) != nil || replayed != recorded+"\n(one more line)" {
		t.Errorf("values: recorded %s, replayed %s", d.Recorded, d.Replayed)
	}
	s := openStore(t, out, true)
	r, err := s.Run(context.Background(), res.ReplayRunID)
	if err != nil || r.Verdict.Verdict != evidence.VerdictRejected || r.Checks[0].Status != evidence.CheckFailed {
		t.Errorf("the mismatched replay run: %+v %v", r.Verdict, err)
	}
}

// A tolerance wider than the one the run bound is refused, naming both, and nothing is executed.
func TestAWiderToleranceIsRefused(t *testing.T) {
	t.Parallel()
	f := live(t)
	out := copyOut(t, f)
	res := one(t, out, Options{Runs: []string{runOf(t, f, "sequential").RunID}, Tolerance: "volatile"})
	if res.Verdict != Refused || !strings.Contains(res.Reason, "volatile@1") || !strings.Contains(res.Reason, "exact@1") || !strings.Contains(res.Reason, "wider") {
		t.Fatalf("%+v", res)
	}
	s := openStore(t, out, true)
	evs, err := s.Events(context.Background(), res.ReplayRunID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	if !slices.Equal(types, []string{event.TypeReplayStarted, event.TypeReplayVerdict, "check_recorded", "run_finalized"}) {
		t.Errorf("a refused replay executed something: %v", types)
	}
	if _, err := os.Stat(filepath.Join(out, "cases", res.ReplayRunID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused replay made member directories: %v", err)
	}
}

// A run bound to the volatile policy replays within tolerance: its clock readings differ, and
// nothing else does; each tolerated field is named with how much it differed.
func TestTimestampOnlyDifferencesAreWithinTolerance(t *testing.T) {
	t.Parallel()
	f := volatile(t)
	out := copyOut(t, f)
	res := one(t, out, Options{Runs: []string{f.runs[0].RunID}})
	if res.Verdict != WithinTolerance || res.FirstDivergence != nil || res.Tolerance != "volatile@1" {
		t.Fatalf("%+v", res)
	}
	fields := map[string]event.ReplayDifference{}
	for _, d := range res.Differences {
		fields[d.Field] = d
	}
	for _, name := range []string{"event time", "latency_ms", "duration_ns"} {
		d, ok := fields[name]
		if !ok || d.Count == 0 || d.Unit == "" {
			t.Errorf("%s: %+v (differences %+v)", name, d, res.Differences)
		}
	}
	if d := fields["event time"]; d.MinDelta <= 0 {
		t.Errorf("the replay ran after the run: event time deltas %v..%v s", d.MinDelta, d.MaxDelta)
	}
	for name := range fields {
		if !slices.Contains([]string{"event time", "latency_ms", "duration_ns", "approval expires_at", "receipt time"}, name) {
			t.Errorf("a field the policy does not list differed: %s", name)
		}
	}
}

// The policy a replay decides tool calls by must be the run's: another file is refused naming both
// digests, a changed recorded file with none given is refused, the same bytes under another name
// are accepted. Not parallel: it edits the policy file the shared volatile fixture's run named (and
// restores it when it ends, before the parallel tests that replay that run start).
func TestAChangedPolicyIsRefused(t *testing.T) {
	f := volatile(t)
	run := f.runs[0].RunID
	dir := t.TempDir()
	other := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(other, []byte("version: 1\ndefault: allow\nrules:\n  - id: no-shell\n    tools: [shell]\n    decision: deny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := copyOut(t, f)
	res := one(t, out, Options{Runs: []string{run}, PolicyFile: other})
	if res.Verdict != Refused || !strings.Contains(res.Reason, "policy digest") {
		t.Fatalf("another policy: %+v", res)
	}
	same := filepath.Join(dir, "renamed.yaml")
	if err := os.WriteFile(same, []byte(policyAllowAll), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := one(t, out, Options{Runs: []string{run}, PolicyFile: same}); res.Verdict != WithinTolerance {
		t.Fatalf("the same policy under another name: %+v", res)
	}
	// The file the run named, changed since: without --policy the recorded policy is not available.
	pol := filepath.Join(fixtureRoot, "allow-all.yaml")
	orig, _ := os.ReadFile(pol)
	t.Cleanup(func() { os.WriteFile(pol, orig, 0o644) })
	if err := os.WriteFile(pol, append(orig, []byte("# edited\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := one(t, out, Options{Runs: []string{run}}); res.Verdict != Refused || !strings.Contains(res.Reason, "changed since") {
		t.Fatalf("the run's policy file changed: %+v", res)
	}
	// Mode and tenant other than the run's are refused too.
	if res := one(t, out, Options{Runs: []string{run}, PolicyFile: same, Mode: "observe"}); res.Verdict != Refused || !strings.Contains(res.Reason, "mode") {
		t.Fatalf("another mode: %+v", res)
	}
	if res := one(t, out, Options{Runs: []string{run}, PolicyFile: same, Tenant: "someone-else"}); res.Verdict != Refused || !strings.Contains(res.Reason, "tenant") {
		t.Fatalf("another tenant: %+v", res)
	}
}

// A response whose stored bytes were altered or deleted cannot certify a replay.
func TestAnAlteredOrDeletedResponseIsNonCertifiable(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	var digest string
	{
		s := openStore(t, f.out, true)
		evs, err := s.Events(context.Background(), seq.RunID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == event.TypeProviderExchange {
				digest = payload[event.ProviderExchange](t, ev).ResponseArtifact
				break
			}
		}
		s.Close()
	}
	for name, stmt := range map[string]string{
		"altered": `UPDATE artifacts SET data = CAST('{"choices":[]}' AS BLOB) WHERE digest = ?`,
		"deleted": `DELETE FROM artifacts WHERE digest = ?`,
	} {
		t.Run(name, func(t *testing.T) {
			out := copyOut(t, f)
			rawExec(t, out, stmt, digest)
			res := one(t, out, Options{Runs: []string{seq.RunID}})
			if res.Verdict != NonCertifiable || !strings.Contains(res.Reason, "does not verify") {
				t.Fatalf("%+v", res)
			}
		})
	}
}

// The gateway's records a run is bound to are part of its evidence: edited or gone, the run does not
// verify, and its replay certifies nothing (not an exact replay of a run whose evidence is damaged).
func TestDamagedBoundGatewayRecordsAreNonCertifiable(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	for name, damage := range map[string]func(t *testing.T, db string){
		"tokens edited": func(t *testing.T, db string) {
			conn, err := sql.Open("sqlite3", db)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Exec(`UPDATE requests SET total_tokens = total_tokens + 1`); err != nil {
				t.Fatal(err)
			}
		},
		"file removed": func(t *testing.T, db string) {
			if err := os.Remove(db); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			out := copyOut(t, f)
			damage(t, filepath.Join(out, "gateway-usage.db"))
			res := one(t, out, Options{Runs: []string{seq.RunID}})
			if res.Verdict != NonCertifiable || !strings.Contains(res.Reason, "does not verify") {
				t.Fatalf("%+v", res)
			}
		})
	}
}

// An interrupted run is not a complete history: its replay is non_certifiable.
func TestAnInterruptedRunIsNonCertifiable(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	out := copyOut(t, f)
	completed := 0
	copyRun(t, out, seq.RunID, edits{stop: func(ev evidence.StoredEvent) bool {
		if ev.Type == event.TypeMemberCompleted {
			completed++
		}
		return completed == 1 && ev.Type == event.TypeMemberStarted
	}})
	res := one(t, out, Options{Runs: []string{seq.RunID}})
	if res.Verdict != NonCertifiable || !strings.Contains(res.Reason, "interrupted") {
		t.Fatalf("%+v", res)
	}
}

// A dry_run simulated its effects: its replay is non_certifiable, and a replay asked to run it
// live is refused.
func TestADryRunIsNonCertifiable(t *testing.T) {
	t.Parallel()
	f := build(t, "dryrun", harness.Options{Formations: []string{"sequential"}, Mode: "dry_run"})
	out := copyOut(t, f)
	run := f.runs[0].RunID
	if res := one(t, out, Options{Runs: []string{run}}); res.Verdict != NonCertifiable || !strings.Contains(res.Reason, "dry_run") {
		t.Fatalf("%+v", res)
	}
	if res := one(t, out, Options{Runs: []string{run}, Mode: "live"}); res.Verdict != Refused || !strings.Contains(res.Reason, "mode dry_run recorded, live asked") {
		t.Fatalf("asked live: %+v", res)
	}
}

// A resumed run replays as the chain of its lineage: the paused run (its publish unknown) and the
// resume that reconciled it through the receipt, each in a replay run of its own.
func TestAResumedRunReplaysAsAChain(t *testing.T) {
	t.Parallel()
	f := resumed(t)
	out := copyOut(t, f)
	res := verify(t, out, Options{All: true})
	if len(res) != 1 || res[0].RunID != f.runs[1].RunID {
		t.Fatalf("--all replays each lineage once, from its last run: %+v", res)
	}
	r := res[0]
	if r.Verdict != Exact || len(r.Chain) != 2 || r.Chain[0].RunID != f.runs[0].RunID || r.Chain[1].RunID != f.runs[1].RunID ||
		r.Chain[0].Verdict != Exact || r.Chain[1].Verdict != Exact || r.ReplayRunID != r.Chain[1].ReplayRunID {
		t.Fatalf("%+v", r)
	}
	s := openStore(t, out, true)
	evs, err := s.Events(context.Background(), r.Chain[1].ReplayRunID)
	if err != nil {
		t.Fatal(err)
	}
	started := payload[event.ReplayStarted](t, evs[0])
	if started.ReplaysRunID != f.runs[1].RunID || !slices.Equal(started.Lineage, []string{f.runs[0].RunID, f.runs[1].RunID}) ||
		!slices.Equal(started.ChainReplays, []string{r.Chain[0].ReplayRunID}) {
		t.Errorf("replay_started %+v", started)
	}
	reconciled := false
	for _, ev := range evs {
		if ev.Type == event.TypeToolResult && payload[event.ToolResult](t, ev).Source == "reconciliation" {
			reconciled = true
		}
	}
	if !reconciled {
		t.Error("the replayed resume did not reconcile the unknown effect through the served receipt")
	}
}

// A tool result changed in the trace, consistently (re-chained and finalized, so assay verify cannot
// tell), is a mismatch: the member's next request carried the result the provider was actually sent.
func TestAToolResultAlteredInTheTraceIsAMismatch(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	out := copyOut(t, f)
	altered := false
	copyRun(t, out, seq.RunID, edits{event: func(ev *evidence.StoredEvent) bool {
		if ev.Type != event.TypeToolResult || altered || ev.MemberID != "exec-1" {
			return true
		}
		p := payload[event.ToolResult](t, *ev)
		p.Result = "wrote double.go (1 bytes)"
		raw, err := event.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		ev.Payload, altered = raw, true
		return true
	}})
	s := openStore(t, out, true)
	if vs, err := s.Verify(context.Background(), seq.RunID); err != nil || vs[0].Status != evidence.VerifyOK {
		t.Fatalf("the rewrite must verify: %+v %v", vs, err)
	}
	s.Close()
	res := one(t, out, Options{Runs: []string{seq.RunID}})
	d := res.FirstDivergence
	if res.Verdict != Mismatch || d == nil || d.Member != "exec-1" || d.Seq == nil || *d.Seq != 1 || !strings.HasPrefix(d.Pointer, "/messages/3") {
		t.Fatalf("%+v (first divergence %+v)", res, d)
	}
	if !strings.Contains(string(d.Replayed), "(1 bytes)") {
		t.Errorf("the replayed request should carry the served (altered) result: %s", d.Replayed)
	}
}

// --checks re-derives every check and the verdict from the replay; a recorded check status the
// evidence does not give is a mismatch on the verdict naming the check.
func TestChecksRederiveTheVerdict(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	out := copyOut(t, f)
	res := one(t, out, Options{Runs: []string{seq.RunID}, Checks: true})
	if res.Verdict != Exact || len(res.Checks) != len(harness.Checks()) {
		t.Fatalf("%+v", res)
	}
	for _, c := range res.Checks {
		if c.RecordedStatus != c.RederivedStatus || c.RecordedStatus != evidence.CheckPassed {
			t.Errorf("check %+v", c)
		}
	}
	copyRun(t, out, seq.RunID, edits{
		check: func(c *evidence.Check) {
			if c.Name == "tests" {
				c.Status, c.Detail = evidence.CheckFailed, "exec-1 failed 0/1"
			}
		},
		verdict: func(v *evidence.Verdict) {
			*v = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"tests failed"}}
		},
	})
	res = one(t, out, Options{Runs: []string{seq.RunID}, Checks: true})
	if d := res.FirstDivergence; res.Verdict != Mismatch || d == nil || d.Check != "tests" || string(d.Recorded) != `"failed"` || string(d.Replayed) != `"passed"` {
		t.Fatalf("%+v (first divergence %+v)", res, res.FirstDivergence)
	}
}

// Two live runs of one case compare exchange by exchange: the reference provider's tool call ids
// derive from the session, so they diverge at exec-1's first reply. Runs of other cases are refused.
func TestAgainstComparesTwoLiveRuns(t *testing.T) {
	t.Parallel()
	f := live(t)
	first, second := f.runs[0], f.runs[2]
	if first.Catalog != "sequential" || second.Catalog != "sequential" {
		t.Fatalf("fixture %+v", f.runs)
	}
	res := one(t, f.out, Options{Runs: []string{first.RunID}, Against: second.RunID})
	d := res.FirstDivergence
	if res.Verdict != Mismatch || res.AgainstRunID != second.RunID || d == nil || d.Member != "exec-1" || d.Seq == nil || *d.Seq != 0 ||
		d.Pointer != "/reply/tool_calls/0/id" {
		t.Fatalf("%+v (first divergence %+v)", res, d)
	}
	if res := one(t, f.out, Options{Runs: []string{first.RunID}, Against: runOf(t, f, "parallel").RunID}); res.Verdict != Refused || !strings.Contains(res.Reason, "formation") {
		t.Fatalf("against another case: %+v", res)
	}
}

// What the envelope does not declare, or a tolerance version this build does not have, cannot
// certify a replay; both are named.
func TestUndeclaredEntropyAndUnknownVersionsAreNonCertifiable(t *testing.T) {
	t.Parallel()
	f := live(t)
	seq := runOf(t, f, "sequential")
	for name, c := range map[string]struct {
		edit func(*evidence.Envelope)
		want []string
	}{
		"no wall_clock": {func(e *evidence.Envelope) {
			e.EntropySources = slices.DeleteFunc(slices.Clone(e.EntropySources), func(s string) bool { return s == "wall_clock" })
		}, []string{"wall_clock"}},
		"exact@2": {func(e *evidence.Envelope) { e.ReplayTolerance = "exact@2" }, []string{"exact@2", "exact@1"}},
	} {
		t.Run(name, func(t *testing.T) {
			out := copyOut(t, f)
			copyRun(t, out, seq.RunID, edits{envelope: c.edit})
			res := one(t, out, Options{Runs: []string{seq.RunID}})
			if res.Verdict != NonCertifiable {
				t.Fatalf("%+v", res)
			}
			for _, w := range c.want {
				if !strings.Contains(res.Reason, w) {
					t.Errorf("reason %q does not name %s", res.Reason, w)
				}
			}
		})
	}
}

// Bad input writes nothing.
func TestBadInputIsRefusedBeforeWriting(t *testing.T) {
	t.Parallel()
	f, results := replayed(t)
	out := copyOut(t, f)
	seq := runOf(t, f, "sequential").RunID
	replayed := results[0].ReplayRunID
	if replayed == "" {
		t.Fatalf("the replayed fixture holds no replay run: %+v", results)
	}
	count := func() int {
		s := openStore(t, out, true)
		runs, err := s.Runs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		return len(runs)
	}
	before := count()
	for name, o := range map[string]Options{
		"no selection":       {},
		"two selections":     {Runs: []string{seq}, All: true},
		"an unknown run":     {Runs: []string{"run-nope"}},
		"a replay run":       {Runs: []string{replayed}},
		"an unknown policy":  {Runs: []string{seq}, Tolerance: "loose"},
		"a future version":   {Runs: []string{seq}, Tolerance: "exact@2"},
		"an unknown mode":    {Runs: []string{seq}, Mode: "pretend"},
		"no policy file":     {Runs: []string{seq}, PolicyFile: filepath.Join(out, "nope.yaml")},
		"against and checks": {Runs: []string{seq}, Against: seq, Checks: true},
	} {
		o.Store = storeOf(out)
		if _, err := Verify(context.Background(), o); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: %v, want ErrBadInput", name, err)
		}
	}
	if _, err := Verify(context.Background(), Options{Store: filepath.Join(t.TempDir(), "evidence.duckdb"), All: true}); !errors.Is(err, ErrBadInput) {
		t.Errorf("no store: %v", err)
	}
	if after := count(); after != before {
		t.Errorf("bad input wrote %d runs", after-before)
	}
}

// The tool server refuses a call the recording did not dispatch, and one whose arguments are not the
// recorded intent's, naming the first differing argument.
func TestTheToolServerServesOnlyTheRecordedCall(t *testing.T) {
	rec := &recording{run: evidence.RunSummary{RunID: "run-1"}, calls: map[string]*recordedCall{
		"run-1:exec-1:r0-c1": {intent: tool.Intent{MemberID: "exec-1", PayloadSHA256: "0000", Arguments: json.RawMessage(`{"content":"a","path":"x"}`), Tool: "write_file"},
			intentSeq: 7, outcome: &tool.Outcome{State: tool.StateSucceeded, Result: "wrote x (1 bytes)"}},
	}}
	srv := &toolServer{rec: rec}
	b := tool.NewBoundary(srv.wrap(tool.Builtins()), discard{})
	dir := t.TempDir()
	for _, c := range []tool.Call{
		{RunID: "run-1", MemberID: "exec-1", CallID: "r0-c1", Tool: "write_file", Arguments: `{"path":"x","content":"b"}`},
		{RunID: "run-1", MemberID: "exec-1", CallID: "r0-c2", Tool: "write_file", Arguments: `{"path":"x","content":"a"}`},
	} {
		c.Root, c.Allowed, c.SessionID = dir, []string{"write_file"}, "run-1-exec-1"
		out, err := b.Invoke(context.Background(), c)
		if err != nil || out.State != tool.StateFailed {
			t.Errorf("%s: %+v %v", c.CallID, out, err)
		}
	}
	divs := srv.divergences()
	if len(divs) != 2 || divs[0].d.Pointer != "/payload/arguments/content" || string(divs[0].d.Recorded) != `"a"` || divs[0].order != 7 ||
		divs[1].d.CallID != "run-1:exec-1:r0-c2" || srv.count() != 0 {
		t.Fatalf("%+v", divs)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused call wrote a file")
	}
}

type discard struct{}

func (discard) Intent(context.Context, tool.Intent) error   { return nil }
func (discard) Outcome(context.Context, tool.Outcome) error { return nil }

// A streamed run, its tool-call arguments split across chunks and one response without usage,
// replays exact: the cassette serves the recorded event streams to the runtime's own stream reader.
func TestAStreamedRunReplaysExact(t *testing.T) {
	t.Parallel()
	f := build(t, "stream", harness.Options{Formations: []string{"parallel+vote"}, Stream: true,
		ReferenceFaults: []reference.Fault{{Member: "exec-2", Turn: 0, Kind: reference.FaultSplitToolArgs}, {Member: "exec-3", Turn: 1, Kind: reference.FaultDropUsage}}})
	out := copyOut(t, f)
	res := one(t, out, Options{Runs: []string{f.runs[0].RunID}})
	if res.Verdict != Exact || res.Requests != 6 {
		t.Fatalf("%+v", res)
	}
}
