package oracle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testPython finds the interpreter once for the tests that do not test the
// discovery itself; pyenv shims make every discovery cost about 0.25 s.
var testPython = sync.OnceValues(func() (Python, error) { return FindPython(context.Background(), false) })

// requirePython returns the interpreter, skipping a test that needs one when
// there is none (CI installs Debian's python3-pytest, which brings python3).
func requirePython(t *testing.T) Python {
	t.Helper()
	py, err := testPython()
	if err != nil {
		t.Skipf("no usable python3: %v", err)
	}
	return py
}

// pythonSpec returns the named built-in spec set up for Python.
func pythonSpec(t *testing.T, name string) Spec {
	t.Helper()
	spec, ok := SpecByName(name)
	if !ok {
		t.Fatalf("no spec %s", name)
	}
	spec, err := spec.ForLanguage(LanguagePython)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestCheckPython runs the double oracle against the adversarial Python
// artifacts of testdata/artifacts/python, each under a real interpreter.
func TestCheckPython(t *testing.T) {
	py := requirePython(t)
	spec := pythonSpec(t, "double")
	// These artifacts import os, subprocess and friends to attack the run-time defenses, which the
	// built-in import restriction never lets them reach (TestImportRestriction covers that).
	spec.AnyImport = true
	tests := []struct {
		name     string
		artifact string
		opts     Options
		verdict  string
		check    func(t *testing.T, res Result, data artifactData)
	}{
		{
			name: "correct artifact passes", artifact: "correct", verdict: VerdictPassed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.Checks != 10242 || res.Expected != 10242 || res.Failures != 0 || !res.Report || len(res.FirstFailures) != 0 {
					t.Errorf("Checks=%d Expected=%d Failures=%d Report=%v FirstFailures=%v; want 10242/10242/0/true/none",
						res.Checks, res.Expected, res.Failures, res.Report, res.FirstFailures)
				}
				if len(res.ArtifactSHA256) != 64 || res.ArtifactSHA256 != res.ArtifactSHA256After {
					t.Errorf("hashes %q before, %q after; want equal SHA-256 hex", res.ArtifactSHA256, res.ArtifactSHA256After)
				}
				if res.Language != LanguagePython || !strings.HasPrefix(res.Interpreter, py.Path) {
					t.Errorf("Language=%q Interpreter=%q; want python run by %s", res.Language, res.Interpreter, py.Path)
				}
			},
		},
		{
			name: "wrong for the single int 7 fails naming it", artifact: "wrong7", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				want := []Failure{{Type: TypeInt, Input: "7", Expected: "14", Actual: "15"}}
				if res.Failures != 1 || res.Checks != 10242 || !res.Report {
					t.Errorf("Failures=%d Checks=%d Report=%v; want 1, 10242, true", res.Failures, res.Checks, res.Report)
				}
				if diff := cmp.Diff(want, res.FirstFailures); diff != "" {
					t.Errorf("FirstFailures (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "constant return fails", artifact: "constant", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				// The int 0 passes; the float 0.0 fails because 0 is an int.
				if res.Failures != 10241 || len(res.FirstFailures) != maxFirstFailures {
					t.Errorf("Failures=%d with %d first failures; want 10241 and %d", res.Failures, len(res.FirstFailures), maxFirstFailures)
				}
			},
		},
		{
			name: "int(x*2) for floats fails every float for its type", artifact: "int_for_floats", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				first := Failure{Type: TypeFloat64, Input: "-1024", Expected: "-2048", Actual: "-2048", ActualType: "int"}
				if res.Failures != 8193 || len(res.FirstFailures) == 0 || res.FirstFailures[0] != first {
					t.Errorf("Failures=%d first=%+v; want 8193 starting with %+v", res.Failures, res.FirstFailures, first)
				}
				if !strings.Contains(res.Detail, "of type int") {
					t.Errorf("Detail = %q, want the wrong type named", res.Detail)
				}
			},
		},
		{
			name: "False for zero is a bool, not an int or a float", artifact: "bool_zero", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				want := []Failure{
					{Type: TypeInt, Input: "0", Expected: "0", Actual: "False", ActualType: "bool"},
					{Type: TypeFloat64, Input: "0", Expected: "0", Actual: "False", ActualType: "bool"},
				}
				if diff := cmp.Diff(want, res.FirstFailures); diff != "" || res.Failures != 2 {
					t.Errorf("Failures=%d FirstFailures (-want +got):\n%s", res.Failures, diff)
				}
			},
		},
		{
			name: "-0.0 where +0.0 is due fails under the exact signed-zero rule", artifact: "negative_zero", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				want := []Failure{{Type: TypeFloat64, Input: "0", Expected: "0", Actual: "-0"}}
				if diff := cmp.Diff(want, res.FirstFailures); diff != "" || res.Failures != 1 {
					t.Errorf("Failures=%d FirstFailures (-want +got):\n%s", res.Failures, diff)
				}
			},
		},
		{
			name: "an int outside int64 is a failure, not a decode error", artifact: "bigint", verdict: VerdictFailed,
			check: func(t *testing.T, res Result, _ artifactData) {
				want := []Failure{{Type: TypeInt, Input: "5", Expected: "10", Actual: "1180591620717411303424", ActualType: "int (outside int64)"}}
				if diff := cmp.Diff(want, res.FirstFailures); diff != "" {
					t.Errorf("FirstFailures (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "an infinite loop times out and the driver is dead", artifact: "loop", opts: Options{Deadline: time.Second}, verdict: VerdictTimeout,
			check: func(t *testing.T, res Result, data artifactData) {
				assertProcessGone(t, readPID(t, data.PIDFile, time.Second))
			},
		},
		{
			name: "sleeping past the deadline then writing a report is a timeout", artifact: "sleep_then_report", opts: Options{Deadline: time.Second}, verdict: VerdictTimeout,
			check: func(t *testing.T, res Result, data artifactData) {
				assertProcessGone(t, readPID(t, data.PIDFile, time.Second))
				if res.Report || res.Checks != 0 {
					t.Errorf("Report=%v Checks=%d; a report written after the deadline must not be read", res.Report, res.Checks)
				}
			},
		},
		{
			// The grandchild inherits the driver's stdout and stderr: the
			// oracle must neither hang on it nor let it live.
			name: "a forked grandchild holding stdout is a cleanup fault and is killed", artifact: "grandchild", verdict: VerdictCleanupFault,
			check: func(t *testing.T, res Result, data artifactData) {
				pid := readPID(t, data.PIDFile, time.Second)
				killOnCleanup(t, pid)
				if !res.Report || res.Failures != 0 {
					t.Errorf("Report=%v Failures=%d; the outputs were right, only cleanup faulted", res.Report, res.Failures)
				}
				assertProcessGone(t, pid)
			},
		},
		{
			name: "a forged passing report is caught by the oracle's own reference", artifact: "forged_report", verdict: VerdictIncompleteReport,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.Report || !strings.Contains(res.Detail, "reference finds") {
					t.Errorf("Report=%v Detail=%q; want the forged report rejected as inconsistent", res.Report, res.Detail)
				}
			},
		},
		{
			name: "rewriting its own source is detected", artifact: "rewrite_self", verdict: VerdictArtifactModified,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.ArtifactSHA256After != res.ArtifactSHA256 || !strings.Contains(res.Detail, "artifact/double.py") {
					t.Errorf("After=%s Detail=%q; want the original intact and the copy named", res.ArtifactSHA256After, res.Detail)
				}
			},
		},
		{
			name: "rewriting the original artifact is detected", artifact: "rewrite_original", verdict: VerdictArtifactModified,
			check: func(t *testing.T, res Result, data artifactData) {
				if res.ArtifactSHA256After == res.ArtifactSHA256 || res.ArtifactSHA256After != hashFile(data.Source) {
					t.Errorf("hashes before %s after %s; want After to be the rewritten file's", res.ArtifactSHA256, res.ArtifactSHA256After)
				}
			},
		},
		{
			name: "printing 100 MB goes to a file and changes nothing", artifact: "print_100mb", verdict: VerdictPassed,
			check: func(t *testing.T, res Result, _ artifactData) {
				info, err := os.Stat(filepath.Join(res.WorkDir, pyRunLog))
				if err != nil || info.Size() < 100<<20 {
					t.Errorf("run.log: %v, size %d; want the 100 MiB in the file", err, info.Size())
				}
			},
		},
		{
			name: "printing without end is stopped at the output limit", artifact: "print_forever", opts: Options{OutputLimit: 1 << 20}, verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "output exceeded the 1048576-byte limit") {
					t.Errorf("Detail = %q", res.Detail)
				}
			},
		},
		{
			name: "exit 0 without a report is incomplete", artifact: "exit0", verdict: VerdictIncompleteReport,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.Report || res.Checks != 0 {
					t.Errorf("Report=%v Checks=%d; want no report", res.Report, res.Checks)
				}
			},
		},
		{
			name: "raising on 1024 only crashes with the traceback", artifact: "raise_1024", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "ValueError: double: 1024 is too big") || !strings.Contains(res.Detail, `File "double.py"`) {
					t.Errorf("Detail = %q, want the exception and the artifact's frame", res.Detail)
				}
			},
		},
		{
			name: "a syntax error crashes", artifact: "syntax_error", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "SyntaxError") {
					t.Errorf("Detail = %q", res.Detail)
				}
			},
		},
		{
			name: "a missing function crashes naming it", artifact: "no_function", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "defines no function double") {
					t.Errorf("Detail = %q", res.Detail)
				}
			},
		},
		{
			name: "site packages are not importable (-S)", artifact: "site_import", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "ModuleNotFoundError") {
					t.Errorf("Detail = %q", res.Detail)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, data := writeArtifact(t, "python/"+tt.artifact, "double.py")
			opts := tt.opts
			opts.Python = py
			opts.WorkDir = t.TempDir()
			res, err := Check(context.Background(), spec, path, opts)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if res.Verdict != tt.verdict {
				t.Fatalf("Verdict = %q (%s), want %q", res.Verdict, res.Detail, tt.verdict)
			}
			if res.Spec != "double" || res.Detail == "" {
				t.Errorf("Spec=%q Detail=%q", res.Spec, res.Detail)
			}
			tt.check(t, res, data)
		})
	}
}

