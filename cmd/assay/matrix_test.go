package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
)

func TestMatrixRunAllAcceptsEveryCaseInBothOtherCombinations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 30 cases that build and run member code; skipped with -short")
	}
	// The harness tests cover go/standard and python/single-file; the CLI covers the other two.
	for _, c := range []struct{ language, profile string }{{"go", "single-file"}, {"python", "standard"}} {
		t.Run(c.language+"/"+c.profile, func(t *testing.T) {
			out := t.TempDir()
			r := runCLI(t, "matrix", "run", "--out", out, "--formations", "all", "--language", c.language, "--profile", c.profile,
				"--concurrency", "2", "--format", "json")
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			var sum harness.Summary
			if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if len(sum.Cases) != 16 || !sum.Accepted() || !sum.Reference {
				t.Fatalf("%d cases, accepted %v", len(sum.Cases), sum.Accepted())
			}
			// Progress went to stderr, one line per step, never to stdout.
			if strings.Count(r.stderr, ": running") != 16 || strings.Count(r.stderr, ": accepted in ") != 16 {
				t.Fatalf("progress on stderr:\n%s", r.stderr)
			}
			if v := runCLI(t, "verify", "--out", out); v.code != 0 {
				t.Fatalf("verify: %d %s", v.code, v.stderr)
			}
		})
	}
}

func TestMatrixRunRejectedCaseNamesEveryFailedCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "reflection", "--format", "json",
		"--reference-fault", "critic:1:replace_reply:{\"verdict\":\"maybe\",\"feedback\":\"x\"}")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	var sum harness.Summary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	reasons := strings.Join(sum.Cases[0].Verdict.Reasons, "\n")
	for _, check := range []string{"members", "formation"} {
		if !strings.Contains(reasons, check+" failed") {
			t.Fatalf("rejection does not name %s:\n%s", check, reasons)
		}
	}
	oneLine(t, result{stderr: lastLine(r.stderr)}, "reflection/standard/go rejected")
}

func TestMatrixRunBadCatalogInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--formations", "swarm"}, `unknown formation "swarm"`},
		{[]string{"--formations", "vote,parallel+vote"}, `--formations lists case "parallel+vote" twice`},
		{[]string{"--profile", "triple"}, "single-file"},
		{[]string{"--language", "rust"}, "python"},
		{[]string{"--concurrency", "-2"}, "--concurrency"},
		{[]string{"--reference-fault", "a:0:slow:soon"}, "delay"},
	} {
		r := runCLI(t, append([]string{"matrix", "run", "--out", dir + "/o"}, c.args...)...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d (%s)", c.args, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}
