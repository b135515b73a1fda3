package oracle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/assay-audit/assay/internal/digest"
)

// Verdicts of [Check], [RunGoTest] and [RunPytest]. Only VerdictPassed
// passes.
const (
	// VerdictPassed: every demanded check ran, matched the reference, and the
	// run was clean (exit 0, no leftover processes, no file changed).
	VerdictPassed = "passed"
	// VerdictFailed: the run was clean and complete, but outputs differed
	// from the reference (Check), or tests failed (RunGoTest).
	VerdictFailed = "failed"
	// VerdictTimeout: a deadline (build or execution) passed and the process
	// group was killed.
	VerdictTimeout = "timeout"
	// VerdictCrashed: the driver exited non-zero or was killed by a signal
	// (a Go panic, an uncaught Python exception), its output outgrew the
	// output limit, or the artifact did not compile with the driver.
	VerdictCrashed = "crashed"
	// VerdictIncompleteReport: the driver exited 0 but its report is
	// missing, partial, short of the demanded checks, or disagrees with the
	// oracle's own evaluation of the outputs it carries; for RunPytest,
	// pytest exited 0 without its summary line.
	VerdictIncompleteReport = "incomplete_report"
	// VerdictArtifactModified: the artifact (original or copy) or a generated
	// file hashed differently after the run.
	VerdictArtifactModified = "artifact_modified"
	// VerdictCleanupFault: processes of the run outlived the main process
	// (they were killed) or survived the kill.
	VerdictCleanupFault = "cleanup_fault"
	// VerdictCancelled: the caller's context ended the run. It wins over
	// every other verdict: nothing finished, so nothing else is known.
	VerdictCancelled = "cancelled"
	// VerdictUnavailable: the oracle could not run at all (no go tool or no
	// usable python3 on PATH, no temporary directory); nothing is known about
	// the artifact, and it is not a pass.
	VerdictUnavailable = "unavailable"
	// VerdictNoTests: RunGoTest or RunPytest ran and no test passed (none
	// collected, or only skipped ones): nothing was verified.
	VerdictNoTests = "no_tests"
)

// CheckVerdicts returns every verdict [Check] gives (no_tests is the test
// runners' alone); only passed passes. The slice is new on every call.
func CheckVerdicts() []string {
	return []string{VerdictPassed, VerdictFailed, VerdictTimeout, VerdictCrashed, VerdictIncompleteReport,
		VerdictArtifactModified, VerdictCleanupFault, VerdictCancelled, VerdictUnavailable}
}

// DefaultOutputLimit bounds the driver's output file (stdout and stderr)
// when Options.OutputLimit is zero or negative: 256 MiB.
const DefaultOutputLimit = 256 << 20

// DefaultBuildDeadline bounds the driver build when Options.BuildDeadline is
// zero or negative, and is RunGoTest's default deadline.
const DefaultBuildDeadline = 120 * time.Second

// Result is the outcome of one [Check].
type Result struct {
	// Spec is the spec's name.
	Spec string
	// Language is the artifact language checked, LanguageGo or
	// LanguagePython.
	Language string
	// Interpreter names what ran the driver: for Python the interpreter
	// executable, its version and the PATH entry it was found as (see
	// [Python.String]); for Go the go tool's path. Empty when none was found.
	Interpreter string
	// Verdict is one of the Verdict* constants; only VerdictPassed passes.
	Verdict string
	// Checks is the number of checks the driver's report says it ran; 0
	// when there was no decodable report (see Report).
	Checks int
	// Expected is the number of checks the spec demands (10,242 for double).
	Expected int
	// Failures is the number of inputs whose output differed from the
	// reference, as evaluated by the oracle. Meaningful only when Report is
	// true; otherwise 0 means "not measured", not "none".
	Failures int
	// FirstFailures holds at most 10 failures in domain and input order.
	FirstFailures []Failure
	// Report reports that a complete report, consistent with the oracle's
	// own evaluation, was read.
	Report bool
	// ArtifactSHA256 is the SHA-256 (hex, 64 chars) of the artifact as read
	// before the run; the copy that was built is exactly these bytes.
	ArtifactSHA256 string
	// ArtifactSHA256After is the SHA-256 of the artifact at its original
	// path after the run; empty when it could not be read any more.
	ArtifactSHA256After string
	// Duration is the wall time of the whole check, build included.
	Duration time.Duration
	// Detail says why, in one line.
	Detail string
	// WorkDir is the kept working directory (driver module, build.log,
	// run.log, report) when Options.WorkDir was set; empty otherwise, in
	// which case the directory was removed.
	WorkDir string
}

