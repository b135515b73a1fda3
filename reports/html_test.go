package reports

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/browsertest"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func i64p(v int64) *int64 { return &v }

// storeRun is one run the test store records.
type storeRun struct {
	id, caseName, formation string
	checks                  []evidence.Check
	verdict                 string
	gatewayUnknown          bool
}

// buildStore records runs through the evidence API, as the harness does: envelope, events,
// checks, usage from three sources, finalization. It returns the store's path.
func buildStore(t *testing.T, runs []storeRun) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "assay-out", "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "reports test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Event times a little in the past: the store stamps checks and finalization with the clock.
	base := time.Now().UTC().Add(-20 * time.Second)
	for i, r := range runs {
		env := evidence.Envelope{Tenant: "tenant-a", ManifestDigest: sha("manifest " + r.id), Mode: evidence.ModeLive,
			PolicyDigest: sha("policy"), EnvironmentFingerprint: sha("env"), EntropySources: []string{"clock"},
			ReplayTolerance: "exact", Provider: "reference", BaseURL: "http://127.0.0.1:0/v1", Model: "assay-reference-1",
			Formation: r.formation, TaskProfile: "go-double", Language: "go", Case: r.caseName, InvocationID: "inv-test-1"}
		if err := s.OpenRun(ctx, r.id, env, ""); err != nil {
			t.Fatalf("open %s: %v", r.id, err)
		}
		at := base.Add(time.Duration(i) * time.Second)
		evs := []evidence.Event{
			{Type: "team_started", Time: at, Payload: json.RawMessage(`{}`)},
			{Type: "team_completed", Time: at.Add(time.Duration(4+3*i) * time.Second), Payload: json.RawMessage(`{}`)},
		}
		if _, err := s.AppendEvents(ctx, r.id, evs); err != nil {
			t.Fatalf("events of %s: %v", r.id, err)
		}
		for _, c := range r.checks {
			if err := s.RecordCheck(ctx, r.id, c); err != nil {
				t.Fatalf("check %s of %s: %v", c.Name, r.id, err)
			}
		}
		var rows []evidence.UsageRow
		for _, m := range []string{"exec-1", "reviewer"} {
			for _, src := range []string{"store", "wire", "gateway"} {
				row := evidence.UsageRow{MemberID: m, SessionID: r.id + "-" + m, Source: src, State: "reported", Requests: 2,
					PromptTokens: i64p(300), CompletionTokens: i64p(120), TotalTokens: i64p(420)}
				if src == "gateway" && r.gatewayUnknown {
					row.State, row.PromptTokens, row.CompletionTokens, row.TotalTokens = "unknown", nil, nil, nil
				}
				rows = append(rows, row)
			}
		}
		if err := s.RecordUsage(ctx, r.id, rows...); err != nil {
			t.Fatalf("usage of %s: %v", r.id, err)
		}
		if err := s.RecordUsageVerdicts(ctx, r.id, evidence.ReconcileUsageCalls(nil, rows)); err != nil {
			t.Fatalf("usage verdicts of %s: %v", r.id, err)
		}
		v := evidence.Verdict{Verdict: r.verdict}
		for _, c := range r.checks {
			if c.Status != evidence.CheckPassed && c.Required {
				v.Reasons = append(v.Reasons, "check "+c.Name+" "+c.Status+": "+c.Detail)
			}
		}
		if _, err := s.Finalize(ctx, r.id, v); err != nil {
			t.Fatalf("finalize %s: %v", r.id, err)
		}
	}
	return path
}

func passed(name string) evidence.Check {
	return evidence.Check{Name: name, Required: true, Status: evidence.CheckPassed, Detail: name + " ok"}
}

func testRuns() []storeRun {
	ok := []evidence.Check{passed("files"), passed("tests"), passed("oracle"), passed("sessions"), passed("usage")}
	bad := []evidence.Check{passed("files"),
		{Name: "tests", Required: true, Status: evidence.CheckFailed, Detail: "go test: FAIL double_test.go:12 <script>alert(1)</script>"},
		passed("oracle"), passed("sessions"),
		{Name: "usage", Required: true, Status: evidence.CheckUnknown, Detail: "gateway reported no usage for reviewer"}}
	return []storeRun{
		{id: "run-0001", caseName: "sequential", formation: "sequential", checks: ok, verdict: "accepted"},
		{id: "run-0002", caseName: "parallel+vote", formation: "parallel", checks: bad, verdict: "rejected", gatewayUnknown: true},
		{id: "run-0003", caseName: "parallel+judge", formation: "parallel", checks: ok, verdict: "accepted"},
	}
}

