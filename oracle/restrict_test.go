package oracle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportRestriction: artifacts that could forge the driver's report from inside its process are
// refused before they run under the built-in specs, whatever their report would have said. The
// forged_correct_report artifacts are wrong everywhere but write a report with the correct outputs:
// without the restriction they pass (the second half of the test proves it), so the restriction is
// what stops them.
func TestImportRestriction(t *testing.T) {
	requireGo(t)
	py := requirePython(t)
	ctx := context.Background()
	cases := []struct {
		name, artifact, file, language string
		// passesUnrestricted is true for the artifacts the run-time defenses alone cannot catch.
		passesUnrestricted bool
	}{
		{"go: init forges a correct report", "forged_correct_report", "double.go", LanguageGo, true},
		{"go: forges a report on first call", "forged_report", "double.go", LanguageGo, false},
		{"go: reads the environment", "env_detect", "double.go", LanguageGo, false},
		{"go: leaves a child process", "leftover", "double.go", LanguageGo, false},
		{"python: import-time forged correct report", "python/forged_correct_report", "double.py", LanguagePython, true},
		{"python: reaches os through dunder attributes", "python/dunder_escape", "double.py", LanguagePython, false},
		{"python: reads the environment", "python/env_detect", "double.py", LanguagePython, false},
		{"go: counts its calls in a package variable", "counter", "double.go", LanguageGo, true},
		{"python: counts its calls in a default argument", "python/counter", "double.py", LanguagePython, true},
		{"python: reaches the driver through a generator frame", "python/frame_escape", "double.py", LanguagePython, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case checks its own artifact in its own directories
			spec, err := DoubleSpec().ForLanguage(c.language)
			if err != nil {
				t.Fatal(err)
			}
			path, _ := writeArtifact(t, c.artifact, c.file)
			res, err := Check(ctx, spec, path, Options{Python: py})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != VerdictForbiddenImport || !strings.Contains(res.Detail, "outside the spec's allowance") {
				t.Fatalf("Verdict = %q (%s), want %s", res.Verdict, res.Detail, VerdictForbiddenImport)
			}
			if c.passesUnrestricted {
				spec.AnyImport = true
				res, err := Check(ctx, spec, path, Options{Python: py})
				if err != nil {
					t.Fatal(err)
				}
				if res.Verdict != VerdictPassed {
					t.Fatalf("unrestricted Verdict = %q (%s): this artifact was meant to show what the restriction prevents", res.Verdict, res.Detail)
				}
			}
		})
	}
}

func TestGoImportViolations(t *testing.T) {
	requireGo(t)
	spec := DoubleSpec()
	cases := []struct {
		name, src string
		bad       int
	}{
		{"no imports", "package p\nfunc Double[T int | float64](x T) T { return 2 * x }\n", 0},
		{"math is allowed", "package p\nimport \"math\"\nconst pi = math.Pi\n", 0},
		{"os", "package p\nimport \"os\"\nvar _ = os.Args\n", 1},
		{"renamed unsafe", "package p\nimport u \"unsafe\"\nvar _ = u.Sizeof(0)\n", 1},
		{"blank import", "package p\nimport _ \"embed\"\n", 1},
		{"cgo", "package p\nimport \"C\"\n", 1},
		{"two bad one good", "package p\nimport (\n\"math\"\n\"os\"\n\"syscall\"\n)\n", 2},
		{"package-level var", "package p\nvar n int\nfunc Double[T int | float64](x T) T { return 2 * x }\n", 1},
		{"package-level const is fine", "package p\nconst two = 2\nfunc Double[T int | float64](x T) T { return two * x }\n", 0},
		{"init", "package p\nfunc init() {}\nfunc Double[T int | float64](x T) T { return 2 * x }\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each case checks its own source; spec is only read
			res, err := Check(context.Background(), spec, writeSource(t, "double.go", c.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			forbidden := res.Verdict == VerdictForbiddenImport
			if forbidden != (c.bad > 0) {
				t.Fatalf("Verdict = %q (%s), want forbidden=%v", res.Verdict, res.Detail, c.bad > 0)
			}
		})
	}
}

// writeSource writes src to a fresh directory under the given file name and returns its path.
func writeSource(t *testing.T, file, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// unrestricted lifts a spec's import restriction, for tests of the run-time defenses with
// artifacts that import what they need to attack them.
func unrestricted(s Spec) Spec {
	s.AnyImport = true
	return s
}