// An artifact that behaves only when it sees signs of a harness or
// credentials gets none: the oracle passes PATH, HOME and TMPDIR only, even
// when the caller's environment holds credentials and oracle-looking names.
func TestCheckPythonEnvironmentHidesTheOracle(t *testing.T) {
	py := requirePython(t)
	t.Setenv("OPENAI_API_KEY", "secret")
	t.Setenv("ASSAY_ORACLE", "1")
	t.Setenv("ASSAY_GATEWAY_URL", "http://127.0.0.1:1")
	t.Setenv("PYTHONPATH", t.TempDir())
	path, data := writeArtifact(t, "python/env_detect", "double.py")
	spec := pythonSpec(t, "double")
	spec.AnyImport = true // the cheat imports os; this test is about what it would see
	res, err := Check(context.Background(), spec, path, Options{Python: py})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictFailed {
		t.Fatalf("Verdict = %q (%s), want failed: the cheat must see no sign of the oracle", res.Verdict, res.Detail)
	}
	seen, err := os.ReadFile(data.EnvFile)
	if err != nil {
		t.Fatal(err)
	}
	// Python's locale coercion (PEP 538) may add LC_CTYPE itself.
	for _, name := range strings.Split(string(seen), "\n") {
		switch name {
		case "PATH", "HOME", "TMPDIR", "LC_CTYPE":
		default:
			t.Errorf("the artifact saw variable %q", name)
		}
	}
}

