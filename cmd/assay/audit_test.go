package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/assay-audit/assay/reports/audit"
	"github.com/assay-audit/assay/reports/audit/audittest"
)

// assay audit exits 1 on a critical finding, 0 on a clean store and on a high one (R06), and lists
// every rule with its status in each format.
func TestAuditExitStatusFollowsCriticalFindings(t *testing.T) {
	t.Parallel()
	clean := audittest.First(t, "R10").Build(t, t.TempDir(), false)
	before, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	beside, _ := os.ReadDir(filepath.Dir(clean))
	r := runCLI(t, "audit", "--store", clean)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("clean store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A reader: the store is byte-identical and no file appeared beside it.
	if after, _ := os.ReadFile(clean); !bytes.Equal(before, after) {
		t.Fatal("assay audit changed the store")
	}
	if entries, _ := os.ReadDir(filepath.Dir(clean)); len(entries) != len(beside) {
		t.Fatalf("files beside the store after assay audit: %v, before: %v", entries, beside)
	}
	for i := 1; i <= 14; i++ {
		id := fmt.Sprintf("R%02d", i)
		if !regexp.MustCompile(`(?m)^` + id + `\s+(critical|high)\s+(passed|not_assessable)\s+0\s`).MatchString(r.stdout) {
			t.Fatalf("%s not listed as passed or not_assessable:\n%s", id, r.stdout)
		}
	}

	hazard := audittest.First(t, "R10").Build(t, t.TempDir(), true)
	r = runCLI(t, "audit", "--store", hazard, "--format", "json")
	if r.code != 1 {
		t.Fatalf("critical finding: exit %d, want 1\n%s", r.code, r.stderr)
	}
	oneLine(t, r, "critical findings")
	var res audit.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.SchemaVersion != audit.SchemaVersion || len(res.Rules) != 14 || len(res.Findings()) != 1 || res.Findings()[0].Rule != "R10" {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(r.stdout, `"schema_version": 1`) || !strings.Contains(r.stdout, `"run_id": "r1"`) || strings.Contains(r.stdout, `\u003e`) {
		t.Fatalf("JSON keys or escaping:\n%s", r.stdout)
	}

	high := audittest.First(t, "R06").Build(t, t.TempDir(), true)
	r = runCLI(t, "audit", "--store", high)
	if r.code != 0 || !regexp.MustCompile(`(?m)^R06\s+high\s+finding\s+[1-9]`).MatchString(r.stdout) {
		t.Fatalf("high finding: exit %d\n%s", r.code, r.stdout)
	}

	// --rule narrows; --output writes the SARIF log to a file and nothing to stdout.
	out := filepath.Join(t.TempDir(), "audit.sarif")
	r = runCLI(t, "audit", "--store", hazard, "--rule", "R10,R12", "--format", "sarif", "--output", out)
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("sarif: exit %d stdout %q", r.code, r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `"ruleId": "R10"`) || strings.Contains(string(b), `"id": "R01"`) {
		t.Fatalf("sarif file: %v\n%s", err, b)
	}
}

// Bad input is one line on stderr, exit 2, and nothing written.
func TestAuditBadInput(t *testing.T) {
	store := audittest.First(t, "R10").Build(t, t.TempDir(), false)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.sarif")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", store, "--format", "xml"}, `--format "xml" is not one of table, json, sarif`},
		{[]string{"--store", store, "--rule", "R15"}, `--rule "R15" is not a rule of the risk register`},
		{[]string{"--store", store, "--graph", "g.db", "--fail-on", "cognitiv>3"}, `unknown metric "cognitiv"`},
		{[]string{"--store", store, "--graph", "g.db", "--fail-on", "cognitive=3"}, `write METRIC>N`},
		{[]string{"--store", store, "--fail-on", "cognitive>3"}, "--fail-on needs --graph"},
		{[]string{"--store", store, "nosuchrun"}, "nosuchrun"},
		{[]string{"--store", filepath.Join(dir, "none.duckdb")}, "none.duckdb"},
	} {
		r := runCLI(t, append(append([]string{"audit"}, c.args...), "--output", out)...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", c.args, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: %s was written", c.args, out)
		}
	}
}

// --graph DB --fail-on METRIC>N reports each value over the threshold with its file and line, in
// SARIF that validates, and exits 1; a threshold nothing exceeds exits 0.
func TestAuditMetricThresholds(t *testing.T) {
	db := filepath.Join(indexFixture(t), "graph.db")
	r := runCLI(t, "audit", "--graph", db, "--fail-on", "cognitive>=7", "--format", "sarif")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	oneLine(t, r, "metric values over a threshold")
	for _, want := range []string{`"ruleId": "metric/cognitive"`, `"uri": "cx/cx.go"`, `"startLine": 36`, `"threshold": "cognitive>=7"`, `"kind": "measured"`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("SARIF lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, `"id": "R01"`) {
		t.Fatal("--graph alone evaluated the evidence rules")
	}
	r = runCLI(t, "audit", "--graph", db, "--fail-on", "cognitive>100", "--fail-on", "cyclomatic>100")
	if r.code != 0 || !strings.Contains(r.stdout, "threshold cognitive>100:") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