// Options bounds one [Check].
type Options struct {
	// WorkDir is the parent of the fresh working directory the driver module
	// is built in. Empty means the system temporary directory, and the working
	// directory is removed afterwards; otherwise it is kept and named in
	// Result.WorkDir.
	WorkDir string
	// Deadline bounds the driver's execution; default DefaultDeadline (10s).
	Deadline time.Duration
	// Cleanup bounds the wait for the process group to be gone after the
	// driver ends; default DefaultCleanup (1s).
	Cleanup time.Duration
	// BuildDeadline bounds the driver build (Go); default
	// DefaultBuildDeadline (120s).
	BuildDeadline time.Duration
	// OutputLimit bounds the driver's output file in bytes; default
	// DefaultOutputLimit (256 MiB). Past it the driver is killed and the
	// verdict is crashed.
	OutputLimit int64
	// Python is the interpreter for Python artifacts. The zero value means
	// "find one": [FindPython] runs once per Check (through a pyenv shim that
	// costs about 0.25 s). A caller checking many artifacts calls FindPython
	// once and passes its result here.
	Python Python
}

// Validate refuses negative durations and limits with an [*OptionError]
// naming the field: zero means the default, and a negative one was never
// meant. Check calls it; a caller may call it first to refuse options before
// announcing a check.
func (o Options) Validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Deadline", o.Deadline}, {"Cleanup", o.Cleanup}, {"BuildDeadline", o.BuildDeadline}} {
		if d.v < 0 {
			return &OptionError{Field: d.field, Reason: fmt.Sprintf("%s is negative (0 means the default)", d.v)}
		}
	}
	if o.OutputLimit < 0 {
		return &OptionError{Field: "OutputLimit", Reason: fmt.Sprintf("%d is negative (0 means the default)", o.OutputLimit)}
	}
	return nil
}

// execution is what a language runner observed. early, when set, is a
// verdict reached before a driver run could say anything (unavailable, a
// build failure or timeout, a cancellation); otherwise run describes the
// driver run.
type execution struct {
	early       string
	detail      string
	interpreter string
	ran         bool
	run         RunResult
	runDeadline time.Duration
	outputLimit int64
	outputPath  string
	reportPath  string
	// guarded maps every file written into the working directory that the
	// artifact could modify (its copy, the generated driver, go.mod) to the
	// SHA-256 of the bytes written.
	guarded map[string]string
}

// language is a runner descriptor: one per artifact language.
type language struct {
	// name is the Spec.Language it serves.
	name string
	// validate reports language-specific spec problems, wrapping
	// ErrInvalidSpec.
	validate func(spec Spec) error
	// execute builds and runs the driver for artifact (the bytes already
	// hashed) inside root, never returning an error: every outcome is an
	// execution.
	execute func(ctx context.Context, spec Spec, artifact []byte, root string, opts Options) execution
}

// languages returns the runner registry.
func languages() []language {
	return []language{
		{name: LanguageGo, validate: validateGoSpec, execute: executeGo},
		{name: LanguagePython, validate: validatePythonSpec, execute: executePython},
	}
}

