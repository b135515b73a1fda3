package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/reports"
)

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// --matrix refuses, in one line and with exit 2 before anything is written, a flag for an axis the
// file sets (naming both), a malformed file (naming file, field and problem) and an unknown
// --group-by; a flag for an axis the file leaves out is the one-axis shortcut and is not refused.
func TestMatrixFileBadInputExitsTwoAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	full := writeFile(t, dir, "full.yaml", "providers:\n  - {name: ref-a, model: ref-model-a}\ncases: [sequential]\nlanguages: [go]\nprofiles: [standard]\nrepeat: 2\n")
	bad := writeFile(t, dir, "bad.yaml", "providers:\n  - {name: ref-a, base_url: \"http://127.0.0.1:1/v1\"}\n")
	task := writeFile(t, dir, "task.yaml", "tasks: [sort]\n")
	tasksFile := writeFile(t, dir, "tasks.yaml", "tasks: [double]\n")
	// A repeat too large is refused before anything is written (each repeat is a run of its own).
	tooMany := writeFile(t, dir, "many.yaml", "cases: [sequential]\nrepeat: 2147483648\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"model with providers", []string{"--matrix", full, "--model", "x"}, "--matrix " + full + " sets providers and --model gives it too"},
		{"base url and stream with providers", []string{"--matrix", full, "--base-url", "http://127.0.0.1:1/v1", "--stream"}, "sets providers and --base-url and --stream give"},
		{"formations with cases", []string{"--matrix", full, "--formations", "parallel"}, "sets cases and --formations"},
		{"language with languages", []string{"--matrix", full, "--language", "python"}, "sets languages and --language"},
		{"profile with profiles", []string{"--matrix", full, "--profile", "single-file"}, "sets profiles and --profile"},
		{"repeat with repeat", []string{"--matrix", full, "--repeat", "3"}, "sets repeat and --repeat gives it too"},
		{"task with tasks", []string{"--matrix", tasksFile, "--task", "abs"}, "sets tasks and --task gives it too"},
		{"repeat zero", []string{"--repeat", "0"}, "--repeat 0: each case runs at least once"},
		{"repeat negative", []string{"--repeat", "-2"}, "--repeat -2: each case runs at least once"},
		{"repeat too many", []string{"--repeat", "1001"}, "--repeat 1001: at most 1000 repeats of each case"},
		{"file repeat too many", []string{"--matrix", tooMany}, "repeat"},
		{"model without base url", []string{"--matrix", bad}, "matrix file " + bad + ": providers[0].model: is required with base_url"},
		{"task file", []string{"--matrix", task}, "tasks[0]: unknown task \"sort\""},
		{"missing file", []string{"--matrix", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{"unknown group", []string{"--group-by", "color"}, "--group-by \"color\" is not one of provider, model, task, language, profile, case, repeat"},
		// The file sets no languages: --language is the one-axis shortcut, and the refusal is the file's own.
		{"shortcut flag beside the file", []string{"--matrix", task, "--language", "python"}, "tasks[0]"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("out%d", i))
			r := runCLI(t, append([]string{"matrix", "run", "--out", out}, c.args...)...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			oneLine(t, r, c.want)
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was created by a refused command", out)
			}
		})
	}
	r := runCLI(t, "report", "--out", filepath.Join(dir, "none"), "--group-by", "color")
	if r.code != 2 {
		t.Fatalf("report --group-by color: exit %d %q", r.code, r.stderr)
	}
}

