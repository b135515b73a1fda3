package tasks_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/tasks"
)

// The built-in task files and the oracle's built-in specs are one definition: same name, doc,
// targets, parameters, domains, expressions, signed-zero rule, and the reference the task file's Go
// expression evaluates to equals the oracle's native reference on every input.
func TestBuiltinsMatchOracle(t *testing.T) {
	if got, want := tasks.BuiltinNames(), []string{"abs", "clamp", "double"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("BuiltinNames = %v, want %v", got, want)
	}
	for _, want := range oracle.Specs() {
		task, err := tasks.Builtin(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, lang := range tasks.Languages {
			w, err := want.ForLanguage(lang)
			if err != nil {
				t.Fatal(err)
			}
			got, err := task.Spec(lang)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != w.Name || got.Doc != w.Doc || got.Language != w.Language || got.File != w.File || got.Function != w.Function ||
				!reflect.DeepEqual(got.Targets, w.Targets) || !reflect.DeepEqual(got.ParamNames(), w.ParamNames()) ||
				!reflect.DeepEqual(got.Domains, w.Domains) || got.Reference.GoExpr != w.Reference.GoExpr ||
				got.Reference.PyExpr != w.Reference.PyExpr || got.SignedZero != w.SignedZero || !reflect.DeepEqual(got.Imports, w.Imports) {
				t.Fatalf("%s/%s: task spec\n%+v\noracle spec\n%+v", want.Name, lang, got, w)
			}
		}
		sameReference(t, task.Spec, want)
	}
}

func sameReference(t *testing.T, specOf func(string) (oracle.Spec, error), want oracle.Spec) {
	t.Helper()
	got, _ := specOf(oracle.LanguageGo)
	for _, d := range want.Domains {
		ranges := d.Args
		if len(ranges) == 0 {
			ranges = []oracle.Range{{Min: d.Min, Max: d.Max, Step: d.Step}}
		}
		n := 0
		var walk func(i int, ia []int64, fa []float64)
		walk = func(i int, ia []int64, fa []float64) {
			if i == len(ranges) {
				n++
				if d.Type == oracle.TypeInt {
					g, w := got.Reference.IntN(ia), nativeInt(want.Reference, ia)
					if g != w {
						t.Fatalf("%s int %v: task reference %d, oracle %d", want.Name, ia, g, w)
					}
					return
				}
				g, w := got.Reference.Float64N(fa), nativeFloat(want.Reference, fa)
				if math.Float64bits(g) != math.Float64bits(w) {
					t.Fatalf("%s float64 %v: task reference %v, oracle %v", want.Name, fa, g, w)
				}
				return
			}
			for k := 0; k < ranges[i].Size(); k++ {
				walk(i+1, append(ia, ranges[i].IntInput(k)), append(fa, ranges[i].Float64Input(k)))
			}
		}
		walk(0, nil, nil)
		if n != d.Size() {
			t.Fatalf("%s: walked %d inputs, domain has %d", want.Name, n, d.Size())
		}
	}
}

func nativeInt(r oracle.Reference, a []int64) int64 {
	if r.IntN != nil {
		return r.IntN(a)
	}
	return r.Int(a[0])
}

func nativeFloat(r oracle.Reference, a []float64) float64 {
	if r.Float64N != nil {
		return r.Float64N(a)
	}
	return r.Float64(a[0])
}

// The evaluator follows Go: wrapping int64 overflow, truncating division, exact constant folding.
func TestExprReferenceGoSemantics(t *testing.T) {
	doms := []oracle.Domain{{Type: oracle.TypeInt, Min: 0, Max: 1, Step: 1}, {Type: oracle.TypeFloat64, Min: 0, Max: 1, Step: 1}}
	r, err := tasks.ExprReference("x*2 + (0.1+0.2)*10 - 3", []string{"x"}, doms)
	if err != nil {
		t.Fatal(err)
	}
	big := int64(math.MaxInt64)
	if got, want := r.IntN([]int64{big}), big*2+3-3; got != want || got != -2 {
		t.Fatalf("overflow: %d, want %d (Go's own wrapping)", got, want)
	}
	x := 1.0
	if got, want := r.Float64N([]float64{x}), x*2+(0.1+0.2)*10-3; got != want {
		t.Fatalf("float: %v, want %v (Go's own)", got, want)
	}
	q, _ := tasks.ExprReference("-x / 2 % 3", []string{"x"}, doms[:1])
	if got, want := q.IntN([]int64{-7}), int64(-(-7)/2%3); got != want {
		t.Fatalf("division: %d, want %d", got, want)
	}
	for expr, why := range map[string]string{
		"x << 1":     "operator",
		"len(\"a\")": "min and max",
		"y + 1":      "undefined",
		"x / 0":      "division by zero",
		"x +":        "does not parse",
		"\"s\"":      "not a number",
		"x * 0.5":    "truncated",
	} {
		if _, err := tasks.ExprReference(expr, []string{"x"}, doms[:1]); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: err %v, want one saying %q", expr, err, why)
		}
	}
}

