package oracle

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TestRunResult is what the bounded independent test runner saw, for
// [RunGoTest] and [RunPytest] alike.
type TestRunResult struct {
	// Verdict is VerdictPassed, VerdictFailed, VerdictTimeout,
	// VerdictCancelled, VerdictCleanupFault, VerdictNoTests,
	// VerdictUnavailable or (pytest only: exit 0 without its summary line)
	// VerdictIncompleteReport. Only VerdictPassed passes.
	Verdict string
	// Passed, Failed and Skipped count tests. For go test: top-level tests
	// (Test names without "/") by their final test2json action; package and
	// subtest events are not counted, so a failing subtest counts once,
	// through its parent. For pytest: the "passed", "failed" and "skipped"
	// figures of its closing summary line.
	Passed, Failed, Skipped int
	// Errors is pytest's "error" figure (errors in fixtures or collection),
	// not included in Failed; always 0 for go test, whose build and package
	// failures show as Verdict failed with ExitCode non-zero.
	Errors int
	// ExitCode is the command's exit status, -1 when it was killed or not
	// started.
	ExitCode int
	// OutputPath is the file holding the command's combined output (for go
	// test the test2json stream plus anything the go command printed as
	// text).
	OutputPath string
	// Interpreter names what ran the tests: the go tool's path, or the
	// Python interpreter (see [Python.String]) that ran pytest.
	Interpreter string
	// Duration is the wall time of the command.
	Duration time.Duration
	// Detail says why, in one line.
	Detail string
}

// GoTestResult is the result of [RunGoTest]; it is [TestRunResult], under
// the name the first callers used.
type GoTestResult = TestRunResult

// testEvent is the part of a test2json event (cmd/test2json, "go doc
// test2json") the runner reads.
type testEvent struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
}

// RunGoTest runs `go test -count=1 -trimpath -json ./...` in dir under [Run]
// with [MinimalEnv] (offline, no credentials), deadline defaulting to
// DefaultBuildDeadline (120s) when zero or negative and the cleanup deadline
// DefaultCleanup. Output goes to outputPath, or, when it is empty, to a new
// file "<base>-gotest-*.jsonl" in dir's parent (outside the module, never a
// pipe). Counts are parsed from that file afterwards.
//
// -count=1 keeps test results uncached: the tests always run. -trimpath
// keeps dir out of the compiled packages, so the go build cache reuses the
// compile and vet actions of identical sources tested in another directory
// (every matrix case has its own); it changes no verdict or count. File names
// the output shows are then module-relative: compiler errors and t.Error
// lines as before ("./x.go:3:2", "x_test.go:12:"), and panic stack traces as
// "<module path>/x.go:12" instead of the absolute path under dir.
//
// Verdict precedence: cancelled; timeout; cleanup_fault (leftover
// processes); failed (any test failed or the go command exited non-zero,
// e.g. a build failure); no_tests (zero tests passed: nothing was verified,
// even when some were skipped); passed.
//
// It returns an error only for bad input: dir missing or not a directory, or
// an output file that cannot be created. A missing go tool is the verdict
// VerdictUnavailable. It is safe for concurrent use.
func RunGoTest(ctx context.Context, dir string, outputPath string, deadline time.Duration) (GoTestResult, error) {
	res := GoTestResult{ExitCode: -1}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return res, fmt.Errorf("oracle: go test dir %s: %w", dir, err)
	}
	info, err := os.Stat(absDir)
	if err != nil {
		return res, fmt.Errorf("oracle: go test dir: %w", err)
	}
	if !info.IsDir() {
		return res, fmt.Errorf("oracle: go test dir %s: not a directory", absDir)
	}
	if deadline <= 0 {
		deadline = DefaultBuildDeadline
	}
	if outputPath == "" {
		f, err := os.CreateTemp(filepath.Dir(absDir), filepath.Base(absDir)+"-gotest-*.jsonl")
		if err != nil {
			return res, fmt.Errorf("oracle: go test output next to %s: %w", absDir, err)
		}
		outputPath = f.Name()
		if err := f.Close(); err != nil {
			return res, fmt.Errorf("oracle: go test output %s: %w", outputPath, err)
		}
	}
	res.OutputPath = outputPath

	env := MinimalEnv()
	goBin, err := resolveExecutable("go", env)
	if err != nil {
		res.Verdict = VerdictUnavailable
		res.Detail = "go tool not found on PATH"
		return res, nil
	}
	res.Interpreter = goBin
	run, err := Run(ctx, Command{
		Path: goBin, Args: []string{"test", "-count=1", "-trimpath", "-json", "./..."}, Dir: absDir, Env: env,
		OutputPath: outputPath, Deadline: deadline,
	})
	if err != nil {
		if errors.Is(err, ErrInvalidCommand) {
			return res, err
		}
		res.Verdict = VerdictUnavailable
		res.Detail = fmt.Sprintf("go test could not start: %v", err)
		return res, nil
	}
	res.ExitCode = run.ExitCode
	res.Duration = run.Duration

	counts, err := countTests(outputPath)
	if err != nil {
		return res, err
	}
	res.Passed, res.Failed, res.Skipped = counts.passed, counts.failed, counts.skipped

	switch {
	case run.Cancelled:
		res.Verdict, res.Detail = VerdictCancelled, "cancelled by the caller; the process group was killed"
	case run.TimedOut:
		res.Verdict, res.Detail = VerdictTimeout, fmt.Sprintf("go test exceeded its %s deadline; the process group was killed", deadline)
	case run.CleanupFault:
		res.Verdict, res.Detail = VerdictCleanupFault, "processes of go test survived SIGKILL past the cleanup deadline"
	case run.Leftover:
		res.Verdict, res.Detail = VerdictCleanupFault, "processes of go test were still alive after it exited; they were killed"
	case res.Failed > 0 || run.ExitCode != 0:
		res.Verdict = VerdictFailed
		res.Detail = counts.failureDetail(run.ExitCode)
	case res.Passed == 0:
		res.Verdict = VerdictNoTests
		res.Detail = fmt.Sprintf("no test passed (%d skipped); nothing was verified", res.Skipped)
	default:
		res.Verdict = VerdictPassed
		res.Detail = fmt.Sprintf("%d passed, %d skipped", res.Passed, res.Skipped)
	}
	return res, nil
}

