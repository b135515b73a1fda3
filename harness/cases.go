package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// Profile is a task profile: what each implementing member must deliver.
type Profile struct {
	// Name is the profile name used on the command line.
	Name string
	// Doc says what the profile asks for.
	Doc string
	// Files are the deliverables each implementing member writes, relative to its directory.
	Files func(language string) []string
	// Artifact is the file the oracle checks, relative to the member's directory.
	Artifact func(language string) string
}

// Profiles returns the task profiles by name.
func Profiles() map[string]Profile {
	return map[string]Profile{
		"standard": {
			Name: "standard",
			Doc:  "two files per implementing member: the function and its test",
			Files: func(language string) []string {
				return []string{"double.go", "double_test.go"}
			},
			Artifact: func(language string) string { return "double.go" },
		},
	}
}

// Languages are the artifact languages the matrix can check.
var Languages = []string{"go"}

// goModule is the module file the harness scaffolds in each implementing member's directory, so
// the independent test runner has a module to test. Members write only the declared files.
const goModule = "module example.com/double\n\ngo 1.21\n"

// packageName is the Go package members are asked to use.
const packageName = "double"

// Case is one matrix case: a formation run on a task profile in a language.
type Case struct {
	Formation string
	Profile   Profile
	Language  string
}

// Name is the case's display name, "formation/profile/language".
func (c Case) Name() string { return c.Formation + "/" + c.Profile.Name + "/" + c.Language }

// memberPlan is one member of a case with what it must deliver.
type memberPlan struct {
	Spec runtime.MemberSpec
	// Deliverables are the files the member must write (relative to Spec.Dir); empty for members
	// that do not implement.
	Deliverables []string
	// Artifact is the file the oracle checks, "" when the member does not implement.
	Artifact string
}

// plan builds the members of a case under caseDir, creating each member's directory and scaffold.
// Every implementing member writes in its own directory, so parallel members never share a path.
func (c Case) plan(caseDir string) ([]memberPlan, error) {
	files := c.Profile.Files(c.Language)
	assignment := reference.FormatAssignment(reference.Assignment{Task: "double", Language: c.Language,
		Package: packageName, Files: files})
	task := fmt.Sprintf("Implement, in Go package %q, a generic function `func Double[T int | float64](x T) T` "+
		"that returns 2*x, and a test for it. Write exactly these files with the write_file tool, paths relative "+
		"to your working directory: %s. A go.mod is already there.\n%s",
		packageName, strings.Join(files, ", "), assignment)
	var plans []memberPlan
	for _, id := range []string{"exec-1", "exec-2"} {
		dir := filepath.Join(caseDir, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("case %s: member directory: %w", c.Name(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goModule), 0o644); err != nil {
			return nil, fmt.Errorf("case %s: scaffold go.mod: %w", c.Name(), err)
		}
		plans = append(plans, memberPlan{
			Spec: runtime.MemberSpec{
				ID: id, Name: "executor " + strings.TrimPrefix(id, "exec-"), DomainRole: "executor",
				Goal: "You are an executor on a software team. You act only through the tools you are given; " +
					"your working directory is private to you.",
				Task:         task,
				AllowedTools: []string{"write_file", "read_file"},
				Dir:          dir,
			},
			Deliverables: files,
			Artifact:     c.Profile.Artifact(c.Language),
		})
	}
	return plans, nil
}
