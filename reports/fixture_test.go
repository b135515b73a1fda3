package reports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/testroot"
)

// fixtureRoot holds the stores shared by the tests of this binary; TestMain removes it after them.
var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "reports-test-", &fixtureRoot))
}

// sharedStore is a store written once per test binary by the first test that needs it.
type sharedStore[T any] struct {
	once  sync.Once
	value T
	err   string
}

// get writes the store with build into a new directory under fixtureRoot on the first call and
// returns what build returned; a later call fails when that first build failed.
func (s *sharedStore[T]) get(t testing.TB, name string, build func(t testing.TB, dir string) T) T {
	t.Helper()
	s.once.Do(func() {
		s.err = "writing the " + name + " store failed in " + t.Name()
		dir, err := os.MkdirTemp(fixtureRoot, name+"-")
		if err != nil {
			t.Fatal(err)
		}
		s.value = build(t, dir)
		s.err = ""
	})
	if s.err != "" {
		t.Fatal(s.err)
	}
	return s.value
}

// copyDir copies the directory src whole (a store, its artifacts, files beside it) to a new
// directory of t's own and returns it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

var theFixture sharedStore[fixture]

// sharedFixture returns the fixture written once per test binary; callers only read it (open the
// store read-only, write nothing under out). A test that changes it takes fixtureCopy.
func sharedFixture(t testing.TB) fixture {
	t.Helper()
	return theFixture.get(t, "fixture", buildFixture)
}

// fixtureCopy returns a copy of the shared fixture's out directory, store included, in a directory
// of t's own, for a test that changes the store or writes under out. The copy's recorded test log
// path is still the shared fixture's (the store records it absolute).
func fixtureCopy(t testing.TB) fixture {
	t.Helper()
	f := sharedFixture(t)
	f.out = copyDir(t, f.out)
	f.store = filepath.Join(f.out, filepath.Base(f.store))
	return f
}

