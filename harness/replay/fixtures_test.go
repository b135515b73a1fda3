package replay

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/testlang"
	"github.com/assay-audit/assay/internal/testroot"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// Fixtures are matrix runs on the embedded reference provider, each made once per test binary
// in a directory of its own, and copied for every test that writes (a replay records a run).
// They run in Python where pytest is found (testlang.Cheap): no test here is about the Go path, and
// replaying a run re-runs its checks, so a Go fixture would pay go test and go build twice. The Go
// path is covered by harness's catalog test; without pytest the fixtures run in Go.

var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "assay-replay-fixtures-*", &fixtureRoot))
}

type fixture struct {
	out  string
	runs []harness.CaseResult
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

// policyAllowAll is a policy file that allows every call, so that a run has a policy digest.
const policyAllowAll = "version: 1\ndefault: allow\nrules: []\n"

// build returns the named fixture, making it on first use: each element of sets is one matrix run
// (harness.Run) into the same output directory, in order, and extra runs after them; a set that
// names no language runs in testlang.Cheap's.
func build(t *testing.T, name string, sets ...harness.Options) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the matrix on the reference provider; skipped with -short")
	}
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f, ok := fixtures[name]; ok {
		return f
	}
	f := &fixture{out: filepath.Join(fixtureRoot, name)}
	for _, o := range sets {
		o.OutDir = f.out
		if o.Language == "" {
			o.Language = testlang.Cheap(t)
		}
		sum, err := harness.Run(context.Background(), o)
		if err != nil {
			t.Fatalf("fixture %s: %v", name, err)
		}
		f.runs = append(f.runs, sum.Cases...)
	}
	fixtures[name] = f
	return f
}

// live is sequential and parallel, then sequential again (a second live run of one case).
func live(t *testing.T) *fixture {
	return build(t, "live", harness.Options{Formations: []string{"sequential", "parallel"}}, harness.Options{Formations: []string{"sequential"}})
}

// replayed is a copy of live whose sequential and parallel runs were replayed, both by one Verify
// (invocation "inv-replay"): the tests that need a replay run in a store read it from a copy of this.
func replayed(t *testing.T) (*fixture, []Result) {
	t.Helper()
	f := live(t)
	runs := []string{runOf(t, f, "sequential").RunID, runOf(t, f, "parallel").RunID}
	replayedOnce.Do(func() {
		out := filepath.Join(fixtureRoot, "replayed")
		if err := testroot.CopyTree(f.out, out); err != nil {
			replayedErr = err
			return
		}
		res, err := Verify(context.Background(), Options{Store: storeOf(out), InvocationID: "inv-replay", Runs: runs})
		replayedFixture, replayedResults, replayedErr = &fixture{out: out, runs: f.runs}, res, err
	})
	if replayedErr != nil {
		t.Fatalf("fixture replayed: %v", replayedErr)
	}
	return replayedFixture, replayedResults
}

var (
	replayedOnce    sync.Once
	replayedFixture *fixture
	replayedResults []Result
	replayedErr     error
)

// volatilePolicy guards the one write of the volatile fixture's policy file: parallel tests replay
// its run, which reads the file, so it is never rewritten while they may.
var volatilePolicy sync.Once

// volatile is sequential decided by a policy file, bound to the volatile tolerance policy.
func volatile(t *testing.T) *fixture {
	t.Helper()
	pol := filepath.Join(fixtureRoot, "allow-all.yaml")
	var err error
	volatilePolicy.Do(func() { err = os.WriteFile(pol, []byte(policyAllowAll), 0o644) })
	if err != nil {
		t.Fatal(err)
	}
	return build(t, "volatile", harness.Options{Formations: []string{"sequential"}, PolicyFile: pol, ReplayTolerance: "volatile"})
}

// resumed is sequential+remote whose exec-1 publish ends unknown (the effect service answers 500
// after committing it): the run pauses, and a resume reconciles it through the receipt.
func resumed(t *testing.T) *fixture {
	t.Helper()
	f := build(t, "resumed", harness.Options{Formations: []string{"sequential+remote"},
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 1, Kind: reference.FaultHTTP500AfterCommit}}})
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if len(f.runs) == 1 {
		res, err := harness.Resume(context.Background(), harness.Options{OutDir: f.out}, f.runs[0].RunID)
		if err != nil {
			t.Fatalf("fixture resumed: %v", err)
		}
		if res.Verdict.Verdict != evidence.VerdictAccepted {
			t.Fatalf("fixture resumed: the resume was %+v", res.Verdict)
		}
		f.runs = append(f.runs, res)
	}
	return f
}