// Each built-in spec accepts a correct artifact in each language it names.
// The clamp artifacts return -0.0 where the reference gives +0.0, which the
// spec's signed-zero rule accepts.
func TestCheckBuiltinSpecsAcceptCorrectArtifacts(t *testing.T) {
	py := requirePython(t)
	requireGo(t)
	tests := []struct {
		spec, language, artifact, file string
		checks                         int
	}{
		{"double", LanguageGo, "correct", "double.go", 10242},
		{"double", LanguagePython, "python/correct", "double.py", 10242},
		{"abs", LanguageGo, "correct_abs", "abs.go", 10242},
		{"abs", LanguagePython, "python/correct_abs", "abs.py", 10242},
		{"clamp", LanguageGo, "correct_clamp", "clamp.go", 12642},
		{"clamp", LanguagePython, "python/correct_clamp", "clamp.py", 12642},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.language, func(t *testing.T) {
			t.Parallel()
			spec, _ := SpecByName(tt.spec)
			spec, err := spec.ForLanguage(tt.language)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := writeArtifact(t, tt.artifact, tt.file)
			res, err := Check(context.Background(), spec, path, Options{Python: py})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != VerdictPassed || res.Checks != tt.checks || res.Expected != tt.checks {
				t.Fatalf("Verdict=%q (%s) Checks=%d Expected=%d; want passed %d", res.Verdict, res.Detail, res.Checks, res.Expected, tt.checks)
			}
		})
	}
}

