package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"
)

// Layout of the Python driver inside a Check's working directory.
const (
	pyDriverDir    = "pydriver"
	pyDriverFile   = "driver.py"
	pyArtifactDir  = "artifact"
	pyDefaultFile  = "artifact.py"
	pyRunLog       = "run.log"
	pyReportFile   = "report.json"
	pyProbeLog     = "python-probe.log"
	pyProbeTimeout = 30 * time.Second
)

// Minimum Python version the drivers and the probe are written for.
const (
	pyMinMajor = 3
	pyMinMinor = 8
)

// ErrNoPython is returned (wrapped) by [FindPython] when no python3 on PATH
// is usable: none found, none runs, none is Python >= 3.8, or, when pytest is
// required, none can import pytest. The message lists every candidate and why
// it was passed over.
var ErrNoPython = errors.New("oracle: no usable python3")

// Python is one Python 3 interpreter found and probed by [FindPython].
type Python struct {
	// Path is the absolute path of the interpreter executable the oracle
	// runs: the candidate's own sys.executable, so that a pyenv shim (a bash
	// script that picks an interpreter on every start, about 0.25 s) is
	// resolved once, in a neutral directory, and then bypassed.
	Path string
	// FoundAs is the candidate the interpreter was found as: a PATH entry's
	// python3, e.g. "/root/.pyenv/shims/python3".
	FoundAs string
	// Version is sys.version_info as "3.11.2".
	Version string
	// Pytest is the version of pytest the interpreter imports ("7.2.1"), or
	// "" when pytest was not asked for.
	Pytest string
}

// String describes the interpreter for reports, e.g.
// "/usr/bin/python3 (Python 3.11.2, pytest 7.2.1; found as /usr/bin/python3)".
func (p Python) String() string {
	if p.Path == "" {
		return ""
	}
	var about []string
	if p.Version != "" {
		about = append(about, "Python "+p.Version)
	}
	if p.Pytest != "" {
		about = append(about, "pytest "+p.Pytest)
	}
	desc := p.Path
	if len(about) > 0 {
		desc += " (" + strings.Join(about, ", ")
		if p.FoundAs != "" && p.FoundAs != p.Path {
			desc += "; found as " + p.FoundAs
		}
		desc += ")"
	} else if p.FoundAs != "" && p.FoundAs != p.Path {
		desc += " (found as " + p.FoundAs + ")"
	}
	return desc
}

// pythonEnv returns the complete environment of Python subprocesses: PATH,
// HOME and TMPDIR copied from the current process when set, and nothing else
// (no provider credentials, no gateway or ASSAY_* variables, no PYTHON*
// variables, no Go variables a Python artifact could read as a sign of the
// oracle). It is a fresh slice on every call.
func pythonEnv() []string {
	var env []string
	for _, key := range []string{"PATH", "HOME", "TMPDIR"} {
		if value, ok := os.LookupEnv(key); ok {
			env = append(env, key+"="+value)
		}
	}
	return env
}

// pythonProbe is the probe's report: one JSON line.
type pythonProbe struct {
	Executable  string `json:"executable"`
	Major       int    `json:"major"`
	Minor       int    `json:"minor"`
	Micro       int    `json:"micro"`
	Pytest      string `json:"pytest"`
	PytestError string `json:"pytest_error"`
}

// pythonProbeScript prints a pythonProbe. With pytest wanted it imports
// pytest, which needs the site packages, so it runs without -S.
const pythonProbeScript = `import json, sys
info = {"executable": sys.executable, "major": sys.version_info[0], "minor": sys.version_info[1], "micro": sys.version_info[2]}
if len(sys.argv) > 1 and sys.argv[1] == "pytest":
    try:
        import pytest
        info["pytest"] = str(pytest.__version__)
    except BaseException as e:
        info["pytest_error"] = repr(e)[:200]
print(json.dumps(info))
`

