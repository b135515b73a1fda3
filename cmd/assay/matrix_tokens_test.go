package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
)

// A negative token limit is bad input: one line naming the flag, exit 2, nothing written.
func TestMatrixRunRefusesNegativeTokenBudgets(t *testing.T) {
	dir := t.TempDir()
	for flag, h := range map[string]harness.Options{"--member-tokens": {MemberTokens: -1}, "--team-tokens": {TeamTokens: -1}} {
		t.Run(flag, func(t *testing.T) {
			h.OutDir = filepath.Join(dir, strings.TrimPrefix(flag, "--"))
			r := matrixRun(t, h, "")
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", r.code, r.stderr)
			}
			oneLine(t, r, flag+" -1 is negative (0 means no limit)")
			if _, err := os.Stat(h.OutDir); !os.IsNotExist(err) {
				t.Fatalf("%s was created", h.OutDir)
			}
		})
	}
}

// --team-tokens small enough that the second provider request is refused: the case is rejected
// (exit 1) and the report names the token budget.
func TestMatrixRunTeamTokensRejectsTheCase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "sequential", "--team-tokens", "1")
	if r.code != 1 || !strings.Contains(r.stdout, "rejected") {
		t.Fatalf("exit %d, stdout %s; want 1 with the case rejected", r.code, r.stdout)
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), "token budget") {
		t.Fatalf("report.md does not name the token budget:\n%s", report)
	}
}
