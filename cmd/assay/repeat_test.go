package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/reports"
)

// Done when: `--repeat 2` on one case (the reference provider, Python, single file) runs two
// cases in one invocation, each its own run and verdict, both accepted; each run's envelope (read
// back from the store) records its repeat index, 1 and 2 (a matrix file's repeat: 2 records the
// same), and `assay report --format json` shows both, grouped by repeat.
func TestMatrixRunRepeatFlagRunsEachRepeatAsItsOwnCase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs two cases that run member code; skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "out")
	r := runCLI(t, "matrix", "run", "--formations", "sequential", "--language", "python", "--profile", "single-file",
		"--repeat", "2", "--out", out, "--format", "json", "--progress", "none")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 2 || !sum.Accepted() {
		t.Fatalf("%d cases, accepted %v; want 2 accepted", len(sum.Cases), sum.Accepted())
	}
	runs := storeRuns(t, out)
	var repeats []int
	for _, run := range runs {
		if run.Verdict == nil || run.Verdict.Verdict != evidence.VerdictAccepted || run.Envelope.Case != "sequential" {
			t.Fatalf("run %s: verdict %+v, case %q", run.RunID, run.Verdict, run.Envelope.Case)
		}
		repeats = append(repeats, run.Envelope.Repeat)
	}
	slices.Sort(repeats)
	if !slices.Equal(repeats, []int{1, 2}) {
		t.Fatalf("envelope repeat indexes %v, want [1 2]: each repeat is its own run", repeats)
	}
	rr := runCLI(t, "report", "--out", out, "--format", "json", "--group-by", "repeat")
	if rr.code != 0 {
		t.Fatalf("report: exit %d %s", rr.code, rr.stderr)
	}
	var rep reports.Report
	if err := json.Unmarshal([]byte(rr.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Invocations) != 1 || len(rep.Groups) != 2 || rep.Groups[0].Key != "1" || rep.Groups[1].Key != "2" ||
		rep.Groups[0].Totals.ByVerdict["accepted"] != 1 || rep.Groups[1].Totals.ByVerdict["accepted"] != 1 {
		t.Fatalf("report groups by repeat: %+v", rep.Groups)
	}
	var got []int
	for _, c := range rep.Invocations[0].Cases {
		got = append(got, c.Repeat)
		if c.Verdict != "accepted" || c.TaskFile.Name != "double" || len(c.TaskFile.SHA256) != 64 ||
			c.TaskFile.Status != reports.TaskFileMatches || c.TaskFile.ReferenceSolution == nil || !*c.TaskFile.ReferenceSolution {
			t.Fatalf("report case %s: verdict %s, task file %+v", c.RunID, c.Verdict, c.TaskFile)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("report repeat indexes %v, want [1 2]", got)
	}
}
