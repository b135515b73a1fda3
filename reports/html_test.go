package reports

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/browsertest"
)

// TestHTMLInChromium renders a report built from a real evidence store and reads it back from
// the DOM of headless Chromium.
func TestHTMLInChromium(t *testing.T) {
	browsertest.Require(t)
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	var buf bytes.Buffer
	if err := HTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	p, dir := inChromium(t, buf.Bytes(), "report")

	rows, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("tr.case-row")].map(r => r.dataset.run)`)
	if err != nil {
		t.Fatal(err)
	}
	// Every case, invocation by invocation (latest first), failures first within each.
	if want := runIDs(r); strings.Join(rows, " ") != strings.Join(want, " ") || len(rows) != 6 {
		t.Errorf("case rows = %v, want %v", rows, want)
	}
	for _, inv := range r.Invocations {
		for _, c := range inv.Cases {
			checks, err := browsertest.Eval[map[string]string](p, fmt.Sprintf(
				`Object.fromEntries([...document.querySelectorAll('section.case[data-run=%q] tr.check')].map(r => [r.dataset.check, r.querySelector(".status").textContent]))`, c.RunID))
			if err != nil {
				t.Fatal(err)
			}
			if len(checks) != len(c.Checks) {
				t.Errorf("%s: %d checks on the page, want %d: %v", c.RunID, len(checks), len(c.Checks), checks)
			}
			for _, ch := range c.Checks {
				if checks[ch.Name] != ch.Status {
					t.Errorf("%s check %s: page says %q, the store %q", c.RunID, ch.Name, checks[ch.Name], ch.Status)
				}
			}
		}
	}
	text := func(run, sel string) string {
		t.Helper()
		s, err := browsertest.Eval[string](p, fmt.Sprintf(`[...document.querySelectorAll('section.case[data-run=%q] %s')].map(e => e.innerText).join("\n")`, run, sel))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct{ run, sel, want string }{
		{f.rejected, "table.members", "unknown"},                  // the wire reading the store says is unknown
		{f.rejected, "tr.check", "judge chose exec-2 -> the raw"}, // the failed check's detail, as text
		{f.accepted, "dl.facts", f.acceptedTerminal},              // the full terminal hash
		{f.accepted, "ul.links", f.testLog},                       // a relative link to the test log
		{f.accepted, "table", "alice"},                            // the approval's approver
		{f.resumed, "ul", f.open},                                 // lineage: resumes the open run
		{f.replay, "p", "exact"},                                  // the replay verdict
	} {
		if got := text(tc.run, tc.sel); !strings.Contains(got, tc.want) {
			t.Errorf("%s %s lacks %q: %q", tc.run, tc.sel, tc.want, got)
		}
	}
	// inv-b's runs recorded no usage: its totals say so instead of summing to 0.
	tokens, err := browsertest.Eval[string](p, `[...document.querySelector("#inv-inv-b dl.facts").children].find(e => e.previousElementSibling && e.previousElementSibling.textContent === "tokens").textContent`)
	if err != nil || tokens != "no usage recorded" {
		t.Errorf("inv-b tokens = %q (%v), want no usage recorded", tokens, err)
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
		Environments:  []Environment{{Fingerprint: digestOf("env"), Recorded: true, AssayVersion: "v0.9.0", Commit: digestOf("commit")[:40], GoVersion: "go1.26.8", GOOS: "linux", GOARCH: "amd64", Runs: n}},
		PolicyDigests: []string{digestOf("policy")}, Modes: []string{"live"}}
	formations := []string{"sequential", "pipeline", "parallel", "hierarchical", "consensus", "reflection", "dynamic_router", "debate"}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("run-%016x", i*7919)
		fin := created.Add(time.Duration(i) * 30 * time.Second)
		wall := 12.5 + float64(i%7)
		c := Case{Name: formations[i%len(formations)] + "+go", NameRecorded: true, Formation: formations[i%len(formations)],
			Profile: "go-double", Language: "go", RunID: id, Kind: "case", Tenant: "default", Mode: "live", Status: "finalized",
			Verdict: "accepted", Provider: "reference", Model: "assay-reference-1", Reference: true, CreatedAt: created,
			FinalizedAt: &fin, WallSeconds: &wall, TerminalHash: digestOf(id + "t"), TerminalVersion: 2, ManifestDigest: digestOf(id + "m"),
			EnvelopeDigest: digestOf(id + "e"), PolicyDigest: digestOf("policy"), EnvironmentFingerprint: digestOf("env"), EventCount: 140, InvocationID: inv.ID}
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

// A recorded text is shown as text: a check's detail that looks like markup never becomes markup.
func TestHTMLEscapesRecordedText(t *testing.T) {
	r := syntheticReport(1)
	c := &r.Invocations[0].Cases[0]
	c.Checks[1].Detail = `FAIL <script>alert(1)</script> "quoted" & more`
	c.Links = append(c.Links, Link{Label: "odd", Path: "javascript:alert(1)"})
	var buf bytes.Buffer
	if err := HTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "<script>") || strings.Contains(out, `href="javascript:`) {
		t.Errorf("recorded text reached the page as markup or a script link")
	}
	if !strings.Contains(out, "FAIL &lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the detail is not shown escaped")
	}
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

// BenchmarkHTMLStore1000Runs is `assay report --all --format html --no-verify` without the CLI:
// Load from a store of 1,000 runs (benchStore, built outside the timer) and render the HTML. The
// verification a default report adds is BenchmarkReportVerified's.
func BenchmarkHTMLStore1000Runs(b *testing.B) {
	path := benchStore(b, 1000)
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	must(b, err)
	defer s.Close()
	var size int
	for b.Loop() {
		r, err := Load(ctx, s, Selection{All: true, NoVerify: true})
		must(b, err)
		var buf bytes.Buffer
		must(b, HTML(&buf, r))
		size = buf.Len()
	}
	b.ReportMetric(float64(size)/1e6, "MB/report")
}