// Done when: a matrix file with two reference providers of different model ids x its cases x
// repeat 2 runs every cell's case in one invocation into one store, each its own run and verdict,
// all accepted; each envelope (read back from the store) names its provider, model, task and
// repeat index; the summary JSON and the reports (md and json) show them and group them, and each
// report case names its task file (the builtin double, its digest, matching, a reference solution).
// The default test run composes the axes on one case (2 x 1 x 2 = 4 cases) with the repeat given
// as --repeat 2 beside a file that leaves it out (the one-axis shortcut: the --repeat flag's own
// end-to-end test); -tags grid runs the same checks on three cases with repeat: 2 in the file
// (2 x 3 x 2 = 12), as matrixFileCases and matrixFileRepeatFlag say.
func TestMatrixFileTwoProvidersCasesRepeatTwo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs cases that build and run member code; skipped with -short")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cases := matrixFileCases
	n := 2 * len(cases) * 2
	// The subject is the matrix file's cells, not the Go path: the cases run in caseLanguage's
	// language on the standard profile.
	file := writeFile(t, dir, "matrix.yaml", `
providers:
  - {name: ref-a, reference: true, model: ref-model-a}
  - {name: ref-b, model: ref-model-b}
cases: [`+strings.Join(cases, ", ")+`]
tasks: [double]
languages: [`+caseLanguage(t)+`]
profiles: [standard]
`+map[bool]string{false: "repeat: 2\n", true: ""}[matrixFileRepeatFlag])
	args := []string{"matrix", "run", "--matrix", file, "--out", out, "--concurrency", "2", "--group-by", "provider", "--format", "json"}
	if matrixFileRepeatFlag {
		args = append(args, "--repeat", "2")
	}
	r := runCLI(t, args...)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The progress numbers the matrix's cases across its cells, and the end-of-run summary is the
	// whole matrix's, not its last cell's.
	if strings.Count(r.stderr, fmt.Sprintf("/%d ", n)) != 2*n || !strings.Contains(r.stderr, fmt.Sprintf("case %d/%d ", n, n)) ||
		!strings.Contains(r.stderr, fmt.Sprintf("summary:  %d case(s): %d accepted;", n, n)) {
		t.Fatalf("the summary does not count the matrix's %d cases:\n%s", n, r.stderr)
	}
	// Each progress line names the cell's provider and model, which tell the cells apart (the task
	// is the same in both): half the finished lines are ref-a's, half ref-b's.
	for _, label := range []string{"(provider ref-a, model ref-model-a): accepted", "(provider ref-b, model ref-model-b): accepted"} {
		if got := strings.Count(r.stderr, label); got != n/2 {
			t.Errorf("%d progress lines end their case's name with %q, want %d:\n%s", got, label, n/2, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "task double") {
		t.Errorf("a progress line names the task, which every cell shares:\n%s", r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != n || !sum.Accepted() || !sum.Reference {
		t.Fatalf("%d cases, accepted %v, reference %v", len(sum.Cases), sum.Accepted(), sum.Reference)
	}
	if problems := jsonConventionProblems(r.stdout); len(problems) > 0 {
		t.Fatalf("matrix run --group-by --format json breaks docs/json.md: %v", problems)
	}
	if sum.GroupBy != "provider" || len(sum.Groups) != 2 || sum.Groups[0].Key != "ref-a" || sum.Groups[0].Cases != n/2 ||
		sum.Groups[0].Accepted != n/2 || sum.Groups[1].Key != "ref-b" || sum.Groups[1].Accepted != n/2 {
		t.Fatalf("summary groups %+v", sum.Groups)
	}
	modelOf := map[string]string{"ref-a": "ref-model-a", "ref-b": "ref-model-b"}
	type cell struct {
		provider, catalog string
		repeat            int
	}
	seen := map[cell]string{}
	ctx := context.Background()
	store, err := evidence.Open(ctx, filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]evidence.RunSummary{}
	invocations := map[string]bool{}
	for _, run := range runs {
		byID[run.RunID] = run
		invocations[run.Envelope.InvocationID] = true
	}
	if len(runs) != n || len(invocations) != 1 {
		t.Fatalf("%d runs in %d invocations, want %d in 1", len(runs), len(invocations), n)
	}
	for _, c := range sum.Cases {
		e := byID[c.RunID].Envelope
		if e.Provider != c.Provider || e.Model != modelOf[e.Provider] || e.Model != c.Model || e.Task != "double" || e.Repeat != c.Repeat ||
			e.BaseURL != "" || e.Case != c.Catalog || byID[c.RunID].Verdict == nil || byID[c.RunID].Verdict.Verdict != "accepted" {
			t.Fatalf("run %s: envelope %+v, summary case %+v", c.RunID, e, c.CaseResult)
		}
		// The answered model is the configured one: the routing check compared them.
		routing := ""
		for _, ch := range c.Checks {
			if ch.Name == "routing" {
				routing = ch.Status
			}
		}
		if routing != "passed" {
			t.Fatalf("run %s: routing check %q, want passed", c.RunID, routing)
		}
		k := cell{e.Provider, e.Case, e.Repeat}
		if prev, dup := seen[k]; dup {
			t.Fatalf("runs %s and %s are the same cell %+v: a repeat is its own run", prev, c.RunID, k)
		}
		seen[k] = c.RunID
	}
	for _, p := range []string{"ref-a", "ref-b"} {
		for _, cs := range cases {
			for rep := 1; rep <= 2; rep++ {
				if seen[cell{p, cs, rep}] == "" {
					t.Fatalf("no run of %s %s repeat %d", p, cs, rep)
				}
			}
		}
	}
	store.Close()
	// The invocation's reports (written by matrix run) group by provider and show each case's
	// provider, model and repeat; `assay report` groups by any axis.
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Cases by provider", fmt.Sprintf("| ref-a | %d | %d | 0 |", n/2, n/2), fmt.Sprintf("| ref-b | %d | %d | 0 |", n/2, n/2),
		"`ref-model-a`", "`ref-model-b`", "task double, repeat #2", "Reference results"} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("report.md lacks %q", want)
		}
	}
	for axis, keys := range map[string][]string{"repeat": {"1", "2"}, "model": {"ref-model-a", "ref-model-b"}, "case": slices.Sorted(slices.Values(cases))} {
		r := runCLI(t, "report", "--out", out, "--format", "json", "--group-by", axis)
		if r.code != 0 {
			t.Fatalf("report --group-by %s: exit %d %s", axis, r.code, r.stderr)
		}
		var rep reports.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.GroupBy != axis || len(rep.Groups) != len(keys) || rep.Totals.Cases != n {
			t.Fatalf("report --group-by %s: %d groups %+v", axis, len(rep.Groups), rep.Groups)
		}
		for i, g := range rep.Groups {
			if g.Key != keys[i] || g.Totals.Cases != n/len(keys) || g.Totals.ByVerdict["accepted"] != n/len(keys) {
				t.Fatalf("report --group-by %s: group %d = %+v", axis, i, g)
			}
		}
		for _, c := range rep.Invocations[0].Cases {
			if c.Model != modelOf[c.Provider] || c.Task != "double" || c.Repeat < 1 || c.Repeat > 2 || !c.Reference || c.Verdict != "accepted" {
				t.Fatalf("report case %+v", c)
			}
			if c.TaskFile.Name != "double" || len(c.TaskFile.SHA256) != 64 || c.TaskFile.Status != reports.TaskFileMatches ||
				c.TaskFile.ReferenceSolution == nil || !*c.TaskFile.ReferenceSolution {
				t.Fatalf("report case %s: task file %+v", c.RunID, c.TaskFile)
			}
		}
	}
	// A replay re-applies the run's recorded provider, model, task and repeat, never anything given now.
	last := cases[len(cases)-1]
	target := seen[cell{"ref-b", last, 2}]
	if rr := runCLI(t, "replay", "verify", target, "--out", out, "--format", "json"); rr.code != 0 {
		t.Fatalf("replay verify %s: exit %d\n%s\n%s", target, rr.code, rr.stdout, rr.stderr)
	}
	store, err = evidence.Open(ctx, filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if runs, err = store.Runs(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()
	replays := 0
	for _, run := range runs {
		if run.CorrectsRunID == target {
			replays++
			if e := run.Envelope; e.Model != "ref-model-b" || e.Task != "double" || e.Repeat != 2 || e.Case != last {
				t.Fatalf("replay run %s envelope %+v, want the replayed run's model, task and repeat", run.RunID, e)
			}
		}
	}
	if replays != 1 {
		t.Fatalf("%d replay runs of %s, want 1", replays, target)
	}
}
