package reference

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/token"
	"maps"
	"path"
	"slices"
	"strings"
)

// AssignmentPrefix starts the one line of a user message that carries an
// Assignment: AssignmentPrefix followed by the Assignment's compact JSON.
const AssignmentPrefix = "assay-assignment: "

// Tasks and languages the reference provider carries out.
const (
	// TaskDouble asks for a function Double returning 2*x, with its tests.
	TaskDouble = "double"
	// LanguageGo writes Go files (the default when Language is empty).
	LanguageGo = "go"
	// LanguagePython writes Python files tested with pytest.
	LanguagePython = "python"
)

// Assignment is the structured task the harness puts in a user message, on
// one line: AssignmentPrefix + compact JSON of Assignment.
type Assignment struct {
	// Task is TaskDouble, or a task the server has a Config.Solutions entry for.
	Task string `json:"task"`
	// Language is LanguageGo (default when empty) or LanguagePython.
	Language string `json:"language"`
	// Package is the Go package name for the files, e.g. "double"; unused
	// for Python.
	Package string `json:"package"`
	// Files are the files the member must write, relative to its directory,
	// in the order the tool calls are made.
	Files []string `json:"files"`
	// SatisfiedAt is, for a critic, the first reflection iteration (1-based)
	// at which the reference critic answers "satisfied"; 0 means 1. It lets a
	// case exercise the needs_work loop deterministically.
	SatisfiedAt int `json:"satisfied_at,omitempty"`
}

// FormatAssignment returns the one line carrying a: AssignmentPrefix and
// a's compact JSON, keys in struct order, no HTML escaping, nil Files as [].
// It is deterministic: equal assignments give equal lines.
func FormatAssignment(a Assignment) string {
	if a.Files == nil {
		a.Files = []string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Encoding a struct of strings cannot fail.
	_ = enc.Encode(a)
	return AssignmentPrefix + strings.TrimSuffix(buf.String(), "\n")
}

// ParseAssignment finds the assignment line in a message's text: the first
// line that, with surrounding whitespace trimmed, starts with
// AssignmentPrefix. It reports false when there is no such line or its JSON
// is not exactly an Assignment (unknown keys, trailing data or bad JSON).
func ParseAssignment(text string) (Assignment, bool) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, AssignmentPrefix)
		if !ok {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(rest))
		dec.DisallowUnknownFields()
		var a Assignment
		if err := dec.Decode(&a); err != nil {
			return Assignment{}, false
		}
		if dec.More() {
			return Assignment{}, false
		}
		return a, true
	}
	return Assignment{}, false
}

// goFunction is the Go source of Double for package pkg.
func goFunction(pkg string) string {
	return "package " + pkg + "\n\n// Double returns 2*x.\nfunc Double[T int | float64](x T) T { return 2 * x }\n"
}

// goTestBody is a table-driven test of Double for int and float64.
const goTestBody = `func TestDouble(t *testing.T) {
	intCases := []struct {
		name     string
		in, want int
	}{
		{"zero", 0, 0},
		{"positive", 21, 42},
		{"negative", -7, -14},
	}
	for _, tc := range intCases {
		if got := Double(tc.in); got != tc.want {
			t.Errorf("int %s: Double(%d) = %d, want %d", tc.name, tc.in, got, tc.want)
		}
	}

	floatCases := []struct {
		name     string
		in, want float64
	}{
		{"zero", 0, 0},
		{"fraction", 1.25, 2.5},
		{"negative", -0.5, -1},
	}
	for _, tc := range floatCases {
		if got := Double(tc.in); got != tc.want {
			t.Errorf("float64 %s: Double(%v) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
}
`

// goTest is the Go test file for package pkg; withFunction also defines
// Double in it (single-file profile).
func goTest(pkg string, withFunction bool) string {
	var b strings.Builder
	b.WriteString("package " + pkg + "\n\nimport \"testing\"\n\n")
	if withFunction {
		b.WriteString("// Double returns 2*x.\nfunc Double[T int | float64](x T) T { return 2 * x }\n\n")
	}
	b.WriteString(goTestBody)
	return b.String()
}

const pythonFunction = "def double(x):\n    return 2 * x\n"

