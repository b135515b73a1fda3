package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// reportStore writes a store with two invocations: inv-1 (run-a accepted, case sequential) and
// inv-2 (run-b rejected, case parallel+vote, with a test log on disk).
func reportStore(t *testing.T) (out string) {
	t.Helper()
	ctx := context.Background()
	out = t.TempDir()
	s, err := evidence.Open(ctx, filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range []struct{ run, inv, cas, formation, status string }{
		{"run-a", "inv-1", "sequential", "sequential", evidence.CheckPassed},
		{"run-b", "inv-2", "parallel+vote", "parallel", evidence.CheckFailed},
	} {
		env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64),
			Provider: "reference", Model: "assay-reference-1", Formation: r.formation, TaskProfile: "standard", Language: "go",
			Case: r.cas, InvocationID: r.inv}
		if err := s.OpenRun(ctx, r.run, env, ""); err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(out, "cases", r.run, "exec-1.go-test.json")
		if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(log, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ev, _ := json.Marshal(map[string]any{"exec-1": map[string]any{"OutputPath": log, "Duration": 1e9}})
		if err := s.RecordCheck(ctx, r.run, evidence.Check{Name: "tests", Required: true, Status: r.status, Detail: "exec-1 -> " + r.status, Evidence: ev}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finalize(ctx, r.run, evidence.Verdict{Verdict: evidence.VerdictAccepted}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestReportRendersEachFormatOfTheSelection(t *testing.T) {
	t.Parallel()
	out := reportStore(t)
	r := runCLI(t, "report", "--out", out)
	if r.code != 0 || !strings.Contains(r.stdout, "### parallel+vote — rejected") || strings.Contains(r.stdout, "run-a") {
		t.Fatalf("default (--latest) report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "report", "--out", out, "--all", "--format", "json")
	var doc struct {
		SchemaVersion int `json:"schema_version"`
		Invocations   []struct {
			ID string `json:"id"`
		} `json:"invocations"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || doc.SchemaVersion != 1 || len(doc.Invocations) != 2 ||
		strings.Contains(r.stdout, `\u003e`) {
		t.Fatalf("--all --format json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "report", "--out", out, "--all", "--format", "html")
	if r.code != 0 || !strings.HasPrefix(strings.ToLower(strings.TrimSpace(r.stdout)), "<!doctype html>") || !strings.Contains(r.stdout, "parallel+vote") {
		t.Fatalf("--format html: exit %d\n%.400s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "report", "--out", out, "run-a", "--format", "junit")
	if r.code != 0 || !strings.Contains(r.stdout, `<testcase name="sequential [provider=reference model=assay-reference-1 task=not recorded repeat=-]" classname="assay.sequential.go.standard"`) ||
		strings.Contains(r.stdout, "<failure") {
		t.Fatalf("junit of run-a: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "report", "--out", out, "--all", "--verdict", "rejected", "--format", "junit")
	if r.code != 0 || !strings.Contains(r.stdout, `<failure message="rejected: checks not passed: tests" type="rejected">`) {
		t.Fatalf("junit of the rejected runs: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// SARIF: assay audit's findings over the selection only. run-a is accepted with no provider
	// exchange recorded: R02 (accepted without execution evidence) must name it, and nothing run-b.
	r = runCLI(t, "report", "--out", out, "run-a", "--format", "sarif")
	var sarif struct {
		Version string `json:"version"`
		Runs    []struct {
			Results []struct {
				RuleID  string `json:"ruleId"`
				Message struct {
					Text string `json:"text"`
				} `json:"message"`
			} `json:"results"`
		} `json:"runs"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sarif) != nil || sarif.Version != "2.1.0" || len(sarif.Runs) != 1 ||
		strings.Contains(r.stdout, "run-b") {
		t.Fatalf("--format sarif of run-a: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	found := false
	for _, res := range sarif.Runs[0].Results {
		found = found || res.RuleID == "R02" && strings.Contains(res.Message.Text, "run-a")
	}
	if !found {
		t.Fatalf("--format sarif of run-a: no R02 result naming run-a\n%s", r.stdout)
	}
}

// --output writes atomically, mode 0644, with links relative to the file's own directory.
func TestReportOutputFileLinksResolveFromItsDirectory(t *testing.T) {
	t.Parallel()
	out := reportStore(t)
	dest := filepath.Join(out, "nested", "dir", "report.md")
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "report", "--out", out, "--all", "--output", dest)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(dest)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("report file %v %v, want mode 0644", fi, err)
	}
	page := filepath.Join(out, "nested", "report.html")
	if r := runCLI(t, "report", "--out", out, "--all", "--output", page); r.code != 0 {
		t.Fatalf("--output report.html: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(page); !strings.HasPrefix(strings.ToLower(string(b)), "<!doctype html>") {
		t.Fatalf("--output report.html without --format did not write HTML: %.80q", b)
	}
	b, _ := os.ReadFile(dest)
	const link = "(../../cases/run-b/exec-1.go-test.json)"
	if !strings.Contains(string(b), link) {
		t.Fatalf("report lacks the link %s:\n%s", link, b)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dest), "../../cases/run-b/exec-1.go-test.json")); err != nil {
		t.Fatalf("the link does not resolve: %v", err)
	}
}

func TestReportBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	out := reportStore(t)
	dest := filepath.Join(out, "r.md")
	usageDB := filepath.Join(out, "gateway-usage.db")
	dbBytes := append([]byte("SQLite format 3\x00"), make([]byte, 100)...)
	if err := os.WriteFile(usageDB, dbBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	// out/link -> out: the artifacts directory reached through a symbolic link is still the store's.
	if err := os.MkdirAll(filepath.Join(out, "artifacts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(out, "link")); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Nothing the refused --output named was touched: the store still opens, the database is as it was.
		if r := runCLI(t, "report", "--out", out, "--all"); r.code != 0 {
			t.Errorf("the store no longer reads after the refusals: exit %d %s", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(usageDB); !bytes.Equal(b, dbBytes) {
			t.Error("the usage database was overwritten")
		}
		if r := runCLI(t, "audit", "--out", out, "--output", filepath.Join(out, "evidence.duckdb")); r.code != 2 {
			t.Errorf("audit --output over the store: exit %d, want 2", r.code)
		}
	}()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"--format", "pdf"}, `--format "pdf" is not one of md, html, json, junit, sarif`},
		{"unknown case", []string{"--all", "--case", "parallel+votes"}, `--case "parallel+votes" is not a catalog case`},
		{"no run matches", []string{"--all", "--case", "consensus"}, "no run matches the selection (all runs; kept: case consensus)"},
		{"unknown formation", []string{"--all", "--formation", "paralel"}, `--formation "paralel" is not a formation`},
		{"two selections", []string{"--all", "--latest"}, "choose one of RUN..., --latest, --all and --since"},
		{"bad since", []string{"--since", "last week"}, `--since "last week"`},
		{"bad verdict", []string{"--all", "--verdict", "passed"}, `--verdict "passed" is not one of`},
		{"unknown run", []string{"run-none"}, "run run-none"},
		{"graph with a run selection", []string{"--graph", filepath.Join(out, "graph.db"), "--all"}, "--all selects evidence runs"},
		{"graph database missing", []string{"--graph", filepath.Join(out, "graph.db")}, "graph.db"},
		{"no store", []string{"--store", filepath.Join(out, "none.duckdb")}, "none.duckdb"},
		{"output over the store", []string{"--all", "--output", filepath.Join(out, "evidence.duckdb")}, "is evidence this command reads"},
		{"output over a database", []string{"--all", "--output", usageDB}, "is a database (SQLite or DuckDB)"},
		{"output is a directory", []string{"--all", "--output", out}, "is a directory"},
		{"output over a case's evidence file", []string{"--all", "--output", filepath.Join(out, "cases", "run-b", "exec-1.go-test.json")}, "inside the evidence store's cases directory"},
		{"output into the artifacts through a link", []string{"--all", "--output", filepath.Join(out, "link", "artifacts", "x.md")}, "inside the evidence store's artifacts directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"report", "--out", out, "--output", dest}, tc.args...)
			r := runCLI(t, args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
			if _, err := os.Stat(dest); err == nil {
				t.Fatal("a report was written")
			}
		})
	}
}

// checkInvocationReports checks what a matrix run wrote under out: OUT/reports/<invocation>/ holds
// report.md, report.html, report.json and junit.xml, mode 0644; the copies in OUT are the same reports; every
// evidence link of each Markdown file resolves from its own directory.
func checkInvocationReports(t *testing.T, out string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(out, "reports", "inv-*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("reports/<invocation>/: %v %v", dirs, err)
	}
	for _, dir := range []string{dirs[0], out} {
		for _, name := range []string{"report.md", "report.html", "report.json", "junit.xml"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil || fi.Mode().Perm() != 0o644 || fi.Size() == 0 {
				t.Fatalf("%s/%s: %v %v, want a non-empty file of mode 0644", dir, name, fi, err)
			}
		}
		md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
		links := 0
		for _, line := range strings.Split(string(md), "\n") {
			_, rest, ok := strings.Cut(line, "](")
			if !ok || !strings.HasPrefix(line, "- [") {
				continue
			}
			target := strings.TrimSuffix(rest, ")")
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(target))); err != nil {
				t.Errorf("%s/report.md: link %s does not resolve: %v", dir, target, err)
			}
			links++
		}
		if links == 0 || !strings.Contains(string(md), "test log") {
			t.Errorf("%s/report.md links no evidence files", dir)
		}
	}
}