// FindPython chooses the Python interpreter the oracle runs, deliberately
// and the same way every time: it takes every file named python3 in the
// PATH of the current process, in PATH order (relative entries skipped,
// candidates that are the same file after following symlinks tried once),
// and probes each in a fresh empty directory with a minimal environment
// (`python3 -I [-S] -c ...`, 30 s deadline: a pyenv shim on a loaded machine is slow). The first candidate that runs,
// is Python >= 3.8 and, when needPytest is set, imports pytest, is chosen; its
// own sys.executable becomes Python.Path.
//
// So on a machine whose PATH puts a pyenv python3 without pytest before
// Debian's /usr/bin/python3 with python3-pytest, FindPython(ctx, false) picks
// the pyenv interpreter and FindPython(ctx, true) picks /usr/bin/python3.
//
// It returns an error wrapping [ErrNoPython], naming each candidate and why it
// was passed over, when none qualifies, and ctx.Err() when ctx ends first.
// It is safe for concurrent use.
//
// A process probes once per answer: a later call with the same needPytest and
// PATH, whose candidates are the same files unchanged (path, target, size,
// modification time, inode), returns the interpreter the first call chose
// without probing again. A changed PATH or a replaced, edited or removed
// candidate probes again, as does every call after one that found none (a
// failure is never remembered). A pytest installed or removed under an
// unchanged interpreter during the process is not seen until the interpreter
// file changes; the tests then run or fail, never pass unrun.
func FindPython(ctx context.Context, needPytest bool) (Python, error) {
	env := pythonEnv()
	key := pythonMemoKey(envValue(env, "PATH"), needPytest)
	if py, ok := pythonMemo.Load(key); ok {
		return py.(Python), nil
	}
	dir, err := os.MkdirTemp("", "assay-python-probe-*")
	if err != nil {
		return Python{}, fmt.Errorf("oracle: python probe directory: %w", err)
	}
	defer os.RemoveAll(dir)
	py, err := findPython(ctx, env, dir, needPytest)
	if err == nil && key != "" {
		pythonMemo.Store(key, py)
	}
	return py, err
}

// pythonMemo holds FindPython's answers in this process, by pythonMemoKey.
var pythonMemo sync.Map // string -> Python

// pythonMemoKey identifies what FindPython's answer depends on that can be
// seen without running anything: needPytest, the PATH, and each candidate
// file's path, symlink target, size, modification time and inode. It is ""
// (never remembered) when a candidate cannot be described.
func pythonMemoKey(pathList string, needPytest bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pytest=%t\x00PATH=%s", needPytest, pathList)
	for _, cand := range pythonCandidates(pathList) {
		id := fileIdentity(cand)
		if id == "" {
			return ""
		}
		b.WriteString("\x00" + id)
	}
	return b.String()
}

// fileIdentity describes the executable at path as far as it can be seen
// without running it: the path, its symlink target, and the target's size,
// modification time and device:inode, NUL-separated. It is "" when path
// cannot be resolved or stated. It keys the per-process memos of FindPython
// and of the go tool's version.
func fileIdentity(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	info, err := os.Stat(real)
	if err != nil {
		return ""
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d:%d", path, real, info.Size(), info.ModTime().UnixNano(), st.Dev, st.Ino)
}

// findPython is FindPython with the environment and probe directory given.
func findPython(ctx context.Context, env []string, dir string, needPytest bool) (Python, error) {
	candidates := pythonCandidates(envValue(env, "PATH"))
	if len(candidates) == 0 {
		return Python{}, fmt.Errorf("%w: no python3 in PATH %q", ErrNoPython, envValue(env, "PATH"))
	}
	var passed []string
	for _, cand := range candidates {
		py, why := probePython(ctx, env, dir, cand, needPytest)
		if err := ctx.Err(); err != nil {
			return Python{}, err
		}
		if why == "" {
			return py, nil
		}
		passed = append(passed, cand+": "+why)
	}
	return Python{}, fmt.Errorf("%w: %s", ErrNoPython, strings.Join(passed, "; "))
}

// pythonCandidates lists the executable regular files named python3 in the
// absolute entries of pathList, in order, dropping a candidate that resolves
// (through symlinks) to the same file as an earlier one.
func pythonCandidates(pathList string) []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		cand := filepath.Join(dir, "python3")
		info, err := os.Stat(cand)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(cand)
		if err != nil {
			real = cand
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		out = append(out, cand)
	}
	return out
}

