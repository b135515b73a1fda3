package oracle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// pytestSummary matches pytest's closing line once the "=" framing is
// trimmed: "1 failed, 2 passed, 1 skipped in 0.05s", "no tests ran in 0.01s",
// "3 passed in 62.10s (0:01:02)".
var pytestSummary = regexp.MustCompile(`^((?:\d+ [a-z]+)(?:, \d+ [a-z]+)*|no tests ran) in [0-9.]+s(?: \([0-9:]+\))?$`)

// pytestCounts is the tally of one pytest output file.
type pytestCounts struct {
	found                           bool
	passed, failed, skipped, errors int
	// failedTests holds the node ids of the "FAILED" and "ERROR" lines of
	// the short summary, in order.
	failedTests []string
}

// pytestExitMeaning explains pytest's exit codes (pytest.ExitCode).
var pytestExitMeaning = map[int]string{
	1: "tests failed",
	2: "interrupted (e.g. a collection error)",
	3: "internal error",
	4: "usage error",
	5: "no tests collected",
}

// RunPytest runs the member-written Python tests in dir with pytest under
// [Run], choosing the interpreter with FindPython(ctx, true): the first
// python3 on PATH that imports pytest. It is RunPytestWith with a zero Python.
func RunPytest(ctx context.Context, dir, outputPath string, deadline time.Duration) (TestRunResult, error) {
	return RunPytestWith(ctx, Python{}, dir, outputPath, deadline)
}