const pythonTestBody = `def test_double():
    cases = [
        ("zero", 0, 0),
        ("positive", 21, 42),
        ("negative", -7, -14),
        ("fraction", 1.25, 2.5),
    ]
    for name, given, want in cases:
        got = double(given)
        assert got == want, f"{name}: double({given!r}) = {got!r}, want {want!r}"
`

// pythonTest is the pytest file; module is the module to import double
// from, or "" to define double in the test file itself (single-file
// profile).
func pythonTest(module string) string {
	if module == "" {
		return pythonFunction + "\n\n" + pythonTestBody
	}
	return "from " + module + " import double\n\n\n" + pythonTestBody
}

func isPythonTest(file string) bool {
	base := path.Base(file)
	return strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")
}

// plannedFile is one write_file call of the reply to an assignment.
type plannedFile struct {
	path, content string
}

// planFiles returns the file contents for a, in a.Files order, or a reason
// the reference provider cannot carry a out.
func planFiles(a Assignment, solutions []Solution) ([]plannedFile, error) {
	lang := a.Language
	if lang == "" {
		lang = LanguageGo
	}
	for _, sol := range solutions {
		if sol.Task != a.Task || sol.Language != lang || len(sol.Files) != len(a.Files) {
			continue
		}
		out := make([]plannedFile, 0, len(a.Files))
		for _, f := range a.Files {
			content, ok := sol.Files[f]
			if !ok {
				break
			}
			out = append(out, plannedFile{path: f, content: content})
		}
		if len(out) == len(a.Files) {
			return out, nil
		}
	}
	if a.Task != TaskDouble {
		known := []string{TaskDouble}
		for _, sol := range solutions {
			known = append(known, sol.Task+" ("+sol.Language+": "+strings.Join(slices.Sorted(maps.Keys(sol.Files)), ", ")+")")
		}
		return nil, fmt.Errorf("unknown task %q, or no reference solution for its language and files (known: %s)", a.Task, strings.Join(known, "; "))
	}
	if len(a.Files) == 0 {
		return nil, fmt.Errorf("the assignment lists no files")
	}
	for _, f := range a.Files {
		if strings.TrimSpace(f) == "" {
			return nil, fmt.Errorf("the assignment lists an empty file name")
		}
	}
	switch a.Language {
	case "", LanguageGo:
		return planGo(a)
	case LanguagePython:
		return planPython(a)
	default:
		return nil, fmt.Errorf("unknown language %q (only %q and %q are supported)", a.Language, LanguageGo, LanguagePython)
	}
}

func planGo(a Assignment) ([]plannedFile, error) {
	if !token.IsIdentifier(a.Package) {
		return nil, fmt.Errorf("package %q is not a Go identifier", a.Package)
	}
	hasSource := false
	for _, f := range a.Files {
		if !strings.HasSuffix(f, ".go") {
			return nil, fmt.Errorf("file %q is not a .go file", f)
		}
		if !strings.HasSuffix(f, "_test.go") {
			hasSource = true
		}
	}
	out := make([]plannedFile, 0, len(a.Files))
	for _, f := range a.Files {
		content := goFunction(a.Package)
		if strings.HasSuffix(f, "_test.go") {
			content = goTest(a.Package, !hasSource && len(out) == 0)
		}
		out = append(out, plannedFile{path: f, content: content})
	}
	return out, nil
}

func planPython(a Assignment) ([]plannedFile, error) {
	module := ""
	for _, f := range a.Files {
		if !strings.HasSuffix(f, ".py") {
			return nil, fmt.Errorf("file %q is not a .py file", f)
		}
		if !isPythonTest(f) && module == "" {
			module = strings.TrimSuffix(path.Base(f), ".py")
			if !token.IsIdentifier(module) {
				return nil, fmt.Errorf("file %q does not name an importable module", f)
			}
		}
	}
	out := make([]plannedFile, 0, len(a.Files))
	for _, f := range a.Files {
		content := pythonFunction
		if isPythonTest(f) {
			content = pythonTest(module)
		}
		out = append(out, plannedFile{path: f, content: content})
	}
	return out, nil
}