// probePython runs the probe with one candidate and returns the interpreter,
// or why the candidate does not qualify.
func probePython(ctx context.Context, env []string, dir, cand string, needPytest bool) (Python, string) {
	args := []string{"-I", "-S", "-c", pythonProbeScript}
	if needPytest {
		args = []string{"-I", "-c", pythonProbeScript, "pytest"}
	}
	logPath := filepath.Join(dir, pyProbeLog)
	run, err := Run(ctx, Command{Path: cand, Args: args, Dir: dir, Env: env, OutputPath: logPath, Deadline: pyProbeTimeout})
	switch {
	case err != nil:
		return Python{}, fmt.Sprintf("does not start: %v", err)
	case run.Cancelled:
		return Python{}, "cancelled"
	case run.TimedOut:
		return Python{}, fmt.Sprintf("probe exceeded %s", pyProbeTimeout)
	case run.ExitCode != 0:
		return Python{}, fmt.Sprintf("probe exited %d: %s", run.ExitCode, summarizeOutput(logPath))
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		return Python{}, fmt.Sprintf("probe output: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var probe pythonProbe
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &probe); err != nil {
		return Python{}, "probe printed no report: " + truncate(strings.TrimSpace(string(data)), 120)
	}
	version := fmt.Sprintf("%d.%d.%d", probe.Major, probe.Minor, probe.Micro)
	if probe.Major != pyMinMajor || probe.Minor < pyMinMinor {
		return Python{}, fmt.Sprintf("Python %s, want %d.%d or later", version, pyMinMajor, pyMinMinor)
	}
	if needPytest && probe.Pytest == "" {
		return Python{}, fmt.Sprintf("Python %s cannot import pytest (%s)", version, probe.PytestError)
	}
	path := cand
	if filepath.IsAbs(probe.Executable) {
		if info, err := os.Stat(probe.Executable); err == nil && info.Mode().IsRegular() {
			path = probe.Executable
		}
	}
	return Python{Path: path, FoundAs: cand, Version: version, Pytest: probe.Pytest}, ""
}

// validatePythonSpec checks what the Python driver needs beyond
// Spec.Validate: a function name it can look up, a reference expression, and
// a plain .py file name.
func validatePythonSpec(spec Spec) error {
	if !isPortableIdentifier(spec.Function) {
		return fmt.Errorf("%w: spec %s: Function %q is not a Python identifier", ErrInvalidSpec, spec.Name, spec.Function)
	}
	if strings.TrimSpace(spec.Reference.PyExpr) == "" || strings.ContainsAny(spec.Reference.PyExpr, "\n\r") {
		return fmt.Errorf("%w: spec %s: Reference.PyExpr %q must be a one-line Python expression", ErrInvalidSpec, spec.Name, spec.Reference.PyExpr)
	}
	if spec.File != "" && (filepath.Base(spec.File) != spec.File || !strings.HasSuffix(spec.File, ".py")) {
		return fmt.Errorf("%w: spec %s: File %q must be a plain .py file name", ErrInvalidSpec, spec.Name, spec.File)
	}
	return nil
}

// executePython copies the artifact into <root>/pydriver/artifact/<File>,
// generates <root>/pydriver/driver.py, and runs
// `python3 -I -S -B driver.py REPORT ARTIFACT` under Run (Deadline) in a
// scratch directory with pythonEnv: isolated mode (no PYTHON* variables, no
// user site, no script directory on sys.path), no site packages, no bytecode
// written. The interpreter is opts.Python or the one FindPython chooses.
func executePython(ctx context.Context, spec Spec, artifact []byte, root string, opts Options) execution {
	ex := execution{guarded: map[string]string{}}
	fail := func(verdict, detail string) execution {
		ex.early, ex.detail = verdict, detail
		return ex
	}
	env := pythonEnv()
	py := opts.Python
	if py.Path == "" {
		found, err := findPython(ctx, env, root, false)
		switch {
		case ctx.Err() != nil:
			return fail(VerdictCancelled, "")
		case err != nil:
			return fail(VerdictUnavailable, err.Error())
		}
		py = found
	}
	ex.interpreter = py.String()

	driverDir := filepath.Join(root, pyDriverDir)
	if err := os.MkdirAll(filepath.Join(driverDir, pyArtifactDir), 0o755); err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create driver directory: %v", err))
	}
	driver, err := pyDriverSource(spec)
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("generate driver: %v", err))
	}
	file := spec.File
	if file == "" {
		file = pyDefaultFile
	}
	driverPath := filepath.Join(driverDir, pyDriverFile)
	artifactPath := filepath.Join(driverDir, pyArtifactDir, file)
	for _, f := range []struct {
		path string
		data []byte
	}{{driverPath, driver}, {artifactPath, artifact}} {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			return fail(VerdictUnavailable, fmt.Sprintf("write %s: %v", f.path, err))
		}
		ex.guarded[f.path] = sha256Hex(f.data)
	}

	bad, verdict, detail := pythonImportViolations(ctx, spec, py, env, artifactPath, root, opts)
	switch {
	case verdict != "":
		return fail(verdict, detail)
	case len(bad) > 0:
		return fail(VerdictForbiddenImport, forbiddenDetail(spec, bad))
	}

	reportDir, err := os.MkdirTemp(root, "report-*")
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create report directory: %v", err))
	}
	scratch, err := os.MkdirTemp(root, "scratch-*")
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create scratch directory: %v", err))
	}
	ex.reportPath = filepath.Join(reportDir, pyReportFile)
	ex.outputPath = filepath.Join(root, pyRunLog)
	ex.runDeadline = opts.Deadline
	if ex.runDeadline <= 0 {
		ex.runDeadline = DefaultDeadline
	}
	ex.outputLimit = outputLimit(opts)
	run, err := Run(ctx, Command{
		Path: py.Path, Args: []string{"-I", "-S", "-B", driverPath, ex.reportPath, artifactPath}, Dir: scratch, Env: env,
		OutputPath: ex.outputPath, Deadline: ex.runDeadline, Cleanup: opts.Cleanup, OutputLimit: ex.outputLimit,
	})
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("start python driver: %v", err))
	}
	ex.ran = true
	ex.run = run
	return ex
}

