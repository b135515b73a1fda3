package oracle

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeModule creates a Go module named example.com/m in a fresh directory
// with the given files and returns the directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "module")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files["go.mod"] = "module example.com/m\n\ngo 1.22\n"
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const moduleSource = "package m\n\n// Double returns 2*x.\nfunc Double(x int) int { return 2 * x }\n"

func TestRunGoTest(t *testing.T) {
	requireGo(t)
	tests := []struct {
		name     string
		testFile string
		deadline time.Duration
		want     GoTestResult
		detail   string
	}{
		{
			name: "passing tests pass, subtests not counted",
			testFile: `package m

import "testing"

func TestDouble(t *testing.T) {
	if Double(2) != 4 {
		t.Fatal("Double(2) != 4")
	}
}

func TestTable(t *testing.T) {
	for _, x := range []int{1, 2} {
		t.Run("case", func(t *testing.T) {
			if Double(x) != 2*x {
				t.Fatal(x)
			}
		})
	}
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
`,
			want:   GoTestResult{Verdict: VerdictPassed, Passed: 2, Skipped: 1, ExitCode: 0},
			detail: "2 passed, 1 skipped",
		},
		{
			name: "a failing test fails",
			testFile: `package m

import "testing"

func TestDouble(t *testing.T) {}

func TestWrong(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Fatal("wrong") })
}
`,
			want:   GoTestResult{Verdict: VerdictFailed, Passed: 1, Failed: 1, ExitCode: 1},
			detail: "example.com/m.TestWrong",
		},
		{
			name:   "no tests is not a pass",
			want:   GoTestResult{Verdict: VerdictNoTests, ExitCode: 0},
			detail: "no test passed",
		},
		{
			name:     "only skipped tests is not a pass",
			testFile: "package m\n\nimport \"testing\"\n\nfunc TestLater(t *testing.T) { t.Skip() }\n",
			want:     GoTestResult{Verdict: VerdictNoTests, Skipped: 1, ExitCode: 0},
			detail:   "1 skipped",
		},
		{
			name:     "a test that does not compile fails",
			testFile: "package m\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { undefinedThing() }\n",
			want:     GoTestResult{Verdict: VerdictFailed, ExitCode: 1},
			detail:   "undefinedThing",
		},
		{
			name:     "a hanging test times out",
			testFile: "package m\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestHang(t *testing.T) { time.Sleep(time.Hour) }\n",
			deadline: 3 * time.Second,
			want:     GoTestResult{Verdict: VerdictTimeout, ExitCode: -1},
			detail:   "deadline",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"m.go": moduleSource}
			if tt.testFile != "" {
				files["m_test.go"] = tt.testFile
			}
			dir := writeModule(t, files)
			res, err := RunGoTest(context.Background(), dir, "", tt.deadline)
			if err != nil {
				t.Fatal(err)
			}
			got := GoTestResult{Verdict: res.Verdict, Passed: res.Passed, Failed: res.Failed, Skipped: res.Skipped, ExitCode: res.ExitCode}
			if got != tt.want {
				t.Fatalf("RunGoTest = %+v (%s), want %+v", got, res.Detail, tt.want)
			}
			if !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("Detail = %q, want it to mention %q", res.Detail, tt.detail)
			}
			if filepath.Dir(res.OutputPath) != filepath.Dir(dir) {
				t.Errorf("OutputPath = %q, want a file in %q, outside the module", res.OutputPath, filepath.Dir(dir))
			}
			if _, err := os.Stat(res.OutputPath); err != nil {
				t.Errorf("output file: %v", err)
			}
		})
	}
}

func TestRunGoTestGivenOutputPath(t *testing.T) {
	requireGo(t)
	t.Parallel()
	dir := writeModule(t, map[string]string{"m.go": moduleSource, "m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n"})
	out := filepath.Join(t.TempDir(), "gotest.jsonl")
	res, err := RunGoTest(context.Background(), dir, out, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictPassed || res.Passed != 1 || res.OutputPath != out {
		t.Fatalf("RunGoTest = %+v, want passed with output at %s", res, out)
	}
	data, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(data), `"Test":"TestOK"`) {
		t.Fatalf("output %s lacks the test2json stream: %v", out, err)
	}
}

func TestRunGoTestWithoutGoIsUnavailable(t *testing.T) {
	dir := writeModule(t, map[string]string{"m.go": moduleSource})
	t.Setenv("PATH", t.TempDir())
	res, err := RunGoTest(context.Background(), dir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnavailable {
		t.Fatalf("Verdict = %q, want unavailable", res.Verdict)
	}
}

func TestRunGoTestBadDir(t *testing.T) {
	t.Parallel()
	_, err := RunGoTest(context.Background(), filepath.Join(t.TempDir(), "missing"), "", 0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error = %v, want fs.ErrNotExist", err)
	}
}

// TestRunGoTestTrimpathKeepsEvidence runs the same failing module in two directories: with
// -trimpath both runs still fail with both failures counted, and the output names files relative
// to the module (a t.Error line by base name, a panic trace as example.com/m/m_test.go), never
// the absolute directory. A passing module run twice in one directory runs its tests both times:
// results are never cached.
func TestRunGoTestTrimpathKeepsEvidence(t *testing.T) {
	t.Parallel()
	failing := `package m

import "testing"

func TestWrong(t *testing.T) { t.Error("wrong answer") }

func TestPanic(t *testing.T) { panic("boom") }
`
	for i := range 2 {
		dir := writeModule(t, map[string]string{"m.go": moduleSource, "m_test.go": failing})
		res, err := RunGoTest(context.Background(), dir, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != VerdictFailed || res.Failed != 2 || res.ExitCode != 1 {
			t.Fatalf("run %d: RunGoTest = %s, %d failed, exit %d (%s); want failed, 2, 1", i, res.Verdict, res.Failed, res.ExitCode, res.Detail)
		}
		out, err := os.ReadFile(res.OutputPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"m_test.go:5: wrong answer", "example.com/m/m_test.go:7"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("run %d: output does not mention %q:\n%s", i, want, out)
			}
		}
		if strings.Contains(string(out), dir) {
			t.Errorf("run %d: output names the absolute directory %s; -trimpath should keep it out:\n%s", i, dir, out)
		}
	}

	dir := writeModule(t, map[string]string{"m.go": moduleSource, "m_test.go": "package m\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n"})
	for i := range 2 {
		res, err := RunGoTest(context.Background(), dir, filepath.Join(t.TempDir(), "out.jsonl"), 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.ReadFile(res.OutputPath)
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != VerdictPassed || res.Passed != 1 || strings.Contains(string(out), "(cached)") {
			t.Fatalf("run %d: RunGoTest = %s, %d passed; want passed, 1, not cached:\n%s", i, res.Verdict, res.Passed, out)
		}
	}
}