// fixture is a store written through the evidence API as the harness writes one: an older run
// without case or invocation, then invocation inv-a (an accepted case with usage from every source,
// a rejected case whose failed check carries structured evidence, a case left open, i.e.
// interrupted to a reader), then invocation inv-b (a resume of the open run and a replay of the
// accepted one).
type fixture struct {
	store, out                                     string
	old, accepted, rejected, open, resumed, replay string
	acceptedTerminal                               string
	testLog                                        string // OUT-relative path of the accepted case's test log
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func fixtureEnvelope(caseName, formation, inv string) evidence.Envelope {
	env := evidence.Environment{FingerprintVersion: evidence.EnvironmentFingerprintV2, Assay: "0.1.0", Go: "go1.26.8",
		GOOS: "linux", GOARCH: "amd64", VCSRevision: "0123456789abcdef0123456789abcdef01234567"}
	fp, _ := env.Fingerprint()
	return evidence.Envelope{Tenant: "local", ManifestDigest: digestOf("manifest " + caseName), Mode: evidence.ModeLive,
		PolicyDigest: digestOf("policy"), EnvironmentFingerprint: fp, ReplayTolerance: "exact", Provider: "reference",
		Model: "assay-reference-1", Formation: formation, TaskProfile: "standard", Language: "go", Case: caseName, InvocationID: inv}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ev(typ, member string, at time.Time, payload string) evidence.Event {
	return evidence.Event{Type: typ, MemberID: member, SessionID: map[bool]string{true: "s-" + member}[member != ""], Time: at,
		Payload: json.RawMessage(payload)}
}

// buildFixture writes the fixture store in out.
func buildFixture(t testing.TB, out string) fixture {
	t.Helper()
	ctx := context.Background()
	f := fixture{out: out, store: filepath.Join(out, "evidence.duckdb"), old: "run-old", accepted: "run-acc", rejected: "run-rej",
		open: "run-open", resumed: "run-res", replay: "run-rpl"}
	s, err := evidence.Open(ctx, f.store, evidence.OpenOptions{Command: "fixture"})
	must(t, err)
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	old := fixtureEnvelope("", "parallel", "")
	old.EnvironmentFingerprint = digestOf("v1 environment")
	must(t, s.OpenRun(ctx, f.old, old, ""))
	must(t, s.RecordCheck(ctx, f.old, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "ok"}))
	_, err = s.Finalize(ctx, f.old, evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(t, err)

	tok := func(n int64) *int64 { return &n }
	// inv-a: accepted, with events for phases, an approval, usage and a test log on disk.
	envA := fixtureEnvelope("parallel+vote", "parallel", "inv-a")
	must(t, s.OpenRun(ctx, f.accepted, envA, ""))
	pre, _ := evidence.Environment{FingerprintVersion: evidence.EnvironmentFingerprintV2, Assay: "0.1.0", Go: "go1.26.8",
		GOOS: "linux", GOARCH: "amd64", VCSRevision: "0123456789abcdef0123456789abcdef01234567"}.Canonical()
	_, err = s.PutArtifact(ctx, f.accepted, evidence.EnvironmentArtifact, "application/json", pre)
	must(t, err)
	_, err = s.PutArtifact(ctx, f.accepted, "manifest.json", "application/json", []byte(`{"catalog":"parallel+vote"}`))
	must(t, err)
	_, err = s.AppendEvents(ctx, f.accepted, []evidence.Event{
		ev("team_started", "", t0, `{"formation":"parallel"}`),
		ev("member_started", "exec-1", t0.Add(time.Second), `{"formation":"parallel"}`),
		ev("tool_call", "exec-1", t0.Add(2*time.Second), fmt.Sprintf(`{"call_id":"c1","idempotency_key":"k1","tool":"write_file","payload_sha256":%q,"approval":{"approver":"alice","source":"file","expires_at":"2026-12-02T00:00:00Z"}}`, digestOf("payload"))),
		ev("tool_result", "exec-1", t0.Add(3*time.Second), `{"call_id":"c1","idempotency_key":"k1","state":"succeeded","tool":"write_file"}`),
		ev("member_completed", "exec-1", t0.Add(4*time.Second), `{"formation":"parallel"}`),
		ev("team_completed", "", t0.Add(5*time.Second), `{"formation":"parallel","success":true}`),
	})
	must(t, err)
	f.testLog = filepath.ToSlash(filepath.Join("cases", f.accepted, "exec-1.go-test.json"))
	must(t, os.MkdirAll(filepath.Join(out, "cases", f.accepted), 0o755))
	must(t, os.WriteFile(filepath.Join(out, filepath.FromSlash(f.testLog)), []byte("{}\n"), 0o644))
	testsEvidence := fmt.Sprintf(`{"exec-1":{"Duration":2500000000,"OutputPath":%q,"Verdict":"passed"}}`, filepath.Join(out, filepath.FromSlash(f.testLog)))
	must(t, s.RecordCheck(ctx, f.accepted, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed,
		Detail: "exec-1 passed 1/1", Evidence: json.RawMessage(testsEvidence)}))
	for _, src := range []string{"store", "wire", "gateway"} {
		must(t, s.RecordUsage(ctx, f.accepted, evidence.UsageRow{MemberID: "exec-1", SessionID: "s-exec-1", Source: src, State: "reported",
			Requests: 2, PromptTokens: tok(700), CompletionTokens: tok(300), TotalTokens: tok(1000)}))
	}
	must(t, s.RecordUsageVerdicts(ctx, f.accepted, []evidence.UsageVerdict{{MemberID: "exec-1", SessionID: "s-exec-1",
		Verdict: "conserved", Detail: "equal across wire, store and gateway"}}))
	fin, err := s.Finalize(ctx, f.accepted, evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(t, err)
	f.acceptedTerminal = fin.TerminalHash

	// inv-a: rejected; its formation check's evidence is a nested object (never Go map syntax).
	must(t, s.OpenRun(ctx, f.rejected, fixtureEnvelope("parallel+judge", "parallel", "inv-a"), ""))
	must(t, s.RecordCheck(ctx, f.rejected, evidence.Check{Name: "formation", Required: true, Status: evidence.CheckFailed,
		Detail: "judge chose exec-2 -> the raw replies name exec-1", Evidence: json.RawMessage(`{"votes":{"double.go":3,"other.go":1}}`)}))
	for _, src := range []string{"store", "gateway"} {
		must(t, s.RecordUsage(ctx, f.rejected, evidence.UsageRow{MemberID: "exec-1", SessionID: "s-exec-1", Source: src, State: "reported",
			Requests: 1, PromptTokens: tok(10), CompletionTokens: tok(5), TotalTokens: tok(15)}))
	}
	must(t, s.RecordUsage(ctx, f.rejected, evidence.UsageRow{MemberID: "exec-1", SessionID: "s-exec-1", Source: "wire", State: "unknown", Requests: 1}))
	must(t, s.RecordUsageVerdicts(ctx, f.rejected, []evidence.UsageVerdict{{MemberID: "exec-1", SessionID: "s-exec-1",
		Verdict: "unknown", Detail: "wire reported none"}}))
	_, err = s.Finalize(ctx, f.rejected, evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"formation failed"}})
	must(t, err)

	// inv-a: left open (interrupted to every reader).
	must(t, s.OpenRun(ctx, f.open, fixtureEnvelope("sequential", "sequential", "inv-a"), ""))
	_, err = s.AppendEvent(ctx, f.open, ev("team_started", "", t0.Add(time.Minute), `{"formation":"sequential"}`))
	must(t, err)
	_, err = s.SaveCheckpoint(ctx, f.open, 1, json.RawMessage(`{}`))
	must(t, err)

	// inv-b: a resume of the open run and a replay of the accepted one.
	must(t, s.OpenRun(ctx, f.resumed, fixtureEnvelope("sequential", "sequential", "inv-b"), f.open))
	_, err = s.AppendEvent(ctx, f.resumed, ev("run_resumed", "", t0.Add(2*time.Minute),
		fmt.Sprintf(`{"resumes_run_id":%q,"team_run_id":%q,"lineage":[%q],"checkpoint_seq":1,"checkpoint_hash":%q,"turns":0,"pauses":[]}`,
			f.open, f.open, f.open, digestOf("cp"))))
	must(t, err)
	_, err = s.PutArtifact(ctx, f.resumed, "manifest.json", "application/json", []byte(`{"catalog":"sequential"}`))
	must(t, err)
	must(t, s.RecordCheck(ctx, f.resumed, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "ok"}))
	_, err = s.Finalize(ctx, f.resumed, evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(t, err)
	rpl := fixtureEnvelope("parallel+vote", "parallel", "inv-b")
	rpl.Provider = replayProvider
	must(t, s.OpenRun(ctx, f.replay, rpl, f.accepted))
	_, err = s.AppendEvents(ctx, f.replay, []evidence.Event{
		ev("replay_started", "", t0.Add(3*time.Minute), fmt.Sprintf(`{"replays_run_id":%q,"tolerance":"exact@1"}`, f.accepted)),
		ev("replay_verdict", "", t0.Add(3*time.Minute+time.Second), `{"verdict":"exact","first_divergence":null,"requests":2,"tool_calls":1}`),
	})
	must(t, err)
	must(t, s.RecordCheck(ctx, f.replay, evidence.Check{Name: "replay", Required: true, Status: evidence.CheckPassed, Detail: "exact"}))
	_, err = s.Finalize(ctx, f.replay, evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(t, err)
	return f
}

// loadFixture opens the fixture's store read-only and loads sel.
func loadFixture(t testing.TB, f fixture, sel Selection) Report {
	t.Helper()
	ctx := context.Background()
	s, err := evidence.Open(ctx, f.store, evidence.OpenOptions{ReadOnly: true})
	must(t, err)
	defer s.Close()
	r, err := Load(ctx, s, sel)
	must(t, err)
	return r
}
