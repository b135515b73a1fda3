package reference

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/tasks"
)

// The built-in double task file's reference solution is what the server writes for TaskDouble
// without it, byte for byte: a default matrix run answers the same with or without Config.Solutions,
// and `assay provider serve` (which has no task file) still answers double.
func TestDoubleTaskFileIsTheBuiltInAnswer(t *testing.T) {
	task, err := tasks.Builtin(TaskDouble)
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range tasks.Languages {
		for _, prof := range tasks.Profiles {
			a := Assignment{Task: TaskDouble, Language: lang, Files: task.Files(lang, prof)}
			if lang == LanguageGo {
				a.Package = task.Package
			}
			files, err := planFiles(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := task.Solution(lang, prof)
			if len(files) != len(want) {
				t.Fatalf("%s/%s: %d files, the task file has %d", lang, prof, len(files), len(want))
			}
			for _, f := range files {
				if want[f.path] != f.content {
					t.Errorf("%s/%s %s: built-in\n%s\ntask file\n%s", lang, prof, f.path, f.content, want[f.path])
				}
			}
		}
	}
}

// A configured solution is written for its task, language and file set only; another file set, or
// a task without one, is explained instead.
func TestSolutionsAnswerTheirAssignmentOnly(t *testing.T) {
	sol := []Solution{{Task: "triple", Language: LanguagePython, Files: map[string]string{"triple.py": "T", "test_triple.py": "U"}}}
	files, err := planFiles(Assignment{Task: "triple", Language: LanguagePython, Files: []string{"test_triple.py", "triple.py"}}, sol)
	if err != nil || len(files) != 2 || files[0].content != "U" || files[1].content != "T" {
		t.Fatalf("%v %v", files, err)
	}
	for _, a := range []Assignment{
		{Task: "triple", Language: LanguageGo, Files: []string{"triple.py", "test_triple.py"}},
		{Task: "triple", Language: LanguagePython, Files: []string{"triple.py"}},
		{Task: "triple", Language: LanguagePython, Files: []string{"triple.py", "other.py"}},
		{Task: "quadruple", Language: LanguagePython, Files: []string{"triple.py", "test_triple.py"}},
	} {
		if _, err := planFiles(a, sol); err == nil || !strings.Contains(err.Error(), "unknown task") {
			t.Errorf("%+v: err %v", a, err)
		}
	}
	if _, err := New(Config{Solutions: []Solution{{Task: "x"}}}); err == nil {
		t.Error("a solution without files was accepted")
	}
}