func loadReport(t *testing.T, path string) Report {
	t.Helper()
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true, Command: "reports test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := Load(ctx, s, Selection{All: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestHTMLInChromium renders a report built from a real evidence store and reads it back from
// the DOM of headless Chromium.
func TestHTMLInChromium(t *testing.T) {
	browsertest.Require(t)
	r := loadReport(t, buildStore(t, testRuns()))
	var buf bytes.Buffer
	if err := HTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "<script>alert(1)</script>") {
		t.Fatal("a check's detail reached the page unescaped")
	}
	p, dir := inChromium(t, buf.Bytes(), "report")

	rows, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("tr.case-row")].map(r => r.dataset.run)`)
	if err != nil {
		t.Fatal(err)
	}
	// Failures first: the rejected run leads.
	if strings.Join(rows, " ") != "run-0002 run-0001 run-0003" {
		t.Errorf("case rows = %v, want run-0002 (rejected) first, then run-0001, run-0003", rows)
	}
	for _, run := range testRuns() {
		checks, err := browsertest.Eval[map[string]string](p, fmt.Sprintf(
			`Object.fromEntries([...document.querySelectorAll('section.case[data-run=%q] tr.check')].map(r => [r.dataset.check, r.querySelector(".status").textContent]))`, run.id))
		if err != nil {
			t.Fatal(err)
		}
		if len(checks) != len(run.checks) {
			t.Errorf("%s: %d checks on the page, want %d: %v", run.id, len(checks), len(run.checks), checks)
		}
		for _, c := range run.checks {
			if checks[c.Name] != c.Status {
				t.Errorf("%s check %s: page says %q, store %q", run.id, c.Name, checks[c.Name], c.Status)
			}
		}
	}
	detail, err := browsertest.Eval[string](p, `document.querySelector('section.case[data-run="run-0002"] tr.check[data-check="tests"]').innerText`)
	if err != nil || !strings.Contains(detail, "<script>alert(1)</script>") {
		t.Errorf("the failed check's detail is not shown as text: %q (%v)", detail, err)
	}
	unknown, err := browsertest.Eval[string](p, `document.querySelector('section.case[data-run="run-0002"] table.members').innerText`)
	if err != nil || !strings.Contains(unknown, "unknown") || !strings.Contains(unknown, "run-0002-reviewer") {
		t.Errorf("members of run-0002 do not show the unknown gateway reading and session ids: %q (%v)", unknown, err)
	}
	banner, err := browsertest.Eval[bool](p, `!!document.querySelector(".banner") && document.querySelector(".banner").innerText.includes("Reference results")`)
	if err != nil || !banner {
		t.Errorf("no reference-provider banner (%v)", err)
	}
	svgs, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("svg.assay-chart")].filter(s => s.getBoundingClientRect().width > 200 && s.querySelectorAll("path").length > 5).map(s => s.getAttribute("aria-label"))`)
	if err != nil || len(svgs) != 3 {
		t.Errorf("charts drawn = %q (%v), want time, tokens and the check matrix", svgs, err)
	}
	screenAndPrint(t, p, dir, "report", func() {
		hidden, _ := browsertest.Eval[string](p, `getComputedStyle(document.querySelector("nav.screen-only")).display`)
		if hidden != "none" {
			t.Errorf("print layout keeps the navigation (display %q)", hidden)
		}
	})
}

