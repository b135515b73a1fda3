package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/tasks"
)

// A malformed task file given to matrix run is one line on stderr naming the file, the field and
// the problem, exit 2, and nothing is written: no output directory, no store.
func TestMatrixRunRefusesAMalformedTaskFile(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "..", "tasks", "testdata", "triple.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(good)
	solution := strings.Index(base, "  python:\n    standard:\n      triple.py:")
	cases := []struct{ name, text, want string }{
		{"schema violation", strings.Replace(base, "step: 1}", "step: -1}", 1), ": oracle.domains.0.step: "},
		{"yaml syntax", base + "oracle: [\n", ": not YAML: "},
		{"unknown key", strings.Replace(base, "doc:", "colour: blue\ndoc:", 1), ": colour: unknown key"},
		{"missing reference solution for a language", base[:solution], ": reference_solution.python: missing"},
		{"missing deliverables", strings.Replace(base, "    standard: [triple.go, triple_test.go]\n", "", 1), ": deliverables.go.standard: missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "triple.yaml")
			if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			r := runCLI(t, "matrix", "run", "--formations", "sequential", "--task", file, "--out", out)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			oneLine(t, r, "--task "+file+tc.want)
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s written: %v", out, err)
			}
			r = runCLI(t, "tasks", "show", file)
			if r.code != 2 {
				t.Fatalf("tasks show: exit %d, want 2", r.code)
			}
			oneLine(t, r, file+tc.want)
		})
	}
	r := runCLI(t, "matrix", "run", "--task", "nosuch", "--out", filepath.Join(t.TempDir(), "out"))
	if r.code != 2 {
		t.Fatalf("unknown task: exit %d", r.code)
	}
	oneLine(t, r, `unknown task "nosuch"`)
}

func TestTasksListsTheBuiltins(t *testing.T) {
	r := runCLI(t, "tasks", "--format", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		SchemaVersion int             `json:"schema_version"`
		Tasks         []tasks.Summary `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion == 0 || len(doc.Tasks) != 3 || doc.Tasks[2].Name != "double" || len(doc.Tasks[2].SHA256) != 64 || doc.Tasks[2].Checks != 10242 {
		t.Fatalf("%+v", doc)
	}
	r = runCLI(t, "tasks", "show", "double")
	if r.code != 0 || !strings.Contains(r.stdout, "double.go, double_test.go") || !strings.Contains(r.stdout, doc.Tasks[2].SHA256) {
		t.Fatalf("tasks show double: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "matrix", "run", "--help")
	if !strings.Contains(r.stdout, "--task") {
		t.Fatal("matrix run --help does not name --task")
	}
}
