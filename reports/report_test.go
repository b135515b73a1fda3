package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/reports/audit/audittest"
)

func caseByRun(r Report, run string) (Case, bool) {
	for _, inv := range r.Invocations {
		for _, c := range inv.Cases {
			if c.RunID == run {
				return c, true
			}
		}
	}
	return Case{}, false
}

func runIDs(r Report) []string {
	var ids []string
	for _, inv := range r.Invocations {
		for _, c := range inv.Cases {
			ids = append(ids, c.RunID)
		}
	}
	return ids
}

func TestLoadSelects(t *testing.T) {
	f := sharedFixture(t)
	for _, tc := range []struct {
		name string
		sel  Selection
		want []string
	}{
		{"default is the latest invocation", Selection{}, []string{f.resumed, f.replay}},
		{"all, grouped by invocation latest first, failures first", Selection{All: true},
			[]string{f.resumed, f.replay, f.rejected, f.open, f.accepted, f.old}},
		{"run ids", Selection{RunIDs: []string{f.old, f.rejected}}, []string{f.rejected, f.old}},
		{"by case", Selection{All: true, Cases: []string{"parallel+vote"}}, []string{f.replay, f.accepted}},
		{"by formation and verdict", Selection{All: true, Formations: []string{"parallel"}, Verdicts: []string{"rejected"}}, []string{f.rejected}},
		{"interrupted", Selection{All: true, Verdicts: []string{"interrupted"}}, []string{f.open}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runIDs(loadFixture(t, f, tc.sel)); !slices.Equal(got, tc.want) {
				t.Fatalf("runs %v, want %v", got, tc.want)
			}
		})
	}
	ctx := context.Background()
	s, err := evidence.Open(ctx, f.store, evidence.OpenOptions{ReadOnly: true})
	must(t, err)
	defer s.Close()
	if _, err := Load(ctx, s, Selection{RunIDs: []string{"run-none"}}); !errors.Is(err, evidence.ErrNoRun) {
		t.Fatalf("unknown run: %v, want evidence.ErrNoRun", err)
	}
}

