package harness

import (
	"testing"

	"github.com/assay-audit/assay/internal/testlang"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/tasks"
)

// caseLanguage is the language a test whose subject is not the Go path runs its matrix cases in
// (testlang.Cheap: Python where pytest is found, else Go). Go cases stay covered by
// TestEveryCatalogCaseIsAcceptedOnTheReferenceProvider and the custom-task tests.
func caseLanguage(t testing.TB) string { return testlang.Cheap(t) }

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
