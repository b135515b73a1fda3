package main

import (
	"encoding/json"
	"os"

	"github.com/assay-audit/assay/internal/browsertest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeOracleFile writes body to name in a fresh directory and returns the path.
func writeOracleFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// requirePython3 skips a test that runs Python artifacts on a machine without python3, and fails
// it there when ASSAY_REQUIRE_TOOLS is set (as .ci/run sets it), so CI cannot pass it unrun.
func requirePython3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv(browsertest.RequireEnv) != "" {
			t.Fatalf("python3 is required (%s is set): apt-get install -y python3", browsertest.RequireEnv)
		}
		t.Skip("python3 not on PATH")
	}
}

func TestOracleSpecsListsBuiltins(t *testing.T) {
	r := runCLI(t, "oracle", "specs")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"double", "abs", "clamp", "python: clamp.py clamp(x, limit)", "10242", "12642"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("specs table lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "oracle", "specs", "--format", "json")
	var specs []specRow
	if err := json.Unmarshal(listOf(t, r.stdout, "specs"), &specs); err != nil || r.code != 0 {
		t.Fatalf("exit %d, json: %v\n%s", r.code, err, r.stdout)
	}
	if len(specs) != 3 || specs[0].Name != "double" || specs[0].Checks != 10242 || len(specs[0].Domains) != 2 ||
		specs[2].Name != "clamp" || strings.Join(specs[2].Params, ",") != "x,limit" || specs[2].SignedZero != "equal" ||
		len(specs[2].Domains[0].Args) != 2 || specs[0].Reference["python"] != "2 * x" {
		t.Fatalf("specs = %+v", specs)
	}
}

func TestOracleCheckVerdictsAndExitCodes(t *testing.T) {
	t.Parallel()
	requirePython3(t)
	tests := []struct {
		name, file, body string
		spec             string
		code             int
		verdict          string
		failures         *int
		stderr           string
	}{
		{name: "correct python passes", file: "double.py", body: "def double(x):\n    return x + x\n", code: 0, verdict: "passed", failures: intPtr(0)},
		{name: "bool for zero fails", file: "double.py", body: "def double(x):\n    return False if x == 0 else 2 * x\n",
			code: 1, verdict: "failed", failures: intPtr(2), stderr: "got False of type bool"},
		{name: "an artifact importing sys is refused before it runs, failures unknown", file: "double.py", body: "import sys\n\ndef double(x):\n    sys.exit(0)\n",
			code: 1, verdict: "forbidden_import", stderr: "outside the spec's allowance"},
		{name: "another spec on a file the user points at", file: "whatever.py", spec: "clamp",
			body: "def clamp(x, limit):\n    return min(max(x, -limit), limit)\n", code: 0, verdict: "passed", failures: intPtr(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeOracleFile(t, tt.file, tt.body)
			spec := tt.spec
			if spec == "" {
				spec = "double"
			}
			r := runCLI(t, "oracle", "check", "--spec", spec, "--format", "json", path)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			var out checkOutput
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, r.stdout)
			}
			if out.Verdict != tt.verdict || out.Language != "python" || out.File != path || len(out.ArtifactSHA256) != 64 || out.Interpreter == "" {
				t.Errorf("output = %+v", out)
			}
			if (out.Failures == nil) != (tt.failures == nil) || (out.Failures != nil && *out.Failures != *tt.failures) {
				t.Errorf("failures = %v, want %v", out.Failures, tt.failures)
			}
			if !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("stderr = %q, want it to mention %q", r.stderr, tt.stderr)
			}
		})
	}
}

func TestOracleCheckGoArtifactText(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	path := writeOracleFile(t, "double.go", "package anything\n\nfunc Double[T ~int | ~float64](x T) T { return 2 * x }\n")
	r := runCLI(t, "oracle", "check", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"VERDICT      passed", "double (go: double.go, function Double)", "10242 reported of 10242 demanded"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	wrong := writeOracleFile(t, "double.go", "package anything\n\nfunc Double[T ~int | ~float64](x T) T { return 0 }\n")
	r = runCLI(t, "oracle", "check", wrong)
	if r.code != 1 || !strings.Contains(r.stdout, "EXPECTED") || !strings.Contains(r.stderr, "oracle verdict failed") {
		t.Fatalf("exit %d, want 1 with a failure table:\n%s", r.code, r.stdout)
	}
}

func TestOracleCheckBadInput(t *testing.T) {
	py := writeOracleFile(t, "double.py", "def double(x):\n    return 2 * x\n")
	goOnly := writeOracleFile(t, "double.rs", "fn double() {}\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no such file", args: []string{"oracle", "check", filepath.Join(t.TempDir(), "none.py")}, want: "no such file"},
		{name: "unknown spec", args: []string{"oracle", "check", "--spec", "triple", py}, want: `no built-in spec "triple" (built-in: double, abs, clamp)`},
		{name: "language not recognised", args: []string{"oracle", "check", goOnly}, want: "unknown language"},
		{name: "directory", args: []string{"oracle", "check", t.TempDir()}, want: "not a regular file"},
		{name: "no file", args: []string{"oracle", "check"}, want: "exactly one FILE"},
		{name: "bad format", args: []string{"oracle", "check", "--format", "xml", py}, want: "--format"},
		{name: "negative deadline", args: []string{"oracle", "check", "--deadline", "-1s", py}, want: "--deadline -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\nstderr: %s", r.code, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing printed for bad input", r.stdout)
			}
			oneLine(t, r, tt.want)
		})
	}
}

func intPtr(n int) *int { return &n }
