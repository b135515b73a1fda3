package oracle

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testPytestPython finds the pytest interpreter once for the tests that do
// not test the discovery itself.
var testPytestPython = sync.OnceValues(func() (Python, error) { return FindPython(context.Background(), true) })

// requirePytest returns an interpreter that imports pytest, skipping when the
// machine has none (.ci/run installs Debian's python3-pytest, so CI has one).
func requirePytest(t *testing.T) Python {
	t.Helper()
	py, err := testPytestPython()
	if err != nil {
		t.Skipf("no python3 with pytest (.ci/run installs python3-pytest): %v", err)
	}
	return py
}

// writePyProject writes files into a fresh member directory and returns it.
func writePyProject(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "member")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const pyModule = "def double(x):\n    return 2 * x\n"

func TestRunPytest(t *testing.T) {
	py := requirePytest(t)
	tests := []struct {
		name     string
		files    map[string]string
		deadline time.Duration
		want     TestRunResult
		detail   string
	}{
		{
			name: "passing tests pass, skips counted apart",
			files: map[string]string{"test_double.py": `import pytest
from double import double

def test_two():
    assert double(2) == 4

@pytest.mark.parametrize("x", [1, 2, 3])
def test_many(x):
    assert double(x) == 2 * x

@pytest.mark.skip(reason="later")
def test_later():
    pass
`},
			want:   TestRunResult{Verdict: VerdictPassed, Passed: 4, Skipped: 1, ExitCode: 0},
			detail: "4 passed, 1 skipped",
		},
		{
			name: "a failing test and a fixture error fail",
			files: map[string]string{"test_double.py": `import pytest
from double import double

def test_ok():
    assert double(2) == 4

def test_wrong():
    print("9 passed in 0.01s")
    assert double(3) == 5

@pytest.fixture
def broken():
    raise RuntimeError("fixture")

def test_broken(broken):
    pass
`},
			want:   TestRunResult{Verdict: VerdictFailed, Passed: 1, Failed: 1, Errors: 1, ExitCode: 1},
			detail: "test_double.py::test_wrong",
		},
		{
			name:   "no tests is not a pass",
			files:  map[string]string{},
			want:   TestRunResult{Verdict: VerdictNoTests, ExitCode: 5},
			detail: "collected no tests",
		},
		{
			name:   "only skipped tests is not a pass",
			files:  map[string]string{"test_later.py": "import pytest\n\n@pytest.mark.skip\ndef test_later():\n    pass\n"},
			want:   TestRunResult{Verdict: VerdictNoTests, Skipped: 1, ExitCode: 0},
			detail: "1 skipped",
		},
		{
			name:   "a collection error fails",
			files:  map[string]string{"test_bad.py": "import no_such_module\n\ndef test_x():\n    pass\n"},
			want:   TestRunResult{Verdict: VerdictFailed, Errors: 1, ExitCode: 2},
			detail: "interrupted",
		},
		{
			name:     "a hanging test times out",
			files:    map[string]string{"test_hang.py": "import time\n\ndef test_hang():\n    time.sleep(3600)\n"},
			deadline: 2 * time.Second,
			want:     TestRunResult{Verdict: VerdictTimeout, ExitCode: -1},
			detail:   "deadline",
		},
		{
			name:   "a test that ends the process with status 0 leaves no summary",
			files:  map[string]string{"test_exit.py": "import os\n\ndef test_exit():\n    print('5 passed in 0.01s', flush=True)\n    os._exit(0)\n"},
			want:   TestRunResult{Verdict: VerdictIncompleteReport, ExitCode: 0},
			detail: "without its summary line",
		},
		{
			// With -I the member's directory is not on sys.path when pytest
			// is imported, so a planted pytest.py cannot claim a pass.
			name: "a planted pytest.py does not replace pytest",
			files: map[string]string{
				"pytest.py":      "print('7 passed in 0.01s')\n",
				"test_double.py": "from double import double\n\ndef test_wrong():\n    assert double(1) == 3\n",
			},
			want:   TestRunResult{Verdict: VerdictFailed, Failed: 1, ExitCode: 1},
			detail: "test_wrong",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"double.py": pyModule}
			for k, v := range tt.files {
				files[k] = v
			}
			dir := writePyProject(t, files)
			res, err := RunPytestWith(context.Background(), py, dir, "", tt.deadline)
			if err != nil {
				t.Fatal(err)
			}
			got := TestRunResult{Verdict: res.Verdict, Passed: res.Passed, Failed: res.Failed, Skipped: res.Skipped, Errors: res.Errors, ExitCode: res.ExitCode}
			if got != tt.want {
				t.Fatalf("RunPytest = %+v (%s), want %+v", got, res.Detail, tt.want)
			}
			if !strings.Contains(res.Detail, tt.detail) {
				t.Errorf("Detail = %q, want it to mention %q", res.Detail, tt.detail)
			}
			if filepath.Dir(res.OutputPath) != filepath.Dir(dir) || res.Interpreter != py.String() {
				t.Errorf("OutputPath=%q Interpreter=%q; want a file in %q, run by %s", res.OutputPath, res.Interpreter, filepath.Dir(dir), py)
			}
			// Nothing is written into the member's directory.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(files) {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("member directory holds %v, want only the %d files written", names, len(files))
			}
		})
	}
}