// syntheticReport is a report of n cases shaped like a --formations all invocation: seven checks,
// two members with three usage sources, five phases, links and full hashes; every fifth case is
// rejected with a failed check and an unknown gateway reading.
func syntheticReport(n int) Report {
	created := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	inv := Invocation{ID: "inv-bench", StartedAt: created, Reference: true,
		Providers:     []Provider{{Name: "reference", BaseURL: "http://127.0.0.1:41234/v1", Model: "assay-reference-1", Reference: true}},
		Environments:  []Environment{{Fingerprint: sha("env"), Recorded: true, AssayVersion: "v0.9.0", Commit: sha("commit")[:40], GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "amd64", Runs: n}},
		PolicyDigests: []string{sha("policy")}, Modes: []string{"live"}}
	formations := []string{"sequential", "pipeline", "parallel", "hierarchical", "consensus", "reflection", "dynamic_router", "debate"}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("run-%016x", i*7919)
		fin := created.Add(time.Duration(i) * 30 * time.Second)
		wall := 12.5 + float64(i%7)
		c := Case{Name: formations[i%len(formations)] + "+go", NameRecorded: true, Formation: formations[i%len(formations)],
			Profile: "go-double", Language: "go", RunID: id, Kind: "case", Tenant: "default", Mode: "live", Status: "finalized",
			Verdict: "accepted", Provider: "reference", Model: "assay-reference-1", Reference: true, CreatedAt: created,
			FinalizedAt: &fin, WallSeconds: &wall, TerminalHash: sha(id + "t"), TerminalVersion: 2, ManifestDigest: sha(id + "m"),
			EnvelopeDigest: sha(id + "e"), PolicyDigest: sha("policy"), EnvironmentFingerprint: sha("env"), EventCount: 140, InvocationID: inv.ID}
		for _, name := range []string{"files", "tests", "oracle", "members", "sessions", "routing", "usage"} {
			c.Checks = append(c.Checks, Check{Name: name, Required: true, Status: "passed", Detail: name + ": every member's deliverable verified against its recorded artifact hash",
				Evidence: "exec-1: ok\nexec-2: ok"})
		}
		tok := func(v int64) *int64 { return &v }
		for _, m := range []string{"exec-1", "reviewer"} {
			mem := Member{ID: m, SessionID: id + "-" + m, Conservation: "conserved", ConservationDetail: "store, wire and gateway agree"}
			for _, src := range usageSources {
				u := Usage{Source: src, State: "reported", Requests: tok(3), PromptTokens: tok(812), CompletionTokens: tok(240), TotalTokens: tok(1052)}
				if i%5 == 0 && src == "gateway" {
					u = Usage{Source: src, State: "missing"}
					mem.Conservation, mem.ConservationDetail = "unknown", "gateway reported no usage"
				}
				mem.Usage = append(mem.Usage, u)
			}
			c.Members = append(c.Members, mem)
		}
		for _, ph := range []struct {
			n string
			s float64
		}{{"team", 8}, {"tests", 2.5}, {"oracle", 0.4}, {"checks", 3.5}, {"finalize", 0.1}} {
			s := ph.s
			c.Phases = append(c.Phases, Phase{Name: ph.n, Seconds: &s, Note: "from the event log"})
		}
		c.Links = []Link{{Label: "case directory", Path: "cases/" + id}, {Label: "test log exec-1", Path: "cases/" + id + "/exec-1/test.log"}}
		if i%5 == 0 {
			c.Verdict = "rejected"
			c.Reasons = []string{"check tests failed: go test: FAIL TestDouble (0.00s) double_test.go:12: Double(2) = 5, want 4"}
			c.Checks[1].Status, c.Checks[1].Detail = "failed", c.Reasons[0]
			c.Checks[6].Status = "unknown"
		}
		inv.Cases = append(inv.Cases, c)
	}
	return Report{SchemaVersion: ReportSchemaVersion, GeneratedAt: created, StorePath: "/tmp/assay-out/evidence.duckdb",
		Selection: "all runs", Invocations: []Invocation{inv}, Totals: totalsOf(inv.Cases)}
}

func TestHTML100RunsUnder2MB(t *testing.T) {
	var buf bytes.Buffer
	if err := HTML(&buf, syntheticReport(100)); err != nil {
		t.Fatal(err)
	}
	t.Logf("100 runs: %d bytes", buf.Len())
	if buf.Len() > 2<<20 {
		t.Errorf("HTML of 100 runs is %d bytes, over 2 MB", buf.Len())
	}
	if got := strings.Count(buf.String(), `<tr class="case-row"`); got != 100 {
		t.Errorf("%d case rows, want 100", got)
	}
}

func BenchmarkHTML1000Runs(b *testing.B) {
	r := syntheticReport(1000)
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := HTML(&buf, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes/report")
}