// testCounts is the tally of one go test output file.
type testCounts struct {
	passed, failed, skipped int
	// failedTests names failed top-level tests, "pkg.TestX", in order.
	failedTests []string
	// failedPackages names packages with a build failure or a failure
	// outside any test.
	failedPackages []string
	// text holds the first lines that were not test events: the go
	// command's own errors and compiler output.
	text []string
}

// failureDetail explains a failed run in one line.
func (c testCounts) failureDetail(exitCode int) string {
	var parts []string
	if len(c.failedTests) > 0 {
		parts = append(parts, fmt.Sprintf("%d failed: %s", c.failed, strings.Join(firstN(c.failedTests, 5), ", ")))
	}
	if len(c.failedPackages) > 0 && len(c.failedTests) == 0 {
		parts = append(parts, "package failures: "+strings.Join(firstN(c.failedPackages, 5), ", "))
	}
	if len(c.text) > 0 {
		parts = append(parts, strings.Join(c.text, " | "))
	}
	parts = append(parts, fmt.Sprintf("exit status %d", exitCode))
	return truncate(strings.Join(parts, "; "), summaryLimit)
}

// firstN returns at most n leading elements of s.
func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// countTests reads a go test -json output file. Each top-level test's final
// pass/fail/skip action counts once (a test2json stream reports each test's
// outcome once; keying by package and name guards against repeats). Lines
// that are not JSON events are kept, up to three, for the detail.
func countTests(path string) (testCounts, error) {
	var c testCounts
	f, err := os.Open(path)
	if err != nil {
		return c, fmt.Errorf("oracle: read go test output %s: %w", path, err)
	}
	defer f.Close()
	final := map[string]string{}
	var order []string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if trimmed := strings.TrimSpace(string(line)); trimmed != "" {
			var ev testEvent
			if strings.HasPrefix(trimmed, "{") && json.Unmarshal([]byte(trimmed), &ev) == nil && ev.Action != "" {
				key := ev.Package + "." + ev.Test
				switch {
				case ev.Test != "" && !strings.Contains(ev.Test, "/") && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
					if _, seen := final[key]; !seen {
						order = append(order, key)
					}
					final[key] = ev.Action
				case ev.Test == "" && ev.Action == "fail" && ev.Package != "":
					c.failedPackages = append(c.failedPackages, ev.Package)
				case ev.Action == "build-fail":
					c.failedPackages = append(c.failedPackages, ev.ImportPath+" (build)")
				case ev.Action == "build-output":
					if out := strings.TrimSpace(ev.Output); out != "" && !strings.HasPrefix(out, "# ") && len(c.text) < 3 {
						c.text = append(c.text, truncate(out, 120))
					}
				}
			} else if len(c.text) < 3 {
				c.text = append(c.text, truncate(trimmed, 120))
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, fmt.Errorf("oracle: read go test output %s: %w", path, err)
		}
	}
	for _, key := range order {
		switch final[key] {
		case "pass":
			c.passed++
		case "fail":
			c.failed++
			c.failedTests = append(c.failedTests, key)
		case "skip":
			c.skipped++
		}
	}
	return c, nil
}