// Check runs spec against the artifact file at artifactPath: it builds a
// driver around a copy of the artifact in a fresh working directory, runs it
// under [Run] with the deadline, and judges the report it writes. Every
// outcome of building and running the artifact is a Result verdict;
// Check returns an error only for bad input: an invalid spec (wrapping
// [ErrInvalidSpec]), a language with no runner (wrapping [ErrUnknownLanguage]),
// a negative duration or limit in opts (an [*OptionError]), a path that names
// no regular file (wrapping [ErrNoArtifact]), or an artifact that cannot be
// read (wrapping the os error).
//
// Verdict precedence, first match wins: cancelled; artifact_modified; a
// verdict reached before the run (unavailable, or the build's crashed,
// timeout or cleanup_fault); cleanup_fault; crashed for output past the
// limit; timeout; crashed; then the report: incomplete_report, failed,
// passed.
//
// Use [Spec.ForLanguage] (with [LanguageOf] for a file) to check a Python
// artifact against a built-in spec:
//
//	spec, err := oracle.DoubleSpec().ForLanguage(oracle.LanguagePython)
//	res, err := oracle.Check(ctx, spec, "double.py", oracle.Options{})
//
// Check is safe for concurrent use; each call has its own working directory.
func Check(ctx context.Context, spec Spec, artifactPath string, opts Options) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	var lang *language
	for _, l := range languages() {
		if l.name == spec.Language {
			lang = &l
			break
		}
	}
	if lang == nil {
		return Result{}, fmt.Errorf("%w: %q (spec %s)", ErrUnknownLanguage, spec.Language, spec.Name)
	}
	if err := lang.validate(spec); err != nil {
		return Result{}, err
	}
	if err := artifactFile(artifactPath); err != nil {
		return Result{}, err
	}
	data, err := os.ReadFile(artifactPath)
	if err != nil {
		return Result{}, fmt.Errorf("oracle: read artifact %s: %w", artifactPath, err)
	}
	start := time.Now()
	res := Result{Spec: spec.Name, Language: spec.Language, Expected: spec.Expected(), ArtifactSHA256: sha256Hex(data), FirstFailures: []Failure{}}

	root, err := os.MkdirTemp(opts.WorkDir, "assay-oracle-"+spec.Name+"-*")
	if err != nil {
		res.Verdict = VerdictUnavailable
		res.Detail = fmt.Sprintf("no working directory: %v", err)
		res.ArtifactSHA256After = hashFile(artifactPath)
		res.Duration = time.Since(start)
		return res, nil
	}
	if opts.WorkDir == "" {
		defer os.RemoveAll(root)
	} else {
		res.WorkDir = root
	}

	ex := lang.execute(ctx, spec, data, root, opts)
	res.Interpreter = ex.interpreter
	res.ArtifactSHA256After = hashFile(artifactPath)
	res.Verdict, res.Detail = judge(spec, ex, res.ArtifactSHA256, res.ArtifactSHA256After, &res)
	res.Duration = time.Since(start)
	return res, nil
}

// judge applies Check's verdict precedence and fills res's report fields.
func judge(spec Spec, ex execution, before, after string, res *Result) (verdict, detail string) {
	var ev evaluation
	var evErr error
	hasReport := false
	if ex.ran {
		data, err := os.ReadFile(ex.reportPath)
		switch {
		case err == nil:
			hasReport = true
			ev, evErr = evaluateReport(spec, data)
			res.Checks = ev.reportedChecks
			if evErr == nil {
				res.Report = true
				res.Failures = ev.failures
				res.FirstFailures = ev.firstFailures
			}
		default:
			evErr = fmt.Errorf("%w: no report: %w", errBadReport, err)
		}
	}

	run := ex.run
	switch {
	case ex.early == VerdictCancelled || run.Cancelled:
		return VerdictCancelled, "cancelled by the caller; the process group was killed"
	case after != before:
		if after == "" {
			return VerdictArtifactModified, "artifact at its original path is gone or unreadable after the run"
		}
		return VerdictArtifactModified, fmt.Sprintf("artifact changed during the run: sha256 %s before, %s after", before, after)
	}
	if changed := changedFiles(ex.guarded); len(changed) > 0 {
		return VerdictArtifactModified, "files changed during the run: " + strings.Join(changed, ", ")
	}
	switch {
	case ex.early != "":
		return ex.early, ex.detail
	case run.CleanupFault:
		return VerdictCleanupFault, "processes of the run survived SIGKILL past the cleanup deadline"
	case run.Leftover:
		return VerdictCleanupFault, "processes of the run were still alive after the driver exited; they were killed"
	case run.OutputExceeded:
		return VerdictCrashed, fmt.Sprintf("driver output exceeded the %d-byte limit; the process group was killed", ex.outputLimit)
	case run.TimedOut:
		return VerdictTimeout, fmt.Sprintf("driver exceeded its %s deadline; the process group was killed", ex.runDeadline)
	case run.ExitCode != 0:
		how := fmt.Sprintf("exit status %d", run.ExitCode)
		if run.ExitCode < 0 {
			how = "killed by a signal"
		}
		return VerdictCrashed, "driver " + how + ": " + summarizeOutput(ex.outputPath)
	case evErr != nil:
		if !hasReport {
			return VerdictIncompleteReport, "driver exited 0 without writing a report"
		}
		return VerdictIncompleteReport, evErr.Error()
	case ev.failures > 0:
		f := ev.firstFailures[0]
		got := f.Actual
		if f.ActualType != "" {
			got += " of type " + f.ActualType
		}
		return VerdictFailed, fmt.Sprintf("%d of %d checks failed; first: %s input %s expected %s got %s",
			ev.failures, ev.checks, f.Type, f.Input, f.Expected, got)
	default:
		return VerdictPassed, fmt.Sprintf("all %d checks matched the reference", ev.checks)
	}
}