// triple is a valid custom task, from which the malformed ones below are made.
func tripleYAML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "triple.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseCustomTask(t *testing.T) {
	task, err := tasks.Parse("triple.yaml", []byte(tripleYAML(t)))
	if err != nil {
		t.Fatal(err)
	}
	if task.Name != "triple" || task.Package != "triple" || task.Artifact("python", "standard") != "triple.py" || len(task.SHA256) != 64 {
		t.Fatalf("task %+v", task.Summarize())
	}
	spec, _ := task.Spec("python")
	if spec.Function != "triple" || spec.Reference.IntN([]int64{7}) != 21 || spec.Expected() != 201+81 {
		t.Fatalf("spec %+v", spec)
	}
	text, _ := task.ExecutorAssignment("go", task.Files("go", "standard"))
	if !strings.Contains(text, `package "triple"`) || !strings.Contains(text, "triple.go, triple_test.go") {
		t.Fatalf("executor assignment %q", text)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	base := tripleYAML(t)
	cases := []struct{ name, yaml, want string }{
		{"yaml syntax", base + "\n  bad: [\n", "f.yaml: not YAML:"},
		{"unknown key", strings.Replace(base, "name: triple\n", "name: triple\ncolour: blue\n", 1), "f.yaml: colour: unknown key"},
		{"missing profile", strings.Replace(base, "    standard: [triple.go, triple_test.go]\n", "", 1), "f.yaml: deliverables.go.standard: missing"},
		{"schema type", strings.Replace(base, "step: 1}", "step: one}", 1), "f.yaml: oracle.domains.0.step:"},
		{"bad test command", strings.Replace(base, "python: pytest", "python: unittest", 1), "f.yaml: test_command.python:"},
		{"missing solution language", cutSolution(base, "  python:\n"), "f.yaml: reference_solution.python: missing"},
		{"missing solution file", strings.Replace(base, "      triple_test.go: |", "      other_test.go: |", 1), "f.yaml: reference_solution.go.standard.triple_test.go: missing"},
		{"bad reference", strings.Replace(base, `go: "3 * x"`, `go: "3 * y"`, 1), "f.yaml: oracle: reference.go:"},
		{"bad template", strings.Replace(base, "{{.Files}}", "{{.Nope}}", 1), "f.yaml: assignment.executor."},
		{"two documents", base + "---\nname: x\n", "f.yaml: holds more than one YAML document"},
		// Deliverables the test command would not run as tests: go test compiles only *_test.go as
		// tests and pytest collects only test_*.py / *_test.py, so the members' tests would pass
		// having run nothing.
		{"go test file not _test.go", strings.Replace(base, "standard: [triple.go, triple_test.go]", "standard: [triple.go, triple_check.go]", 1),
			`f.yaml: deliverables.go.standard: the test file "triple_check.go" must end _test.go`},
		{"go function file is a test file", strings.Replace(base, "standard: [triple.go, triple_test.go]", "standard: [triple_impl_test.go, triple_test.go]", 1),
			`f.yaml: deliverables.go.standard: the function file "triple_impl_test.go" must not be a _test.go file`},
		{"pytest would not collect", strings.Replace(base, "standard: [triple.py, test_triple.py]", "standard: [triple.py, check_triple.py]", 1),
			`f.yaml: deliverables.python.standard: the test file "check_triple.py" must be named test_*.py or *_test.py`},
		{"python single file not collected", strings.Replace(base, "single-file: [test_triple.py]", "single-file: [triple.py]", 1),
			`f.yaml: deliverables.python.single-file: the test file "triple.py" must be named`},
		{"python module not importable", strings.Replace(base, "standard: [triple.py, test_triple.py]", "standard: [tri-ple.py, test_triple.py]", 1),
			`f.yaml: deliverables.python.standard: the file "tri-ple.py" is not an importable Python module name`},
		{"python module is a keyword", strings.Replace(base, "standard: [triple.py, test_triple.py]", "standard: [class.py, test_triple.py]", 1),
			`f.yaml: deliverables.python.standard: the file "class.py" is not an importable Python module name`},
		{"python function is a keyword", strings.Replace(base, "  python: triple\n", "  python: def\n", 1), `f.yaml: function.python: "def" is a Python keyword`},
		{"go package is a keyword", strings.Replace(base, "name: triple\n", "name: triple\npackage: func\n", 1), `f.yaml: package: "func" cannot be a Go package`},
		{"name as package is a keyword", strings.Replace(base, "name: triple\n", "name: type\n", 1), `f.yaml: name: "type" cannot be a Go package`},
		{"package main", strings.Replace(base, "name: triple\n", "name: triple\npackage: main\n", 1), `f.yaml: package: "main" cannot be a Go package`},
		{"an import that opens the oracle's isolation", strings.Replace(base, "  reference:\n", "  imports: [math, os]\n  reference:\n", 1),
			`f.yaml: oracle.imports.1: "os" is not one of the imports an artifact may be allowed`},
		{"python state across calls", strings.Replace(base, "  reference:\n", "  imports: [functools]\n  reference:\n", 1),
			`f.yaml: oracle.imports.0: "functools" is not one of`},
		{"larger than the limit", base + "# " + strings.Repeat("x", tasks.MaxFileBytes) + "\n", "f.yaml: larger than 1048576 bytes"},
	}
	for _, tc := range cases {
		_, err := tasks.Parse("f.yaml", []byte(tc.yaml))
		if err == nil || !errors.Is(err, tasks.ErrInvalidTask) || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err %v, want one line starting %q", tc.name, err, tc.want)
		}
	}
}