// pyDriverTemplate is the generated Python driver. It binds the builtins it
// relies on before the artifact is imported (so an artifact that rebinds
// builtins.type cannot change how outputs are classified), loads the
// artifact from its path under the module name assay_artifact, checks every
// domain in spec order, and writes one report through a rename. Outputs of
// the wrong type (anything but exactly int for an int domain, int64 range
// included, and exactly float for a float domain; bool is not an int here)
// are failures listed under "mistyped". Every output is carried in the report
// for the oracle to re-evaluate.
const pyDriverTemplate = `# Code generated by the assay oracle; DO NOT EDIT.
# Runs as: python3 -I -S -B driver.py REPORT_PATH ARTIFACT_PATH
import importlib.util
import json
import os
import struct
import sys
import time

_type, _int, _float, _repr, _len, _range = type, int, float, repr, len, range
_pack, _unpack, _dumps, _replace = struct.pack, struct.unpack, json.dumps, os.replace
_monotonic_ns = time.monotonic_ns

SPEC = {{.Spec}}
FORMAT = {{.Format}}
FUNCTION = {{.Function}}
MAX_FIRST = {{.MaxFirstFailures}}
ZERO_EQUAL = {{.ZeroEqual}}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# (type, size, [(min, step, size) per argument])
DOMAINS = [
{{- range .Domains}}
    ({{.Type}}, {{.Size}}, [{{.Ranges}}]),
{{- end}}
]


def ref({{.Params}}):
    return {{.Expr}}


def bits(v):
    return _unpack("<Q", _pack("<d", v))[0]


def describe(v):
    try:
        name = _type(v).__name__
    except BaseException:
        name = "?"
    try:
        text = _repr(v)[:80]
    except BaseException:
        text = "<repr failed>"
    return name, text


def tuple_text(args):
    if _len(args) == 1:
        return _repr(args[0])
    return "(" + ", ".join(_repr(a) for a in args) + ")"


def check(kind, size, ranges, fn, report):
    d = {"type": kind, "size": size, "checks": 0, "failures": 0}
    outs = []
    mistyped = []
    n = _len(ranges)
    for i in _range(size):
        rem = i
        args = [None] * n
        for k in _range(n - 1, -1, -1):
            lo, step, count = ranges[k]
            j = rem % count
            rem //= count
            args[k] = lo + j * step if kind == "int" else lo + _float(j) * step
        got = fn(*args)
        want = ref(*args)
        d["checks"] += 1
        ok = False
        actual = None
        if kind == "int":
            if _type(got) is _int and INT64_MIN <= got <= INT64_MAX:
                outs.append(got)
                ok = got == want
                actual = _repr(got)
            else:
                outs.append(0)
                name, text = describe(got)
                if _type(got) is _int:
                    name = "int (outside int64)"
                mistyped.append({"index": i, "type": name, "repr": text})
                actual = text
        else:
            if _type(got) is _float:
                b = bits(got)
                outs.append(b)
                ok = b == bits(want) or (ZERO_EQUAL and got == 0.0 and want == 0.0)
                actual = _repr(got)
            else:
                outs.append(0)
                name, text = describe(got)
                mistyped.append({"index": i, "type": name, "repr": text})
                actual = text
        if not ok:
            d["failures"] += 1
            report["failures"] += 1
            if _len(report["first_failures"]) < MAX_FIRST:
                f = {"type": kind, "input": tuple_text(args), "expected": _repr(want), "actual": actual}
                if mistyped and mistyped[-1]["index"] == i:
                    f["actual_type"] = mistyped[-1]["type"]
                report["first_failures"].append(f)
    d["int" if kind == "int" else "float64_bits"] = outs
    if mistyped:
        d["mistyped"] = mistyped
    report["domains"].append(d)
    report["checks"] += d["checks"]


def main():
    if _len(sys.argv) != 3:
        print("assay oracle driver: want two arguments, the report path and the artifact path", file=sys.stderr)
        sys.exit(2)
    report_path, artifact_path = sys.argv[1], sys.argv[2]
    start = _monotonic_ns()
    spec = importlib.util.spec_from_file_location("assay_artifact", artifact_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["assay_artifact"] = module
    spec.loader.exec_module(module)
    fn = getattr(module, FUNCTION, None)
    if not callable(fn):
        print("assay oracle driver: the artifact defines no function " + FUNCTION, file=sys.stderr)
        sys.exit(3)
    report = {"format": FORMAT, "spec": SPEC, "domains": [], "checks": 0, "failures": 0,
              "first_failures": [], "duration_ns": 0, "complete": False}
    for kind, size, ranges in DOMAINS:
        check(kind, size, ranges, fn, report)
    report["duration_ns"] = _monotonic_ns() - start
    report["complete"] = True
    data = _dumps(report, separators=(",", ":"))
    tmp = report_path + ".partial"
    with open(tmp, "w") as out:
        out.write(data)
    _replace(tmp, report_path)


main()
`

