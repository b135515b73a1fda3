package harness

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/tasks"
)

// pytestProbe finds a Python with pytest once per test binary: the probe starts a subprocess.
var pytestProbe = sync.OnceValue(func() error {
	_, err := oracle.FindPython(context.Background(), true)
	return err
})

// caseLanguage is the language a test whose subject is not the Go path runs its matrix cases in:
// "python" (a standard-profile Python case costs about a third of the CPU of a Go one: no member
// `go test` or oracle `go build` links a binary) when a Python with pytest is found, else "go",
// logged, so the test still runs and asserts on a machine without pytest. Under ASSAY_REQUIRE_TOOLS
// a missing pytest fails the test instead. Go cases stay covered by
// TestEveryCatalogCaseIsAcceptedOnTheReferenceProvider and the custom-task tests.
func caseLanguage(t testing.TB) string {
	t.Helper()
	if err := pytestProbe(); err != nil {
		if os.Getenv("ASSAY_REQUIRE_TOOLS") != "" {
			t.Fatalf("python3 with pytest is required (ASSAY_REQUIRE_TOOLS is set): apt-get install -y python3-pytest: %v", err)
		}
		t.Logf("no python3 with pytest (%v): running the case in go", err)
		return reference.LanguageGo
	}
	return reference.LanguagePython
}

// deliverables are an implementing member's files in the default task for language and the
// standard profile, artifact first: double.go, double_test.go in Go; double.py, test_double.py
// in Python.
func deliverables(t testing.TB, language string) []string {
	t.Helper()
	task, err := tasks.Builtin(tasks.Default)
	if err != nil {
		t.Fatal(err)
	}
	files := task.Files(language, "standard")
	if len(files) != 2 {
		t.Fatalf("%s/standard deliverables %v; want an artifact and its test", language, files)
	}
	return files
}

// scripted is what a scriptedProvider member writes for the default task in one language, standard
// profile: a correct artifact, one wrong only for 7 (its own test does not look at 7), a passing
// test, the completion reply naming both files, and a policy glob matching only the test file.
type scripted struct {
	language, artifact, testFile string
	correct, wrongFor7, goodTest string
	done, testGlob               string
}

// scriptedFor returns language's scripted deliverables (Go: double.go, double_test.go; Python:
// double.py, test_double.py).
func scriptedFor(t testing.TB, language string) scripted {
	t.Helper()
	files := deliverables(t, language)
	s := scripted{language: language, artifact: files[0], testFile: files[1],
		done: `{"status":"done","files":["` + files[0] + `","` + files[1] + `"]}`}
	switch language {
	case reference.LanguageGo:
		s.correct, s.wrongFor7, s.goodTest, s.testGlob = correct, wrongFor7, goodTest, "**/*_test.go"
	case reference.LanguagePython:
		s.correct = "def double(x):\n    return 2 * x\n"
		s.wrongFor7 = "def double(x):\n    if x == 7:\n        return 15\n    return 2 * x\n"
		s.goodTest = "from double import double\n\n\ndef test_double():\n    assert double(2) == 4 and double(1.5) == 3.0\n"
		s.testGlob = "**/test_*.py"
	default:
		t.Fatalf("no scripted deliverables for %q", language)
	}
	return s
}

// solution is the correct artifact and the passing test, by file name.
func (s scripted) solution(artifact string) map[string]string {
	return map[string]string{s.artifact: artifact, s.testFile: s.goodTest}
}
