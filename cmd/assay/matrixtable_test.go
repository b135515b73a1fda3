package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
)

// The table's columns say what they hold: RUN the run id, CASE the catalog case, FORMATION the
// formation check; and a check with no column of its own (members, routing, ...) that did not pass
// is named in OTHER, so that no failed required check is missing from the row.
func TestMatrixTableShowsEveryCheckThatDidNotPass(t *testing.T) {
	checks := func(failed ...string) []evidence.Check {
		var cs []evidence.Check
		for _, n := range []string{"files", "tests", "oracle", "formation", "effects", "sessions", "usage", "members", "routing"} {
			st := evidence.CheckPassed
			for _, f := range failed {
				if f == n {
					st = evidence.CheckFailed
				}
			}
			cs = append(cs, evidence.Check{Name: n, Required: true, Status: st})
		}
		return cs
	}
	sum := harness.Summary{Cases: []harness.CaseResult{
		{RunID: "run-a", Catalog: "parallel+vote", Members: 3, Checks: checks(), Verdict: evidence.Verdict{Verdict: "accepted"}},
		{RunID: "run-b", Catalog: "router", Members: 3, Checks: checks("routing", "members"), Verdict: evidence.Verdict{Verdict: "rejected"}},
		{RunID: "run-c", Catalog: "sequential", Members: 2, Checks: checks("formation"), Verdict: evidence.Verdict{Verdict: "rejected"}},
	}}
	var b bytes.Buffer
	if err := matrixTable(sum, false).writeText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if h := strings.Fields(lines[0]); strings.Join(h, " ") != "RUN CASE MEMBERS ELAPSED FILES TESTS ORACLE FORMATION EFFECTS SESSIONS USAGE OTHER VERDICT" {
		t.Fatalf("header %q", lines[0])
	}
	want := map[string][]string{
		"run-a": {"run-a", "parallel+vote", "3", "0.0s", "passed", "passed", "passed", "passed", "passed", "passed", "conserved", "passed", "accepted"},
		"run-b": {"run-b", "router", "3", "0.0s", "passed", "passed", "passed", "passed", "passed", "passed", "conserved", "members", "failed,", "routing", "failed", "rejected"},
		"run-c": {"run-c", "sequential", "2", "0.0s", "passed", "passed", "passed", "failed", "passed", "passed", "conserved", "passed", "rejected"},
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if w := want[f[0]]; strings.Join(f, " ") != strings.Join(w, " ") {
			t.Errorf("row %q, want %q", strings.Join(f, " "), strings.Join(w, " "))
		}
	}
}
