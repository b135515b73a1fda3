package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
)

func TestMatrixRunAllAcceptsEveryCaseThroughTheCLI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs every catalog case, building and running member code; skipped with -short")
	}
	// Every catalog case once in the default test run, in python/single-file; the shared default run
	// (defaultMatrixRun) is the main job's own go/standard. -tags grid adds go/single-file here and
	// go/standard and python/standard in the harness: the whole grid (.ci/run runs it).
	for _, c := range append([]gridCombination{{"python", "single-file"}}, gridExtra...) {
		t.Run(c.language+"/"+c.profile, func(t *testing.T) {
			out := t.TempDir()
			r := runCLI(t, "matrix", "run", "--out", out, "--formations", "all", "--language", c.language, "--profile", c.profile,
				"--concurrency", "2", "--format", "json")
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			var sum summaryJSON
			if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if len(sum.Cases) != len(harness.Catalog()) || !sum.Accepted() || !sum.Reference {
				t.Fatalf("%d cases, accepted %v", len(sum.Cases), sum.Accepted())
			}
			// Progress went to stderr, one line per step, never to stdout.
			if strings.Count(r.stderr, ": running") != len(harness.Catalog()) || strings.Count(r.stderr, ": accepted in ") != len(harness.Catalog()) {
				t.Fatalf("progress on stderr:\n%s", r.stderr)
			}
			if v := runCLI(t, "verify", "--out", out); v.code != 0 {
				t.Fatalf("verify: %d %s", v.code, v.stderr)
			}
			// The risk register finds nothing in a clean --formations all store (reports/audit).
			if a := runCLI(t, "audit", "--out", out, "--format", "json"); a.code != 0 || strings.Contains(a.stdout, `"status": "finding"`) {
				t.Fatalf("audit: exit %d\n%s%s", a.code, a.stdout, a.stderr)
			}
			checkReportInChromium(t, out)
		})
	}
}

func TestMatrixRunRejectedCaseNamesEveryFailedCheck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	out := t.TempDir()
	language := caseLanguage(t)
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "reflection", "--format", "json", "--language", language,
		"--reference-fault", "critic:1:replace_reply:{\"verdict\":\"maybe\",\"feedback\":\"x\"}")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	reasons := strings.Join(sum.Cases[0].Verdict.Reasons, "\n")
	for _, check := range []string{"members", "formation"} {
		if !strings.Contains(reasons, check+" failed") {
			t.Fatalf("rejection does not name %s:\n%s", check, reasons)
		}
	}
	oneLine(t, result{stderr: lastLine(r.stderr)}, "reflection/standard/"+language+" rejected")
}

// matrixRun runs `assay matrix run` with h (OutDir set by the caller) and format.
func matrixRun(t *testing.T, h harness.Options, format string) result {
	t.Helper()
	return call(t, "", func(ctx context.Context, io IOStreams) error {
		return runMatrixRun(ctx, &MatrixRunOptions{IO: io, Harness: h, Format: format})
	})
}

func TestMatrixRunBadCatalogInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		opts harness.Options
		want string
	}{
		{harness.Options{Formations: []string{"swarm"}}, `--formations names unknown formation "swarm"`},
		{harness.Options{Formations: []string{"vote", "parallel+vote"}}, `--formations lists case "parallel+vote" twice`},
		{harness.Options{Profile: "triple"}, `--profile "triple" is unknown (known: single-file, standard)`},
		{harness.Options{Language: "rust"}, `--language "rust" is unknown (known: go, python)`},
		{harness.Options{Concurrency: -2}, "--concurrency -2 is negative"},
		{harness.Options{Formations: []string{"parallel+capacity"}, Capacity: "two"}, `--capacity "two" is neither a number of admission slots`},
		{harness.Options{Formations: []string{"sequential"}, Capacity: "2"}, "--capacity 2 cannot be applied: capacity_aware=true cannot be set on a matrix case: only the plain parallel cases"},
		{harness.Options{Formations: []string{"parallel"}, FormationOptions: []string{"worktree_cleanup=true"}}, "--formation-option worktree_cleanup cannot be set on a matrix case"},
	} {
		c.opts.OutDir = filepath.Join(dir, "o")
		r := matrixRun(t, c.opts, "")
		if r.code != 2 {
			t.Fatalf("%+v: exit %d (%s)", c.opts, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
		if _, err := os.Stat(c.opts.OutDir); err == nil {
			t.Fatalf("%+v: %s was created", c.opts, c.opts.OutDir)
		}
	}
	// A fault that does not parse is refused by the parser.
	if got, code := parse(t, NewCmdMatrix, "matrix", "run", "--reference-fault", "a:0:slow:soon"); code != 2 || got != nil {
		t.Fatalf("a fault with a bad delay: exit %d", code)
	}
}

// A tool-call budget of 0 means the default, as harness.Options documents: the case runs under
// DefaultMemberToolCalls and DefaultTeamToolCalls, as its boundary configuration records.
func TestMatrixRunReadsZeroToolCallBudgetsAsTheDefaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	// The shared sequential case ran with MemberToolCalls, TeamToolCalls and RequestTimeout 0.
	out := sequentialCaseRun(t).out
	q := sqlQuery(t, filepath.Join(out, "evidence.duckdb"), SQLOptions{Format: "csv", Query: `SELECT payload->>'$.member_tool_calls' AS m,
		payload->>'$.team_tool_calls' AS t FROM events WHERE type = 'boundary_configured'`})
	if q.code != 0 || !strings.Contains(q.stdout, fmt.Sprintf("%d,%d", harness.DefaultMemberToolCalls, harness.DefaultTeamToolCalls)) {
		t.Fatalf("recorded budgets: exit %d %q %s", q.code, q.stdout, q.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}