func TestLoadSaysWhatTheEvidenceSays(t *testing.T) {
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	acc, _ := caseByRun(r, f.accepted)
	if acc.Name != "parallel+vote" || acc.TerminalHash != f.acceptedTerminal || len(acc.TerminalHash) != 64 {
		t.Fatalf("accepted case %q terminal %q", acc.Name, acc.TerminalHash)
	}
	if len(acc.Lineage.ReplayedBy) != 1 || acc.Lineage.ReplayedBy[0] != (ReplayRef{RunID: f.replay, Verdict: "exact"}) {
		t.Fatalf("replayed by %+v", acc.Lineage.ReplayedBy)
	}
	if len(acc.Approvals) != 1 || acc.Approvals[0].Approver != "alice" || acc.Approvals[0].PayloadSHA256 != digestOf("payload") {
		t.Fatalf("approvals %+v", acc.Approvals)
	}
	phases := map[string]Phase{}
	for _, p := range acc.Phases {
		phases[p.Name] = p
	}
	if p := phases["team"]; p.Seconds == nil || *p.Seconds != 5 {
		t.Fatalf("team phase %+v, want 5 s from the events", p)
	}
	if p := phases["tests"]; p.Seconds == nil || *p.Seconds != 2.5 {
		t.Fatalf("tests phase %+v, want 2.5 s from the check's evidence", p)
	}
	if p := phases["oracle"]; p.Seconds != nil || !strings.Contains(p.Note, "not recorded") {
		t.Fatalf("oracle phase %+v: the fixture recorded none, so it must say so", p)
	}
	inv := r.Invocations[1]
	// The fixture's accepted run stores its preimage; the others do not, and have a line of their own.
	if inv.ID != "inv-a" || len(inv.Environments) != 2 || inv.Environments[0].Matches == nil || !*inv.Environments[0].Matches ||
		inv.Environments[1].Recorded ||
		inv.Environments[0].Commit != "0123456789abcdef0123456789abcdef01234567" || !inv.Reference {
		t.Fatalf("invocation inv-a %+v", inv)
	}
	rej, _ := caseByRun(r, f.rejected)
	if rej.Checks[0].Evidence != `votes: {"double.go":3,"other.go":1}` {
		t.Fatalf("structured evidence rendered %q", rej.Checks[0].Evidence)
	}
	tokens := map[string]SourceTokens{}
	for _, s := range inv.Totals.Tokens {
		tokens[s.Source] = s
	}
	// The rejected case's wire reading is unknown: the total is a lower bound, never complete.
	if w := tokens["wire"]; w.Known || w.Tokens != 1000 {
		t.Fatalf("wire tokens %+v, want 1000 known=false", w)
	}
	old, _ := caseByRun(r, f.old)
	if old.Name != CaseNotRecorded || old.NameRecorded || old.InvocationID != "" {
		t.Fatalf("old run %+v", old)
	}
	oldInv := r.Invocations[2]
	if oldInv.ID != "" || oldInv.Environments[0].Recorded || oldInv.Environments[0].Matches != nil {
		t.Fatalf("the pre-v6 run's environment must be not recorded (unknown), got %+v", oldInv.Environments)
	}
	res, _ := caseByRun(r, f.resumed)
	open, _ := caseByRun(r, f.open)
	if res.Kind != "resume" || res.Lineage.ResumesRunID != f.open || open.Lineage.ResumedByRunID != f.resumed || !open.Interrupted {
		t.Fatalf("resume lineage %+v / %+v", res.Lineage, open.Lineage)
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	var md bytes.Buffer
	must(t, Markdown(&md, r))
	out := md.String()
	for _, want := range []string{
		"**Reference results.**", "### parallel+vote — accepted", "### parallel+judge — rejected", CaseNotRecorded,
		"`" + f.acceptedTerminal + "`", "replayed by run `" + f.replay + "`: exact", "resumes run `" + f.open + "`",
		"matches its recorded preimage", "preimage not recorded", "wire at least 1000 (some unknown)",
		"| alice | write_file |", "[test log exec-1](" + f.testLog + ")", "judge chose exec-2 -> the raw replies name exec-1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if strings.Contains(out, "map[") {
		t.Error("markdown shows Go map syntax")
	}
	if strings.Index(out, "### parallel+judge") > strings.Index(out, "### parallel+vote — accepted (run `"+f.accepted+"`)") {
		t.Error("the rejected case is not shown before the accepted one")
	}
	var js bytes.Buffer
	must(t, JSON(&js, r))
	if strings.Contains(js.String(), `\u003e`) || !strings.Contains(js.String(), "exec-2 -> the raw") {
		t.Error("JSON escapes HTML characters")
	}
	var doc map[string]any
	must(t, json.Unmarshal(js.Bytes(), &doc))
	if doc["schema_version"] != float64(ReportSchemaVersion) {
		t.Fatalf("schema_version %v", doc["schema_version"])
	}
	if !strings.Contains(js.String(), `"wall_seconds": `) || !strings.Contains(js.String(), f.acceptedTerminal) {
		t.Fatal("JSON lacks wall_seconds or the full terminal hash")
	}
}

// Links resolve from wherever the report file is: the out directory or OUT/reports/<invocation>/.
func TestRebasedLinksResolve(t *testing.T) {
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	for _, dir := range []string{f.out, filepath.Join(f.out, "reports", "inv-a")} {
		rb, err := r.Rebase(dir)
		must(t, err)
		acc, _ := caseByRun(rb, f.accepted)
		i := slices.IndexFunc(acc.Links, func(l Link) bool { return l.Label == "test log exec-1" })
		if i < 0 {
			t.Fatalf("no test log link from %s: %+v", dir, acc.Links)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(acc.Links[i].Path))); err != nil {
			t.Fatalf("link %s from %s does not resolve: %v", acc.Links[i].Path, dir, err)
		}
	}
}

func TestJUnitValidatesAgainstTheAntSchema(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		if os.Getenv("ASSAY_REQUIRE_TOOLS") != "" {
			t.Fatal("xmllint is required (ASSAY_REQUIRE_TOOLS is set): apt-get install -y libxml2-utils")
		}
		t.Skip("xmllint not installed (apt-get install -y libxml2-utils)")
	}
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	var b bytes.Buffer
	must(t, JUnit(&b, r))
	path := filepath.Join(t.TempDir(), "junit.xml")
	must(t, os.WriteFile(path, b.Bytes(), 0o644))
	if out, err := exec.Command(xmllint, "--noout", "--schema", filepath.Join("testdata", "JUnit.xsd"), path).CombinedOutput(); err != nil {
		t.Fatalf("junit.xml does not validate: %v\n%s\n%s", err, out, b.String())
	}
	// The suite a store that does not verify adds validates too.
	var sb bytes.Buffer
	withStore := r
	withStore.StoreFindings = []string{"the store (admissions): tampered: admission 1 is missing"}
	must(t, JUnit(&sb, withStore))
	storePath := filepath.Join(t.TempDir(), "junit-store.xml")
	must(t, os.WriteFile(storePath, sb.Bytes(), 0o644))
	if out, err := exec.Command(xmllint, "--noout", "--schema", filepath.Join("testdata", "JUnit.xsd"), storePath).CombinedOutput(); err != nil {
		t.Fatalf("junit.xml with the store's suite does not validate: %v\n%s\n%s", err, out, sb.String())
	}
	// The schema check can fail: a testcase without its required time attribute is refused.
	bad := regexp.MustCompile(`<testcase name="parallel\+judge \[[^"]*"`).ReplaceAllString(b.String(), `<testcase`)
	if bad == b.String() {
		t.Fatal("the rejected case's testcase is not in the output")
	}
	must(t, os.WriteFile(path, []byte(bad), 0o644))
	if exec.Command(xmllint, "--noout", "--schema", filepath.Join("testdata", "JUnit.xsd"), path).Run() == nil {
		t.Fatal("xmllint accepted a testcase without a name")
	}
}

