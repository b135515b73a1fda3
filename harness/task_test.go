package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/tasks"
)

// tripleFile writes the triple task (tasks/testdata/triple.yaml) into dir, with edit applied to its
// text, and returns its path.
func tripleFile(t *testing.T, dir string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "tasks", "testdata", "triple.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if edit != nil {
		text = edit(text)
	}
	p := filepath.Join(dir, "triple.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wrongTriple makes the reference solution (and the members' own tests, which do not look at 7)
// wrong for one input: triple(7) = 22. Only the oracle can see it.
func wrongTriple(text string) string {
	text = strings.ReplaceAll(text, "func Triple[T int | float64](x T) T { return 3 * x }",
		"func Triple[T int | float64](x T) T {\n        \tif x == 7 {\n        \t\treturn 22\n        \t}\n        \treturn 3 * x\n        }")
	return strings.ReplaceAll(text, "            return 3 * x", "            return 22 if x == 7 else 3 * x")
}

// A task given as a file runs through the matrix in Go and Python: accepted with the task file's
// reference solution; rejected by the oracle (and only the oracle) when the solution is wrong on one
// input its own tests do not look at. The manifest binds the task's name and SHA-256, and the run
// stores the file's bytes.
func TestACustomTaskFileRunsThroughTheMatrix(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs matrix cases; skipped with -short")
	}
	for _, language := range []string{"go", "python"} {
		t.Run(language, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			good := tripleFile(t, dir, nil)
			sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: language, Task: good})
			if len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict != "accepted" {
				t.Fatalf("good triple: %+v", sum.Cases)
			}
			if !strings.Contains(sum.Provider, "triple's reference solution") {
				t.Errorf("provider %q does not say it answered with the task's reference solution", sum.Provider)
			}
			bindsTask(t, sum, good)
			if language == "go" {
				liveFileChanged(t, sum, good)
			}

			badDir := t.TempDir()
			bad := tripleFile(t, badDir, wrongTriple)
			sum = runMatrix(t, Options{Formations: []string{"sequential"}, Language: language, Task: bad})
			if len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict == "accepted" {
				t.Fatalf("wrong triple accepted: %+v", sum.Cases)
			}
			st := checkStatus(sum.Cases[0])
			if st["oracle"] != statusFailed || st["tests"] != statusPassed || st["files"] != statusPassed {
				t.Fatalf("wrong triple: checks %v, want oracle failed and tests, files passed", st)
			}
			if reasons := strings.Join(sum.Cases[0].Verdict.Reasons, "; "); !strings.Contains(reasons, "oracle") {
				t.Fatalf("verdict reasons %q do not name the oracle", reasons)
			}
		})
	}
}

// bindsTask checks the case run's manifest names the task and the SHA-256 of the file's bytes, and
// that the run stored exactly those bytes.
func bindsTask(t *testing.T, sum Summary, path string) {
	t.Helper()
	want, err := tasks.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := evidence.Open(ctx, sum.StorePath, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	run, err := store.Run(ctx, sum.Cases[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := readManifest(ctx, store, run, &m); err != nil {
		t.Fatal(err)
	}
	if m.Task.Name != want.Name || m.Task.SHA256 != want.SHA256 || !m.Task.ReferenceSolution {
		t.Fatalf("manifest task %+v, want %s %s", m.Task, want.Name, want.SHA256)
	}
	got, err := recordedTask(ctx, store, run.RunID)
	if err != nil || got.SHA256 != want.SHA256 {
		t.Fatalf("recorded task: %v %v", got, err)
	}
}

// After the run, the task file on disk changes. A replay rebuilds the case from the run's recorded
// task bytes (its manifest digest is the run's), and a resume given the changed file is refused.
func liveFileChanged(t *testing.T, sum Summary, path string) {
	t.Helper()
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), "returns 3*x for ints", "returns three times x for ints", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := evidence.Open(ctx, sum.StorePath, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := PrepareReplay(ctx, store, runs, sum.Cases[0].RunID, ReplayAuthority{})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Envelope.ManifestDigest != rc.Run.Envelope.ManifestDigest || rc.c.Task.SHA256 == mustLoad(t, path).SHA256 {
		t.Fatalf("the replay did not rebuild the case from the recorded task (digest %s, run's %s)", rc.Envelope.ManifestDigest, rc.Run.Envelope.ManifestDigest)
	}
	_, err = Resume(ctx, Options{OutDir: sum.OutDir, Task: path}, sum.Cases[0].RunID)
	if !errors.Is(err, ErrNotResumable) || !errors.Is(err, ErrTaskMismatch) {
		t.Fatalf("resume with a changed task file: %v", err)
	}
}

func mustLoad(t *testing.T, path string) *tasks.Task {
	t.Helper()
	task, err := tasks.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A malformed task file is refused by Normalize naming file, field and problem, before anything is
// written.
func TestAMalformedTaskFileIsRefusedBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	bad := tripleFile(t, dir, func(s string) string { return strings.Replace(s, "    standard: [triple.go, triple_test.go]\n", "", 1) })
	out := filepath.Join(dir, "out")
	_, err := Run(context.Background(), Options{OutDir: out, Formations: []string{"sequential"}, Task: bad})
	var oe *OptionError
	if !errors.Is(err, ErrBadOptions) || !errors.As(err, &oe) || oe.Field != "Task" ||
		!strings.Contains(err.Error(), bad+": deliverables.go.standard: missing") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("output directory written: %v", err)
	}
}

// The checks take the task from the run's recorded bytes: a stored task file that does not hash to
// the manifest's SHA-256 is a mismatch, never silently used.
func TestTheRecordedTaskMustHashToTheManifest(t *testing.T) {
	double, _ := tasks.Builtin("double")
	run := evidence.RunSummary{RunID: "run-x"}
	_, err := taskOfRun(context.Background(), nil, run, manifest{Task: taskManifest{Name: "double", SHA256: double.SHA256}})
	if !errors.Is(err, ErrTaskMismatch) {
		t.Fatalf("no stored task file: %v", err)
	}
	if err := sameTask(tripleFile(t, t.TempDir(), nil), double); !errors.Is(err, ErrTaskMismatch) {
		t.Fatalf("another task for a resume: %v", err)
	}
	if err := sameTask("double", double); err != nil {
		t.Fatalf("the same task: %v", err)
	}
}

// Without the run's recorded task the tests and oracle checks cannot know what to run: unknown,
// never passed.
func TestChecksWithoutTheRecordedTaskAreUnknown(t *testing.T) {
	s := &caseState{language: "go", profile: "standard", taskErr: ErrTaskMismatch}
	for _, c := range []Check{oracleCheck, independentTests} {
		status, detail, _ := c.run(context.Background(), s)
		if status != statusUnknown || !strings.Contains(detail, "recorded task file") {
			t.Errorf("%s: %s %q, want unknown naming the recorded task file", c.Name, status, detail)
		}
	}
}
