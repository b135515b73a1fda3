package oracle

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// requireGo skips a test that needs the go tool when there is none.
func requireGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
}

// TestCheckDouble runs the double oracle against adversarial artifacts. Each
// case builds a real driver with the go tool and runs it as a subprocess.
func TestCheckDouble(t *testing.T) {
	requireGo(t)
	spec := DoubleSpec()
	// These artifacts import os, os/exec and friends to attack the run-time defenses, which the
	// built-in import restriction never lets them reach (TestImportRestriction covers that).
	spec.AnyImport = true
	tests := []struct {
		name     string
		artifact string
		deadline time.Duration
		verdict  string
		// check asserts what else the case is about; data holds the paths the
		// artifact was rendered with.
		check func(t *testing.T, res Result, data artifactData)
	}{
		{
			name: "correct artifact with any package name passes", artifact: "correct", verdict: VerdictPassed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.Checks != 10242 || res.Expected != 10242 || res.Failures != 0 || !res.Report || len(res.FirstFailures) != 0 {
					t.Errorf("Checks=%d Expected=%d Failures=%d Report=%v FirstFailures=%v; want 10242/10242/0/true/none",
						res.Checks, res.Expected, res.Failures, res.Report, res.FirstFailures)
				}
				if len(res.ArtifactSHA256) != 64 || res.ArtifactSHA256 != res.ArtifactSHA256After {
					t.Errorf("hashes %q before, %q after; want equal SHA-256 hex", res.ArtifactSHA256, res.ArtifactSHA256After)
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
				// 2*0 == 0 for the int 0 and the float 0: every other input fails.
				if res.Failures != 10240 || len(res.FirstFailures) != maxFirstFailures {
					t.Errorf("Failures=%d with %d first failures; want 10240 and %d", res.Failures, len(res.FirstFailures), maxFirstFailures)
				}
				if first := res.FirstFailures[0]; first != (Failure{Type: TypeInt, Input: "-1024", Expected: "-2048", Actual: "0"}) {
					t.Errorf("first failure = %+v, want the int -1024", first)
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
			name: "a forged passing report is caught by the oracle's own reference", artifact: "forged_report", verdict: VerdictIncompleteReport,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.Report || !strings.Contains(res.Detail, "reference finds") {
					t.Errorf("Report=%v Detail=%q; want the forged report rejected as inconsistent", res.Report, res.Detail)
				}
			},
		},
		{
			name: "panic crashes", artifact: "panic", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "panic: double: boom") {
					t.Errorf("Detail = %q, want the panic message", res.Detail)
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
			name: "rewriting the built copy is detected", artifact: "rewrite_copy", verdict: VerdictArtifactModified,
			check: func(t *testing.T, res Result, _ artifactData) {
				if res.ArtifactSHA256After != res.ArtifactSHA256 || !strings.Contains(res.Detail, "artifact/double.go") {
					t.Errorf("After=%s Detail=%q; want the original intact and the copy named", res.ArtifactSHA256After, res.Detail)
				}
			},
		},
		{
			name: "never returning times out and the driver is dead", artifact: "loop", deadline: 2 * time.Second, verdict: VerdictTimeout,
			check: func(t *testing.T, res Result, data artifactData) {
				assertProcessGone(t, readPID(t, data.PIDFile, time.Second))
			},
		},
		{
			// The child inherits the driver's stdout and stderr, so this also
			// proves that a descendant holding the output open does not hang
			// the oracle.
			name: "a child left running is a cleanup fault and is killed", artifact: "leftover", verdict: VerdictCleanupFault,
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
			name: "sleeping past the deadline then writing a report is a timeout", artifact: "sleep_then_report", deadline: time.Second, verdict: VerdictTimeout,
			check: func(t *testing.T, res Result, data artifactData) {
				assertProcessGone(t, readPID(t, data.PIDFile, time.Second))
				if res.Report || res.Checks != 0 {
					t.Errorf("Report=%v Checks=%d; a report written after the deadline must not be read", res.Report, res.Checks)
				}
			},
		},
		{
			name: "printing 100 MB goes to a file and changes nothing", artifact: "print_100mb", verdict: VerdictPassed,
			check: func(t *testing.T, res Result, _ artifactData) {
				info, err := os.Stat(filepath.Join(res.WorkDir, goRunLog))
				if err != nil || info.Size() < 100<<20 {
					t.Errorf("run.log: %v; want the 100 MiB in the file", err)
				}
			},
		},
		{
			name: "panicking on 1024 only crashes", artifact: "panic_1024", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "panic: double: 1024 is too big") {
					t.Errorf("Detail = %q, want the panic message", res.Detail)
				}
			},
		},
		{
			name: "a non-generic function is a build crash", artifact: "not_generic", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.Contains(res.Detail, "not generic") {
					t.Errorf("Detail = %q", res.Detail)
				}
			},
		},
		{
			name: "a type error is a build crash with compiler output", artifact: "type_error", verdict: VerdictCrashed,
			check: func(t *testing.T, res Result, _ artifactData) {
				if !strings.HasPrefix(res.Detail, "build failed: ") || !strings.Contains(res.Detail, "double.go") {
					t.Errorf("Detail = %q, want the compiler's message", res.Detail)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, data := writeArtifact(t, tt.artifact, "double.go")
			res, err := Check(context.Background(), spec, path, Options{Deadline: tt.deadline, WorkDir: t.TempDir()})
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

func TestCheckCancelled(t *testing.T) {
	requireGo(t)
	t.Parallel()
	path, data := writeArtifact(t, "sleep", "double.go")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Check(ctx, unrestricted(DoubleSpec()), path, Options{Deadline: 5 * time.Minute})
		done <- outcome{res, err}
	}()
	pid := readPID(t, data.PIDFile, 5*time.Minute)
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

// squareIntSpec is Square over the ints -5..5 only: a Go spec whose driver instantiates the
// function with int alone.
func squareIntSpec() Spec {
	return Spec{
		Name: "square", Language: "go", File: "square.go", Function: "Square",
		Domains:   []Domain{{Type: TypeInt, Min: -5, Max: 5, Step: 1}},
		Reference: Reference{Int: func(x int64) int64 { return x * x }, GoExpr: "x * x"},
	}
}

// A spec with only an int domain instantiates the function with int only, so
// an artifact whose constraint admits only ints builds and passes; the work
// directory is kept when the caller names its parent.
func TestCheckIntOnlySpecKeepsWorkDir(t *testing.T) {
	requireGo(t)
	t.Parallel()
	spec := squareIntSpec()
	path, _ := writeArtifact(t, "square_int", "square.go")
	parent := t.TempDir()
	res, err := Check(context.Background(), spec, path, Options{WorkDir: parent})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictPassed || res.Checks != 11 || res.Expected != 11 {
		t.Fatalf("Verdict=%q (%s) Checks=%d Expected=%d; want passed 11/11", res.Verdict, res.Detail, res.Checks, res.Expected)
	}
	if filepath.Dir(res.WorkDir) != parent {
		t.Fatalf("WorkDir = %q, want a directory inside %q", res.WorkDir, parent)
	}
	for _, f := range []string{"module/main.go", "module/go.mod", "module/artifact/square.go", goBuildLog, goRunLog} {
		if _, err := os.Stat(filepath.Join(res.WorkDir, f)); err != nil {
			t.Errorf("kept work dir lacks %s: %v", f, err)
		}
	}
}

func TestCheckWithoutGoIsUnavailable(t *testing.T) {
	path, _ := writeArtifact(t, "correct", "double.go")
	t.Setenv("PATH", t.TempDir())
	res, err := Check(context.Background(), DoubleSpec(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnavailable || res.Report {
		t.Fatalf("Verdict = %q (%s), want unavailable", res.Verdict, res.Detail)
	}
}

func TestCheckBadInput(t *testing.T) {
	t.Parallel()
	path, _ := writeArtifact(t, "correct", "double.go")
	cobol := DoubleSpec()
	cobol.Language = "cobol"
	noDomains := DoubleSpec()
	noDomains.Domains = nil
	badFunc := DoubleSpec()
	badFunc.Function = "double"
	tests := []struct {
		name string
		spec Spec
		path string
		want error
	}{
		{name: "missing artifact", spec: DoubleSpec(), path: filepath.Join(t.TempDir(), "none.go"), want: fs.ErrNotExist},
		{name: "missing artifact is no artifact", spec: DoubleSpec(), path: filepath.Join(t.TempDir(), "none.go"), want: ErrNoArtifact},
		{name: "a directory", spec: DoubleSpec(), path: t.TempDir(), want: ErrNoArtifact},
		{name: "unknown language", spec: cobol, path: path, want: ErrUnknownLanguage},
		{name: "spec without domains", spec: noDomains, path: path, want: ErrInvalidSpec},
		{name: "unexported function", spec: badFunc, path: path, want: ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(context.Background(), tt.spec, tt.path, Options{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check error = %v, want %v", err, tt.want)
			}
		})
	}
	// Zero means the default; a negative duration or limit is refused, naming the field.
	for _, o := range []struct {
		opts  Options
		field string
	}{
		{Options{Deadline: -time.Second}, "Deadline"},
		{Options{Cleanup: -1}, "Cleanup"},
		{Options{BuildDeadline: -time.Minute}, "BuildDeadline"},
		{Options{OutputLimit: -1}, "OutputLimit"},
	} {
		_, err := Check(context.Background(), DoubleSpec(), path, o.opts)
		var oe *OptionError
		if !errors.Is(err, ErrInvalidOptions) || !errors.As(err, &oe) || oe.Field != o.field || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("%+v: %v, want an *OptionError for %s", o.opts, err, o.field)
		}
	}
}

func TestSpecForFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	py := filepath.Join(dir, "double.py")
	rs := filepath.Join(dir, "double.rs")
	for _, p := range []string{py, rs} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := SpecForFile("double", py)
	if err != nil || spec.Language != LanguagePython || spec.Name != "double" {
		t.Fatalf("double for %s: %+v %v", py, spec, err)
	}
	for _, c := range []struct {
		name, spec, path string
		want             error
	}{
		{"unknown spec", "triple", py, ErrInvalidSpec},
		{"no such file", "double", filepath.Join(dir, "none.py"), ErrNoArtifact},
		{"a directory", "double", dir, ErrNoArtifact},
		{"unknown extension", "double", rs, ErrUnknownLanguage},
	} {
		if _, err := SpecForFile(c.spec, c.path); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := SpecForFile("triple", py); !strings.Contains(fmt.Sprint(err), "built-in: double, abs, clamp") {
		t.Errorf("an unknown spec does not name the built-in ones: %v", err)
	}
}

// A Go artifact that behaves only when it sees signs of a harness or
// credentials gets none: MinimalEnv passes none of the caller's.
func TestCheckGoEnvironmentHidesTheOracle(t *testing.T) {
	requireGo(t)
	t.Setenv("OPENAI_API_KEY", "secret")
	t.Setenv("ASSAY_ORACLE", "1")
	t.Setenv("ASSAY_GATEWAY_URL", "http://127.0.0.1:1")
	path, data := writeArtifact(t, "env_detect", "double.go")
	res, err := Check(context.Background(), unrestricted(DoubleSpec()), path, Options{})
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
	for _, name := range strings.Split(string(seen), "\n") {
		if strings.Contains(name, "ASSAY") || strings.Contains(name, "OPENAI") {
			t.Errorf("the artifact saw variable %q", name)
		}
	}
}

// Cancellation by the caller is the verdict even when everything else went
// wrong too: nothing finished, so nothing else is known.
func TestJudgeCancelledWins(t *testing.T) {
	t.Parallel()
	ex := execution{ran: true, reportPath: filepath.Join(t.TempDir(), "missing.json"),
		run: RunResult{ExitCode: -1, Cancelled: true, CleanupFault: true, Leftover: true, OutputExceeded: true}}
	var res Result
	verdict, _ := judge(DoubleSpec(), ex, "aa", "bb", &res)
	if verdict != VerdictCancelled {
		t.Fatalf("verdict = %q, want cancelled over cleanup fault and a changed artifact", verdict)
	}
	ex = execution{early: VerdictCancelled}
	if verdict, _ := judge(DoubleSpec(), ex, "aa", "aa", &res); verdict != VerdictCancelled {
		t.Fatalf("verdict = %q, want cancelled", verdict)
	}
}

// CheckVerdicts names each verdict once, passed among them, and not the test runners' no_tests.
func TestCheckVerdictsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range CheckVerdicts() {
		if v == "" || seen[v] || v == VerdictNoTests {
			t.Fatalf("CheckVerdicts() has %q (seen %v)", v, seen[v])
		}
		seen[v] = true
	}
	if !seen[VerdictPassed] || !seen[VerdictUnavailable] || len(seen) != 9 {
		t.Fatalf("CheckVerdicts() = %v", CheckVerdicts())
	}
}