// cutSolution removes the reference solution's block for one language (from its header line to the
// next language header or the end).
func cutSolution(s, header string) string {
	i := strings.Index(s, "reference_solution:\n")
	j := strings.Index(s[i:], header)
	return s[:i+j]
}

func TestLoad(t *testing.T) {
	if task, err := tasks.Load(""); err != nil || task.Name != "double" || task.File != "builtin:double" {
		t.Fatalf("Load default: %v %v", task, err)
	}
	if _, err := tasks.Load("nosuch"); !errors.Is(err, tasks.ErrUnknownTask) {
		t.Fatalf("Load nosuch: %v", err)
	}
	if _, err := tasks.Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("Load missing file: %v", err)
	}
	task, err := tasks.Load(filepath.Join("testdata", "triple.yaml"))
	if err != nil || task.Name != "triple" {
		t.Fatalf("Load file: %v", err)
	}
}

// Load reads no more than the limit of an oversized file and refuses it as Parse does.
func TestLoadRefusesOversizedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, append([]byte(tripleYAML(t)), make([]byte, 8*tasks.MaxFileBytes)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Load(path); !errors.Is(err, tasks.ErrInvalidTask) || !strings.Contains(err.Error(), "larger than 1048576 bytes") {
		t.Fatalf("Load big.yaml: %v", err)
	}
}

// A file named like a built-in task in the working directory does not shadow the built-in; a
// path-looking name is always a file.
func TestLoadPrefersTheBuiltinName(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("double", []byte("not a task"), 0o644); err != nil {
		t.Fatal(err)
	}
	if task, err := tasks.Load("double"); err != nil || task.File != "builtin:double" {
		t.Fatalf("Load double: %v %v", task, err)
	}
	if _, err := tasks.Load("./double"); !errors.Is(err, tasks.ErrInvalidTask) {
		t.Fatalf("Load ./double: %v", err)
	}
}

// The double task file asks what the matrix asked before tasks were files, word for word, so the
// default run's members, manifest texts and go.mod are what they were.
func TestDoubleAsksWhatTheBuiltInAsked(t *testing.T) {
	task, err := tasks.Builtin("double")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"double.go", "double_test.go"}
	want := fmt.Sprintf("Implement, in Go package %q, a generic function `func Double[T int | float64](x T) T` that returns "+
		"2*x, and a test for it. Write exactly these files with the write_file tool, paths relative to your working "+
		"directory: %s. A go.mod is already there.", "double", strings.Join(files, ", "))
	if got, _ := task.ExecutorAssignment("go", files); got != want {
		t.Errorf("go executor:\n%s\nwant\n%s", got, want)
	}
	want = "Implement, in Python, a function `double(x)` that returns 2*x for ints and floats, and a pytest " +
		"test for it. Write exactly these files with the write_file tool, paths relative to your working directory: test_double.py."
	if got, _ := task.ExecutorAssignment("python", []string{"test_double.py"}); got != want {
		t.Errorf("python executor:\n%s\nwant\n%s", got, want)
	}
	if task.GoModule() != "module example.com/double\n\ngo 1.21\n" || task.TeamTask != "Implement Double in the function file.\nTest Double in the test file.\n" {
		t.Errorf("go.mod %q, team task %q", task.GoModule(), task.TeamTask)
	}
	if c, _ := task.RoleAssignment("critic"); c != "You are the critic of a team implementing Double. Read the generator's files with read_file and judge them." {
		t.Errorf("critic %q", c)
	}
}

// BenchmarkParseClamp measures reading a task file: YAML, schema, and evaluating the reference on
// every int input of its domains (6,321 for clamp).
func BenchmarkParseClamp(b *testing.B) {
	for b.Loop() {
		if _, err := tasks.Builtin("clamp"); err != nil {
			b.Fatal(err)
		}
	}
}

// A task file may narrow the artifact's imports to computation-only ones.
func TestParseAcceptsPureImports(t *testing.T) {
	y := strings.Replace(tripleYAML(t), "  reference:\n", "  imports: [math, math/bits]\n  reference:\n", 1)
	task, err := tasks.Parse("f.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := task.Spec(tasks.LanguageGo)
	if err != nil || !reflect.DeepEqual(spec.Imports, []string{"math", "math/bits"}) {
		t.Fatalf("spec imports %v, %v", spec.Imports, err)
	}
}