// The double artifact is wrong for clamp: the spec, not the file, decides
// what is checked, and two-argument inputs are named as tuples.
func TestCheckClampRejectsWrongArtifact(t *testing.T) {
	py := requirePython(t)
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "clamp.py")
	// Clamps to [-limit, limit) by mistake: wrong whenever x >= limit.
	src := "def clamp(x, limit):\n    return max(-limit, x) if x < limit else limit - 1\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Check(context.Background(), pythonSpec(t, "clamp"), path, Options{Python: py})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictFailed || len(res.FirstFailures) == 0 {
		t.Fatalf("Verdict = %q (%s), want failed", res.Verdict, res.Detail)
	}
	if first := res.FirstFailures[0]; first != (Failure{Type: TypeInt, Input: "(0, 0)", Expected: "0", Actual: "-1"}) {
		t.Errorf("first failure = %+v", first)
	}
}

func TestCheckPythonCancelled(t *testing.T) {
	py := requirePython(t)
	t.Parallel()
	path, data := writeArtifact(t, "python/sleep", "double.py")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Check(ctx, unrestricted(pythonSpec(t, "double")), path, Options{Python: py, Deadline: 5 * time.Minute})
		done <- outcome{res, err}
	}()
	pid := readPID(t, data.PIDFile, time.Minute)
	killOnCleanup(t, pid)
	cancel()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.res.Verdict != VerdictCancelled {
		t.Fatalf("Verdict = %q (%s), want cancelled", got.res.Verdict, got.res.Detail)
	}
	assertProcessGone(t, pid)
}