// Without an interpreter given, RunPytest chooses one that imports pytest;
// with no python3 at all the verdict is unavailable, never a pass.
func TestRunPytestChoosesOrIsUnavailable(t *testing.T) {
	want := requirePytest(t)
	dir := writePyProject(t, map[string]string{"double.py": pyModule, "test_double.py": "from double import double\n\ndef test_two():\n    assert double(2) == 4\n"})
	res, err := RunPytest(context.Background(), dir, filepath.Join(t.TempDir(), "pytest.log"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictPassed || res.Passed != 1 || res.Interpreter != want.String() {
		t.Fatalf("RunPytest = %+v, want passed by %s", res, want)
	}

	t.Setenv("PATH", t.TempDir())
	res, err = RunPytest(context.Background(), dir, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnavailable || !strings.Contains(res.Detail, "no python3") {
		t.Fatalf("Verdict = %q (%s), want unavailable", res.Verdict, res.Detail)
	}
}

func TestRunPytestBadDir(t *testing.T) {
	t.Parallel()
	_, err := RunPytest(context.Background(), filepath.Join(t.TempDir(), "missing"), "", 0)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error = %v, want fs.ErrNotExist", err)
	}
}

func TestCountPytest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lines []string
		want  pytestCounts
	}{
		{name: "quiet summary", lines: []string{"..F", "1 failed, 2 passed in 0.05s"}, want: pytestCounts{found: true, passed: 2, failed: 1}},
		{name: "framed summary with warnings and long time", lines: []string{"===== 3 passed, 1 skipped, 2 warnings in 62.10s (0:01:02) ====="},
			want: pytestCounts{found: true, passed: 3, skipped: 1}},
		{name: "errors", lines: []string{"ERROR test_x.py::test_y - RuntimeError: x", "1 passed, 2 errors in 0.1s"},
			want: pytestCounts{found: true, passed: 1, errors: 2, failedTests: []string{"test_x.py::test_y"}}},
		{name: "no tests ran", lines: []string{"no tests ran in 0.01s"}, want: pytestCounts{found: true}},
		{name: "the last summary wins", lines: []string{"9 passed in 0.01s", "FAILED t.py::test_a - assert", "1 failed in 0.02s"},
			want: pytestCounts{found: true, failed: 1, failedTests: []string{"t.py::test_a"}}},
		{name: "no summary", lines: []string{"Traceback (most recent call last):", "boom"}, want: pytestCounts{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := countPytest(tt.lines)
			if got.found != tt.want.found || got.passed != tt.want.passed || got.failed != tt.want.failed ||
				got.skipped != tt.want.skipped || got.errors != tt.want.errors ||
				strings.Join(got.failedTests, ",") != strings.Join(tt.want.failedTests, ",") {
				t.Fatalf("countPytest = %+v, want %+v", got, tt.want)
			}
		})
	}
}