// copyOut copies a fixture's output directory for a test that writes into it.
func copyOut(t *testing.T, f *fixture) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	if err := testroot.CopyTree(f.out, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

func storeOf(out string) string { return filepath.Join(out, "evidence.duckdb") }

// verify replays with opts (Store set to out's) and returns the results.
func verify(t *testing.T, out string, opts Options) []Result {
	t.Helper()
	opts.Store = storeOf(out)
	res, err := Verify(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func one(t *testing.T, out string, opts Options) Result {
	t.Helper()
	res := verify(t, out, opts)
	if len(res) != 1 {
		t.Fatalf("%d results, want 1: %+v", len(res), res)
	}
	return res[0]
}

func openStore(t *testing.T, out string, readOnly bool) *evidence.Store {
	t.Helper()
	s, err := evidence.Open(context.Background(), storeOf(out), evidence.OpenOptions{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// edits change a run as copyRun writes it again.
type edits struct {
	// envelope edits the run's envelope.
	envelope func(*evidence.Envelope)
	// event edits an event (false drops it); stop ends the copy before the event, leaving the run
	// open (it is interrupted once the store is opened again).
	event func(ev *evidence.StoredEvent) bool
	stop  func(ev evidence.StoredEvent) bool
	// check edits a check; verdict the verdict.
	check   func(*evidence.Check)
	verdict func(*evidence.Verdict)
}

// copyRun writes run runID of the store in out into a new store that replaces it (the rest of out
// — gateway and effect databases — is kept), with the edits applied, re-chained and finalized as
// the store does: a consistent rewrite, which assay verify cannot tell from the original.
func copyRun(t *testing.T, out, runID string, e edits) {
	t.Helper()
	ctx := context.Background()
	src := openStore(t, out, true)
	run, err := src.Run(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := src.Events(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := src.Checkpoints(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for _, a := range run.Artifacts {
		if data[a.Digest], err = src.Artifact(ctx, a.Digest); err != nil {
			t.Fatal(err)
		}
	}
	src.Close()
	if err := os.Remove(storeOf(out)); err != nil {
		t.Fatal(err)
	}
	os.Remove(storeOf(out) + ".wal")
	dst, err := evidence.Open(ctx, storeOf(out), evidence.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	env := run.Envelope
	if e.envelope != nil {
		e.envelope(&env)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(dst.OpenRun(ctx, runID, env, ""))
	for _, a := range run.Artifacts {
		_, err := dst.PutArtifact(ctx, runID, a.Name, a.MediaType, data[a.Digest])
		must(err)
	}
	checks := map[string]evidence.Check{}
	for _, c := range run.Checks {
		if e.check != nil {
			e.check(&c)
		}
		checks[c.Name] = c
	}
	for _, ev := range evs {
		if e.stop != nil && e.stop(ev) {
			return
		}
		switch ev.Type {
		case "check_recorded":
			var p struct{ Name string }
			must(json.Unmarshal(ev.Payload, &p))
			if p.Name == "usage" {
				must(dst.RecordUsageCalls(ctx, runID, run.UsageCalls...))
				must(dst.RecordUsageVerdicts(ctx, runID, run.UsageVerdicts))
			}
			must(dst.RecordCheck(ctx, runID, checks[p.Name]))
			continue
		case "run_finalized":
			v := *run.Verdict
			if e.verdict != nil {
				e.verdict(&v)
			}
			_, err := dst.Finalize(ctx, runID, v)
			must(err)
			continue
		}
		if e.event != nil && !e.event(&ev) {
			continue
		}
		stored, err := dst.AppendEvent(ctx, runID, evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: ev.SessionID,
			Time: ev.Time, Payload: ev.Payload})
		must(err)
		for _, cp := range cps {
			if cp.Seq == stored.Seq && ev.Type == event.TypeCheckpoint {
				_, err := dst.SaveCheckpoint(ctx, runID, cp.Seq, cp.State)
				must(err)
			}
		}
	}
}

// rawExec runs SQL statements on the store file of out, outside the store's API (tampering).
func rawExec(t *testing.T, out, stmt string, args ...any) {
	t.Helper()
	db, err := sql.Open("duckdb", storeOf(out))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// payload decodes an event's payload.
func payload[T event.Payload](t *testing.T, ev evidence.StoredEvent) T {
	t.Helper()
	p, err := event.Decode[T](ev.Type, ev.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