// Without Options.Python, Check finds the interpreter itself and says which
// one ran; without any python3 on PATH the verdict is unavailable, never a
// pass or a skip.
func TestCheckPythonFindsOrIsUnavailable(t *testing.T) {
	want := requirePython(t)
	path, _ := writeArtifact(t, "python/correct", "double.py")
	res, err := Check(context.Background(), pythonSpec(t, "double"), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictPassed || res.Interpreter != want.String() {
		t.Fatalf("Verdict=%q (%s) Interpreter=%q; want passed by %q", res.Verdict, res.Detail, res.Interpreter, want.String())
	}

	t.Setenv("PATH", t.TempDir())
	res, err = Check(context.Background(), pythonSpec(t, "double"), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnavailable || res.Report || !strings.Contains(res.Detail, "no python3 in PATH") {
		t.Fatalf("Verdict = %q (%s), want unavailable naming the missing python3", res.Verdict, res.Detail)
	}
}

// fakePython writes an executable python3 script into a fresh directory and
// returns the directory.
func fakePython(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// FindPython takes PATH order, passes over candidates that do not run, are
// too old, or (when pytest is needed) lack pytest, and says why.
func TestFindPythonChoosesDeliberately(t *testing.T) {
	real := requirePython(t)
	broken := fakePython(t, "#!/bin/sh\necho broken >&2\nexit 1\n")
	old := fakePython(t, "#!/bin/sh\necho '{\"executable\": \"/nowhere\", \"major\": 2, \"minor\": 7, \"micro\": 18}'\n")
	// Runs the real interpreter with -S added, so pytest is not importable
	// through it, like a pyenv interpreter without pytest.
	noPytest := fakePython(t, "#!/bin/sh\nexec "+real.Path+" -S \"$@\"\n")
	// Claims a pytest it reports through the real interpreter's executable.
	withPytest := fakePython(t, "#!/bin/sh\nexec "+real.Path+" -c 'import sys, json; print(json.dumps({\"executable\": sys.executable, \"major\": 3, \"minor\": 11, \"micro\": 0, \"pytest\": \"9.9\"}))'\n")

	t.Setenv("PATH", strings.Join([]string{"relative/dir", broken, old, noPytest, withPytest}, string(os.PathListSeparator)))
	py, err := FindPython(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if py.FoundAs != filepath.Join(noPytest, "python3") || py.Path != real.Path || py.Pytest != "" {
		t.Errorf("FindPython(false) = %+v; want the first working candidate, %s/python3, resolved to %s", py, noPytest, real.Path)
	}
	py, err = FindPython(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if py.FoundAs != filepath.Join(withPytest, "python3") || py.Pytest != "9.9" {
		t.Errorf("FindPython(true) = %+v; want the candidate with pytest, %s/python3", py, withPytest)
	}
	if s := py.String(); !strings.Contains(s, "pytest 9.9") || !strings.Contains(s, "found as "+withPytest) {
		t.Errorf("String() = %q", s)
	}

	t.Setenv("PATH", strings.Join([]string{broken, old}, string(os.PathListSeparator)))
	_, err = FindPython(context.Background(), false)
	if !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), "probe exited 1") || !strings.Contains(err.Error(), "Python 2.7.18") {
		t.Fatalf("FindPython error = %v, want ErrNoPython naming both candidates", err)
	}
}

// The real machine's choice, for the record: the report says which
// interpreter ran, and one chosen for pytest imports pytest.
func TestFindPythonForPytestImportsPytest(t *testing.T) {
	requirePython(t)
	t.Parallel()
	py, err := FindPython(context.Background(), true)
	if errors.Is(err, ErrNoPython) {
		t.Skipf("no python3 with pytest on this machine (.ci/run installs python3-pytest): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if py.Pytest == "" || !filepath.IsAbs(py.Path) {
		t.Fatalf("FindPython(true) = %+v", py)
	}
	t.Logf("pytest interpreter: %s", py)
}

func TestPyDriverSource(t *testing.T) {
	t.Parallel()
	spec, err := ClampSpec().ForLanguage(LanguagePython)
	if err != nil {
		t.Fatal(err)
	}
	src, err := pyDriverSource(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`SPEC = "clamp"`, `FUNCTION = "clamp"`, "ZERO_EQUAL = True",
		`("int", 6321, [(-64, 1, 129), (0, 1, 49)])`,
		`("float64", 6321, [(float("-16"), float("0.25"), 129), (float("0"), float("0.25"), 49)])`,
		"def ref(x, limit):\n    return min(max(x, -limit), limit)",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("driver lacks %q", want)
		}
	}
}

// FindPython probes once per answer: a second call with the same PATH and unchanged candidates
// does not run the interpreter again; a changed candidate file, or another PATH, probes again; a
// failure is never remembered.
func TestFindPythonProbesOncePerAnswer(t *testing.T) {
	real := requirePython(t)
	count := filepath.Join(t.TempDir(), "probes")
	script := "#!/bin/sh\necho x >> " + count + "\nexec " + real.Path + " \"$@\"\n"
	dir := fakePython(t, script)
	probes := func() int {
		data, _ := os.ReadFile(count)
		return strings.Count(string(data), "x")
	}
	t.Setenv("PATH", dir)
	for i := range 3 {
		py, err := FindPython(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if py.FoundAs != filepath.Join(dir, "python3") || py.Path != real.Path {
			t.Fatalf("call %d: %+v", i, py)
		}
	}
	if n := probes(); n != 1 {
		t.Fatalf("three calls ran %d probes, want 1", n)
	}
	// The candidate is edited (one more line): its size and time change, so it is probed again.
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script+"# edited\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := FindPython(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if n := probes(); n != 2 {
		t.Fatalf("after an edit of the candidate: %d probes, want 2", n)
	}
	// Another PATH (the same directory twice is still another PATH string) probes again.
	t.Setenv("PATH", dir+string(os.PathListSeparator)+dir)
	if _, err := FindPython(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if n := probes(); n != 3 {
		t.Fatalf("after a PATH change: %d probes, want 3", n)
	}
	// A candidate that fails is probed on every call: failures are not remembered.
	broken := fakePython(t, "#!/bin/sh\necho x >> "+count+"\nexit 1\n")
	t.Setenv("PATH", broken)
	for range 2 {
		if _, err := FindPython(context.Background(), false); !errors.Is(err, ErrNoPython) {
			t.Fatalf("broken candidate: %v", err)
		}
	}
	if n := probes(); n != 5 {
		t.Fatalf("two calls with a failing candidate: %d probes in all, want 5", n)
	}
}