func TestJUnitFailsWhatWasNotAccepted(t *testing.T) {
	f := sharedFixture(t)
	r := loadFixture(t, f, Selection{All: true})
	var b bytes.Buffer
	must(t, JUnit(&b, r))
	var doc junitSuites
	must(t, xmlUnmarshal(b.Bytes(), &doc))
	got := map[string]junitCase{}
	failures, errs := 0, 0
	for _, s := range doc.Suites {
		failures += s.Failures
		errs += s.Errors
		for _, c := range s.Cases {
			// The name carries the case's matrix axes after the case name.
			name, axes, _ := strings.Cut(c.Name, " [")
			if !strings.HasSuffix(axes, " model=assay-reference-1 task=not recorded repeat=-]") {
				t.Errorf("testcase %q: axes %q", c.Name, axes)
			}
			got[name+"/"+c.Classname] = c
		}
	}
	rej := got["parallel+judge/assay.parallel.go.standard"]
	if rej.Failure == nil || rej.Failure.Type != "rejected" || !strings.Contains(rej.Failure.Message, "formation") ||
		!strings.Contains(rej.Failure.Text, "judge chose exec-2 -> the raw replies name exec-1") {
		t.Fatalf("rejected case %+v", rej)
	}
	open := got["sequential/assay.sequential.go.standard"]
	if failures != 1 || errs != 1 || (open.Error == nil && open.Failure == nil) {
		t.Fatalf("failures %d errors %d; the interrupted case: %+v", failures, errs, open)
	}
	acc := got["parallel+vote/assay.parallel.go.standard"]
	if acc.Failure != nil || acc.Error != nil {
		t.Fatalf("accepted case reported as failing: %+v", acc)
	}
}