// RunPytestWith runs `<python> -I -B -m pytest -q -p no:cacheprovider` in dir
// under [Run]: its own process group, output to a file, the deadline
// (DefaultBuildDeadline, 120 s, when zero or negative) and DefaultCleanup.
// py is the interpreter; its zero value means FindPython(ctx, true).
//
// -I keeps the member's directory off sys.path while pytest itself is
// imported (a pytest.py planted there cannot stand in for pytest) and ignores
// PYTHON* variables; -B and -p no:cacheprovider keep pytest from writing
// __pycache__ or .pytest_cache into the member's directory. The environment
// is PATH, HOME and TMPDIR only, plus PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 so
// that plugins installed on the machine do not change what runs. pytest's
// "prepend" import mode still puts each test file's directory on sys.path,
// so tests import the member's modules as usual.
//
// Output goes to outputPath, or, when it is empty, to a new file
// "<base>-pytest-*.log" in dir's parent (outside the member's directory,
// never a pipe). Passed, Failed, Skipped and Errors are parsed from pytest's
// closing summary line in that file.
//
// Verdict precedence: cancelled; timeout; cleanup_fault (leftover
// processes); no_tests (exit 5, nothing collected); failed (any other
// non-zero exit: failures, collection errors, usage or internal errors);
// incomplete_report (exit 0 without a summary line, e.g. a test that ended
// the process); failed (a summary with failures or errors despite exit 0);
// no_tests (zero passed, even when some were skipped); passed. No usable
// interpreter is VerdictUnavailable, never a pass.
//
// It returns an error only for bad input: dir missing or not a directory, or
// an output file that cannot be created. It is safe for concurrent use.
func RunPytestWith(ctx context.Context, py Python, dir, outputPath string, deadline time.Duration) (TestRunResult, error) {
	res := TestRunResult{ExitCode: -1}
	absDir, err := testDir(dir)
	if err != nil {
		return res, err
	}
	if deadline <= 0 {
		deadline = DefaultBuildDeadline
	}
	if outputPath == "" {
		f, err := os.CreateTemp(filepath.Dir(absDir), filepath.Base(absDir)+"-pytest-*.log")
		if err != nil {
			return res, fmt.Errorf("oracle: pytest output next to %s: %w", absDir, err)
		}
		outputPath = f.Name()
		if err := f.Close(); err != nil {
			return res, fmt.Errorf("oracle: pytest output %s: %w", outputPath, err)
		}
	}
	res.OutputPath = outputPath

	if py.Path == "" {
		found, err := FindPython(ctx, true)
		switch {
		case ctx.Err() != nil:
			res.Verdict, res.Detail = VerdictCancelled, "cancelled by the caller while choosing the interpreter"
			return res, nil
		case err != nil:
			res.Verdict, res.Detail = VerdictUnavailable, truncate(err.Error(), summaryLimit)
			return res, nil
		}
		py = found
	}
	res.Interpreter = py.String()

	env := append(pythonEnv(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1")
	run, err := Run(ctx, Command{
		Path: py.Path, Args: []string{"-I", "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider"}, Dir: absDir, Env: env,
		OutputPath: outputPath, Deadline: deadline,
	})
	if err != nil {
		if errors.Is(err, ErrInvalidCommand) {
			return res, err
		}
		res.Verdict = VerdictUnavailable
		res.Detail = fmt.Sprintf("pytest could not start: %v", err)
		return res, nil
	}
	res.ExitCode = run.ExitCode
	res.Duration = run.Duration
	counts := countPytest(readOutputLines(outputPath))
	res.Passed, res.Failed, res.Skipped, res.Errors = counts.passed, counts.failed, counts.skipped, counts.errors

	switch {
	case run.Cancelled:
		res.Verdict, res.Detail = VerdictCancelled, "cancelled by the caller; the process group was killed"
	case run.TimedOut:
		res.Verdict, res.Detail = VerdictTimeout, fmt.Sprintf("pytest exceeded its %s deadline; the process group was killed", deadline)
	case run.CleanupFault:
		res.Verdict, res.Detail = VerdictCleanupFault, "processes of pytest survived SIGKILL past the cleanup deadline"
	case run.Leftover:
		res.Verdict, res.Detail = VerdictCleanupFault, "processes of pytest were still alive after it exited; they were killed"
	case run.ExitCode == 5:
		res.Verdict, res.Detail = VerdictNoTests, "pytest collected no tests; nothing was verified"
	case run.ExitCode != 0:
		res.Verdict, res.Detail = VerdictFailed, counts.failureDetail(run.ExitCode, outputPath)
	case !counts.found:
		res.Verdict, res.Detail = VerdictIncompleteReport, "pytest exited 0 without its summary line: "+summarizeOutput(outputPath)
	case counts.failed > 0 || counts.errors > 0:
		res.Verdict, res.Detail = VerdictFailed, counts.failureDetail(run.ExitCode, outputPath)
	case counts.passed == 0:
		res.Verdict, res.Detail = VerdictNoTests, fmt.Sprintf("no test passed (%d skipped); nothing was verified", counts.skipped)
	default:
		res.Verdict, res.Detail = VerdictPassed, fmt.Sprintf("%d passed, %d skipped", counts.passed, counts.skipped)
	}
	return res, nil
}

// testDir returns dir as an absolute path, or an error when it is missing
// or not a directory.
func testDir(dir string) (string, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("oracle: test dir %s: %w", dir, err)
	}
	info, err := os.Stat(absDir)
	if err != nil {
		return "", fmt.Errorf("oracle: test dir: %w", err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("oracle: test dir %s: not a directory", absDir)
	}
	return absDir, nil
}

// countPytest reads pytest -q output lines. The last line that matches the
// summary pattern (after trimming "=" framing) gives the counts: pytest
// prints it last, after any captured output of failing tests, so a test that
// prints a summary-looking line cannot override it. "FAILED x" and
// "ERROR x" lines of the short test summary name the failures.
func countPytest(lines []string) pytestCounts {
	var c pytestCounts
	for _, raw := range lines {
		line := strings.TrimSpace(strings.Trim(raw, "= "))
		if m := pytestSummary.FindStringSubmatch(line); m != nil {
			c = pytestCounts{found: true, failedTests: c.failedTests}
			if m[1] != "no tests ran" {
				for _, part := range strings.Split(m[1], ", ") {
					num, word, _ := strings.Cut(part, " ")
					n, _ := strconv.Atoi(num)
					switch word {
					case "passed":
						c.passed = n
					case "failed":
						c.failed = n
					case "skipped":
						c.skipped = n
					case "error", "errors":
						c.errors = n
					}
				}
			}
			continue
		}
		for _, prefix := range []string{"FAILED ", "ERROR "} {
			if strings.HasPrefix(raw, prefix) {
				id, _, _ := strings.Cut(strings.TrimPrefix(raw, prefix), " - ")
				c.failedTests = append(c.failedTests, strings.TrimSpace(id))
			}
		}
	}
	return c
}

// failureDetail explains a failed pytest run in one line.
func (c pytestCounts) failureDetail(exitCode int, outputPath string) string {
	var parts []string
	if c.found {
		parts = append(parts, fmt.Sprintf("%d passed, %d failed, %d errors", c.passed, c.failed, c.errors))
	}
	if len(c.failedTests) > 0 {
		parts = append(parts, strings.Join(firstN(c.failedTests, 5), ", "))
	}
	if !c.found && len(c.failedTests) == 0 {
		parts = append(parts, summarizeOutput(outputPath))
	}
	how := fmt.Sprintf("exit status %d", exitCode)
	if meaning, ok := pytestExitMeaning[exitCode]; ok {
		how += " (" + meaning + ")"
	} else if exitCode < 0 {
		how = "killed by a signal"
	}
	parts = append(parts, how)
	return truncate(strings.Join(parts, "; "), summaryLimit)
}