// changedFiles returns, sorted, the guarded paths whose SHA-256 differs from
// the recorded one (a missing file counts as changed).
func changedFiles(guarded map[string]string) []string {
	var changed []string
	for path, sum := range guarded {
		if hashFile(path) != sum {
			changed = append(changed, filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path))
		}
	}
	sort.Strings(changed)
	return changed
}

// sha256Hex returns the lowercase hex SHA-256 of data (64 chars).
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// hashFile returns the SHA-256 hex of the regular file at path (internal/digest), or "" when it
// cannot be read or is not a regular file: a FIFO put in its place is not waited on.
func hashFile(path string) string {
	sum, _ := digest.File(path)
	return sum
}

// summaryLimit bounds a summary of process output, in bytes.
const summaryLimit = 300

// summarizeOutput condenses a process output file into one line. For a
// Python traceback it is the exception line and the innermost frame
// (directories dropped); otherwise, from the first "panic:" or "fatal error:"
// line when there is one, else from the start, the first three non-empty
// lines that are not "# package" headers, joined with " | ". It is cut to
// summaryLimit bytes. Only the first and the last 32 KiB of a large file are
// read, so a crash after a flood of output is still found.
func summarizeOutput(path string) string {
	lines := readOutputLines(path)
	if tb := pythonTraceback(lines); tb != "" {
		return truncate(tb, summaryLimit)
	}
	var kept []string
	for _, line := range lines {
		if line != "" && !strings.HasPrefix(line, "# ") {
			kept = append(kept, line)
		}
	}
	for i, line := range kept {
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			kept = kept[i:]
			break
		}
	}
	if len(kept) == 0 {
		return "no output"
	}
	if len(kept) > 3 {
		kept = kept[:3]
	}
	return truncate(strings.Join(kept, " | "), summaryLimit)
}

// outputWindow is how much of each end of a large output file
// summarizeOutput reads.
const outputWindow = 32 << 10

// readOutputLines returns the trimmed lines of the output file: all of it
// when it is at most 2*outputWindow bytes, else its first and last
// outputWindow bytes. A missing file has no lines.
func readOutputLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil
	}
	var chunks [][]byte
	if size := info.Size(); size <= 2*outputWindow {
		data, _ := io.ReadAll(io.LimitReader(f, 2*outputWindow))
		chunks = append(chunks, data)
	} else {
		head := make([]byte, outputWindow)
		n, _ := io.ReadFull(f, head)
		tail := make([]byte, outputWindow)
		m, _ := f.ReadAt(tail, size-outputWindow)
		chunks = append(chunks, head[:n], tail[:m])
	}
	var lines []string
	for _, chunk := range chunks {
		for _, line := range strings.Split(string(chunk), "\n") {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// pythonTraceback returns "<exception line> | <innermost frame>" for the
// last Python traceback in lines, with directories dropped from file names,
// or "" when there is none.
func pythonTraceback(lines []string) string {
	start := -1
	for i, line := range lines {
		if line == "Traceback (most recent call last):" {
			start = i
		}
	}
	if start < 0 {
		return ""
	}
	var frame, exception string
	for _, line := range lines[start+1:] {
		switch {
		case line == "":
		case strings.HasPrefix(line, "File \""):
			frame = line
		default:
			exception = line
		}
	}
	if i := strings.Index(frame, "\""); i >= 0 {
		if j := strings.Index(frame[i+1:], "\""); j >= 0 {
			frame = "File \"" + filepath.Base(frame[i+1:i+1+j]) + frame[i+1+j:]
		}
	}
	if frame == "" {
		return exception
	}
	return exception + " | " + frame
}

// truncate cuts s to at most n bytes, dropping a UTF-8 sequence split by
// the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// outputLimit returns opts.OutputLimit or DefaultOutputLimit.
func outputLimit(opts Options) int64 {
	if opts.OutputLimit <= 0 {
		return DefaultOutputLimit
	}
	return opts.OutputLimit
}
