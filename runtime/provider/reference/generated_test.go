package reference_test

import (
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// The files the reference provider writes are run for real: go test (or
// python) in a temporary directory, first as written (must pass), then with
// Double broken (must fail), so the generated tests can fail.

// writtenFiles asks the server for assignment a and returns path -> content
// of its write_file calls.
func writtenFiles(t *testing.T, a reference.Assignment) map[string]string {
	t.Helper()
	run := startReference(t, reference.Config{})
	status, raw := post(t, run, "run-g-executor", userTurn(reference.FormatAssignment(a), writeFileToolJSON))
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
	c := decodeCompletion(t, raw)
	files := map[string]string{}
	for _, call := range c.Choices[0].Message.ToolCalls {
		args := decodeWriteFile(t, call.Function.Arguments)
		files[args.Path] = args.Content
	}
	if len(files) != len(a.Files) {
		t.Fatalf("got files %v, want %v", files, a.Files)
	}
	return files
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runIn runs name args in dir with a clean Go environment and returns the
// combined output and error.
func runIn(t *testing.T, dir, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GO111MODULE=on")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const brokenDouble = "return 3 * x"

func TestGeneratedGoPassesAndCanFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in a subprocess")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	profiles := []reference.Assignment{
		{Task: "double", Language: "go", Package: "double", Files: []string{"double.go", "double_test.go"}},
		{Task: "double", Package: "solo", Files: []string{"solo_test.go"}},
	}
	for _, a := range profiles {
		t.Run(strings.Join(a.Files, "+"), func(t *testing.T) {
			files := writtenFiles(t, a)
			for name, content := range files {
				formatted, err := format.Source([]byte(content))
				if err != nil || string(formatted) != content {
					t.Errorf("%s is not gofmt-clean (%v):\n%s", name, err, content)
				}
			}
			dir := t.TempDir()
			files["go.mod"] = "module example.com/" + a.Package + "\n\ngo 1.22\n"
			writeTree(t, dir, files)
			if out, err := runIn(t, dir, goBin, "test", "-count=1", "./..."); err != nil {
				t.Fatalf("go test on generated files failed: %v\n%s", err, out)
			}
			for name, content := range files {
				if strings.Contains(content, "return 2 * x") {
					files[name] = strings.Replace(content, "return 2 * x", brokenDouble, 1)
				}
			}
			broken := t.TempDir()
			writeTree(t, broken, files)
			out, err := runIn(t, broken, goBin, "test", "-count=1", "./...")
			if err == nil || !strings.Contains(out, "TestDouble") {
				t.Fatalf("go test passed with Double broken; the generated test cannot fail:\n%s", out)
			}
		})
	}
}

func TestGeneratedPythonPassesAndCanFail(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	profiles := []reference.Assignment{
		{Task: "double", Language: "python", Files: []string{"double.py", "test_double.py"}},
		{Task: "double", Language: "python", Files: []string{"test_double.py"}},
	}
	for _, a := range profiles {
		t.Run(strings.Join(a.Files, "+"), func(t *testing.T) {
			files := writtenFiles(t, a)
			if a.Files[0] == "double.py" && files["double.py"] != "def double(x):\n    return 2 * x\n" {
				t.Errorf("double.py = %q", files["double.py"])
			}
			if len(a.Files) == 2 && !strings.HasPrefix(files["test_double.py"], "from double import double\n") {
				t.Errorf("test_double.py does not import double:\n%s", files["test_double.py"])
			}
			// pytest may be absent; the test function is plain asserts, so
			// calling it directly runs the same checks.
			script := "import test_double; test_double.test_double(); print('ok')"
			dir := t.TempDir()
			writeTree(t, dir, files)
			if out, err := runIn(t, dir, py, "-B", "-c", script); err != nil || !strings.Contains(out, "ok") {
				t.Fatalf("generated python test failed: %v\n%s", err, out)
			}
			for name, content := range files {
				files[name] = strings.Replace(content, "return 2 * x", brokenDouble, 1)
			}
			broken := t.TempDir()
			writeTree(t, broken, files)
			out, err := runIn(t, broken, py, "-B", "-c", script)
			if err == nil || !strings.Contains(out, "AssertionError") {
				t.Fatalf("python test passed with double broken:\n%s", out)
			}
		})
	}
}