// pyDriverSource renders the Python driver for spec. Values are baked in as
// Python literals: strings through JSON quoting (a JSON string is a valid
// Python string literal for the ASCII names used here), floats through
// float("<shortest repr>"), which round-trips exactly.
func pyDriverSource(spec Spec) ([]byte, error) {
	quote := func(s string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	pyFloat := func(v float64) string { return `float("` + strconv.FormatFloat(v, 'g', -1, 64) + `")` }
	type pyDomain struct {
		Type, Ranges string
		Size         int
	}
	data := struct {
		Spec, Format, Function, Params, Expr, ZeroEqual string
		MaxFirstFailures                                int
		Domains                                         []pyDomain
	}{
		Spec: quote(spec.Name), Format: quote(reportFormat), Function: quote(spec.Function),
		Params: strings.Join(spec.ParamNames(), ", "), Expr: spec.Reference.PyExpr,
		ZeroEqual: "False", MaxFirstFailures: maxFirstFailures,
	}
	if spec.zeroEqual() {
		data.ZeroEqual = "True"
	}
	for _, d := range spec.Domains {
		var ranges []string
		for _, r := range d.Ranges() {
			if d.Type == TypeInt {
				ranges = append(ranges, fmt.Sprintf("(%d, %d, %d)", int64(r.Min), int64(r.Step), r.Size()))
			} else {
				ranges = append(ranges, fmt.Sprintf("(%s, %s, %d)", pyFloat(r.Min), pyFloat(r.Step), r.Size()))
			}
		}
		data.Domains = append(data.Domains, pyDomain{Type: quote(d.Type), Size: d.Size(), Ranges: strings.Join(ranges, ", ")})
	}
	tmpl, err := template.New("pydriver").Parse(pyDriverTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse python driver template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render python driver for spec %s: %w", spec.Name, err)
	}
	return buf.Bytes(), nil
}