// An invocation's reports hold its runs, and no runs is an empty report, never the latest
// invocation's; both copies are written, mode 0644.
func TestWriteInvocationReports(t *testing.T) {
	f := fixtureCopy(t)
	ctx := context.Background()
	w, err := WriteInvocationReports(ctx, f.store, "inv-a", []string{f.rejected}, nil, "")
	must(t, err)
	if len(w.Files) != len(invocationFormats) || len(w.Latest) != len(invocationFormats) || w.Dir != filepath.Join(f.out, "reports", "inv-a") {
		t.Fatalf("wrote %+v", w)
	}
	for _, p := range append(w.Files, w.Latest...) {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("%s: %v %v", p, fi, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(w.Dir, "report.md"))
	if !strings.Contains(string(md), f.rejected) || strings.Contains(string(md), f.accepted) {
		t.Fatalf("inv-a report.md holds other runs than the one given:\n%s", md)
	}
	w, err = WriteInvocationReports(ctx, f.store, "inv-empty", nil, nil, "")
	must(t, err)
	md, _ = os.ReadFile(filepath.Join(w.Dir, "report.md"))
	if !strings.Contains(string(md), "No runs match") || strings.Contains(string(md), f.replay) {
		t.Fatalf("an invocation without runs shows runs:\n%s", md)
	}
	if _, err := WriteInvocationReports(ctx, f.store, "../escape", nil, nil, ""); err == nil {
		t.Fatal("an invocation id naming another directory was accepted")
	}
}

// Token totals never turn missing usage into zero: a source no member has a reading from is
// unknown, a source with one unknown reading is a lower bound, and only complete readings are known.
func TestTotalsNeverReportMissingUsageAsZero(t *testing.T) {
	n := int64(7)
	none := totalsOf([]Case{{Verdict: evidence.VerdictAccepted}})
	for _, s := range none.Tokens {
		if s.Known || tokenTotal(s) != "unknown" {
			t.Errorf("no usage recorded: source %s = %+v (%q), want unknown", s.Source, s, tokenTotal(s))
		}
	}
	some := totalsOf([]Case{{Verdict: evidence.VerdictAccepted, Members: []Member{
		{ID: "a", Usage: []Usage{{Source: "store", TotalTokens: &n}, {Source: "wire", TotalTokens: &n}}},
		{ID: "b", Usage: []Usage{{Source: "store", TotalTokens: &n}, {Source: "wire"}}},
	}}})
	want := map[string]string{"store": "14", "wire": "at least 7 (some unknown)", "gateway": "unknown"}
	for _, s := range some.Tokens {
		if got := tokenTotal(s); got != want[s.Source] {
			t.Errorf("source %s = %q, want %q", s.Source, got, want[s.Source])
		}
	}
}

// A report verifies what it renders: a run whose stored verdict was flipped to accepted after
// finalization is shown as evidence that does not verify — first, counted apart, never a passing
// JUnit test — not as accepted.
func TestATamperedRunIsNeverPresentedAsAccepted(t *testing.T) {
	f := fixtureCopy(t)
	audittest.Exec(t, f.store, `UPDATE verdicts SET verdict = 'accepted', requested_verdict = 'accepted', reasons = [] WHERE run_id = '`+f.rejected+`'`)
	r := loadFixture(t, f, Selection{RunIDs: []string{f.rejected, f.accepted}})
	c, ok := caseByRun(r, f.rejected)
	if !ok || !c.VerificationFailed() || c.Verdict != evidence.VerdictAccepted {
		t.Fatalf("tampered run: verification %q (%s), verdict %q", c.Verification, c.VerificationDetail, c.Verdict)
	}
	if a, _ := caseByRun(r, f.accepted); a.Verification != evidence.VerifyOK {
		t.Fatalf("untouched run: verification %q (%s)", a.Verification, a.VerificationDetail)
	}
	if got := runIDs(r); got[0] != f.rejected {
		t.Fatalf("order %v: the run that does not verify must come first", got)
	}
	if r.Totals.ByVerdict[DoesNotVerify] != 1 || r.Totals.ByVerdict[evidence.VerdictAccepted] != 1 {
		t.Fatalf("totals %v", r.Totals.ByVerdict)
	}
	var md, junit bytes.Buffer
	must(t, Markdown(&md, r))
	must(t, JUnit(&junit, r))
	if !strings.Contains(md.String(), "accepted (evidence does not verify: tampered)") {
		t.Fatalf("markdown does not say the evidence does not verify:\n%s", md.String())
	}
	if !strings.Contains(junit.String(), `type="does_not_verify"`) || strings.Count(junit.String(), "<failure") != 1 {
		t.Fatalf("junit:\n%s", junit.String())
	}
	// --no-verify: nothing is recomputed, and the report says so rather than vouching for anything.
	nv := loadFixture(t, f, Selection{RunIDs: []string{f.rejected}, NoVerify: true})
	md.Reset()
	must(t, Markdown(&md, nv))
	if nv.Verified || !strings.Contains(md.String(), "**not verified**") {
		t.Fatalf("--no-verify report: verified %v\n%s", nv.Verified, md.String())
	}
}

// Runs sharing a fingerprint are one environment line only when each holds its preimage: a run
// whose environment.json is gone has a line of its own saying so, never a share of "re-derives".
func TestAnEnvironmentWithoutItsPreimageIsNotFoldedIntoOneThatReDerives(t *testing.T) {
	f := fixtureCopy(t)
	audittest.Exec(t, f.store, `DELETE FROM run_artifacts WHERE run_id = '`+f.rejected+`' AND name = '`+evidence.EnvironmentArtifact+`'`)
	r := loadFixture(t, f, Selection{RunIDs: []string{f.accepted, f.rejected}})
	envs := r.Invocations[0].Environments
	if len(envs) != 2 {
		t.Fatalf("environments %+v, want one that re-derives and one without its preimage", envs)
	}
	for _, e := range envs {
		if e.Runs != 1 || e.Recorded == (e.Matches == nil) {
			t.Fatalf("environment %+v", e)
		}
	}
}

// A preimage the store cannot give back (its payload damaged in place, or gone) does not stop the
// report: that run's environment line says the preimage cannot be read and why, its re-derivation
// unknown (never "re-derives"), in every renderer; the run without a preimage keeps its own line.
func TestAnUnreadableEnvironmentPreimageIsSaidAndDoesNotStopTheReport(t *testing.T) {
	for _, damage := range []struct{ name, set, want string }{
		{"corrupt", `data = 'x'::BLOB || data`, "artifact corrupt"},
		{"missing", `data = NULL`, "artifact missing"},
	} {
		t.Run(damage.name, func(t *testing.T) {
			f := fixtureCopy(t)
			audittest.Exec(t, f.store, `UPDATE artifacts SET `+damage.set+` WHERE digest = (SELECT digest FROM run_artifacts WHERE run_id = '`+
				f.accepted+`' AND name = '`+evidence.EnvironmentArtifact+`')`)
			r := loadFixture(t, f, Selection{RunIDs: []string{f.accepted, f.rejected}})
			envs := r.Invocations[0].Environments
			var unreadable, notRecorded int
			for _, e := range envs {
				switch {
				case e.PreimageUnreadable != "":
					unreadable++
					if !strings.Contains(e.PreimageUnreadable, damage.want) || e.Matches != nil || e.Runs != 1 || !e.Recorded || e.AssayVersion != "" {
						t.Errorf("unreadable environment %+v", e)
					}
				case !e.Recorded && e.Matches == nil:
					notRecorded++
				}
			}
			if unreadable != 1 || notRecorded != 1 || len(envs) != 2 {
				t.Fatalf("environments %+v, want one whose preimage cannot be read and one without a preimage", envs)
			}
			var md, html bytes.Buffer
			must(t, Markdown(&md, r))
			must(t, HTML(&html, r))
			for name, out := range map[string]string{"markdown": md.String(), "html": html.String()} {
				if !strings.Contains(out, "its recorded preimage (environment.json) cannot be read") || !strings.Contains(out, damage.want) ||
					strings.Contains(out, "matches its recorded preimage (re-derived)") || strings.Contains(out, "re-derives: yes") {
					t.Errorf("%s does not say the preimage cannot be read, or says it re-derives", name)
				}
			}
		})
	}
}

// Recorded text — a model's reply quoted in a check's detail or evidence — never becomes live HTML
// or Markdown in report.md: no tag opens, and a fence in the evidence cannot close the report's.
func TestMarkdownNeverRendersRecordedTextAsMarkup(t *testing.T) {
	evil := "<script>alert(9)</script>\n```\n<img src=x onerror=alert(10)>"
	r := Report{Invocations: []Invocation{{ID: "inv-x", Cases: []Case{{Name: "consensus", RunID: "run-x", Verdict: "rejected",
		Reasons: []string{"formation failed: " + evil},
		Checks:  []Check{{Name: "formation", Required: true, Status: "failed", Detail: evil, Evidence: "decision: " + evil}}}}}}}
	var b bytes.Buffer
	must(t, Markdown(&b, r))
	md := b.String()
	start := strings.Index(md, "````\ndecision: ")
	end := strings.LastIndex(md, "\n````\n")
	if start < 0 || end < start {
		t.Fatalf("the evidence fence is not longer than the backticks it holds:\n%s", md)
	}
	// Inside the fence the text is literal (CommonMark); everywhere else no tag may open.
	if outside := md[:start] + md[end:]; strings.Contains(outside, "<script") || strings.Contains(outside, "<img") {
		t.Fatalf("recorded text opens an HTML tag in report.md:\n%s", md)
	}
}

// A store that does not verify outside the selected runs — an admission deleted, as a run erased
// from the store would leave it — is said first by every renderer and fails JUnit, although every
// selected run verifies on its own.
func TestAStoreThatDoesNotVerifyIsSaidWhateverTheRunsSay(t *testing.T) {
	f := fixtureCopy(t)
	// Admission 1 (run-old) deleted: the break is the next admission's (run-acc's); run-rej, the
	// one selected, verifies on its own.
	audittest.Exec(t, f.store, `DELETE FROM admissions WHERE ordinal = 1`)
	r := loadFixture(t, f, Selection{RunIDs: []string{f.rejected}})
	if len(r.StoreFindings) == 0 || r.Invocations[0].Cases[0].VerificationFailed() {
		t.Fatalf("store findings %v, selected run %+v", r.StoreFindings, r.Invocations[0].Cases[0].Verification)
	}
	var md, junit bytes.Buffer
	must(t, Markdown(&md, r))
	must(t, JUnit(&junit, r))
	if !strings.Contains(md.String(), "evidence store: **does not verify**") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	if !strings.Contains(junit.String(), `type="store_does_not_verify"`) {
		t.Fatalf("junit:\n%s", junit.String())
	}
	if clean := loadFixture(t, sharedFixture(t), Selection{All: true}); len(clean.StoreFindings) != 0 {
		t.Fatalf("an untouched store has store findings: %v", clean.StoreFindings)
	}
}

// The environment is re-derived, not taken on the envelope's word: a preimage recorded with a run
// that does not hash to the fingerprint its envelope names is shown as not matching, naming both.
func TestAnEnvironmentPreimageThatDoesNotHashToTheFingerprintIsSaid(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	f := fixture{out: out, store: filepath.Join(out, "evidence.duckdb")}
	s, err := evidence.Open(ctx, f.store, evidence.OpenOptions{Command: "fixture"})
	must(t, err)
	env := fixtureEnvelope("sequential", "sequential", "inv-x") // fingerprint of go1.26.8 ...
	must(t, s.OpenRun(ctx, "run-x", env, ""))
	pre, err := evidence.Environment{FingerprintVersion: evidence.EnvironmentFingerprintV2, Assay: "0.1.0", Go: "go1.20",
		GOOS: "linux", GOARCH: "amd64"}.Canonical() // ... but the recorded preimage says go1.20
	must(t, err)
	_, err = s.PutArtifact(ctx, "run-x", evidence.EnvironmentArtifact, "application/json", pre)
	must(t, err)
	must(t, s.RecordCheck(ctx, "run-x", evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "ok"}))
	_, err = s.Finalize(ctx, "run-x", evidence.Verdict{Verdict: evidence.VerdictRejected})
	must(t, err)
	must(t, s.Close())
	r := loadFixture(t, f, Selection{All: true})
	e := r.Invocations[0].Environments[0]
	if !e.Recorded || e.Matches == nil || *e.Matches {
		t.Fatalf("environment %+v: want recorded and not matching", e)
	}
	var md bytes.Buffer
	must(t, Markdown(&md, r))
	if !strings.Contains(md.String(), "**does not match** its recorded preimage") || !strings.Contains(md.String(), env.EnvironmentFingerprint) {
		t.Fatalf("markdown does not say the fingerprint does not re-derive:\n%s", md.String())
	}
}
