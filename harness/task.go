package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/tasks"
)

// TaskArtifact is the name the task file's bytes are stored under in each case run: what the tests
// and oracle checks, a resume and a replay re-derive the task from.
const TaskArtifact = "task.yaml"

// taskManifest is the task a case runs, as its manifest binds it: the task's name and the SHA-256
// of the task file's bytes (so the manifest digest binds the file exactly). ReferenceSolution says
// that the embedded reference provider answers the case with the task file's reference_solution
// (it is not a model).
type taskManifest struct {
	Name              string `json:"name"`
	SHA256            string `json:"sha256"`
	ReferenceSolution bool   `json:"reference_solution,omitempty"`
}

// ErrTaskMismatch: the recorded task file is missing, or its bytes do not hash to the SHA-256 the
// case manifest binds, or a task given for a resume or replay is another file than the run's.
var ErrTaskMismatch = errors.New("task file does not match the case's manifest")

// loadTask resolves Options.Task (a built-in name or a task file's path; "" is tasks.Default).
func loadTask(nameOrPath string) (*tasks.Task, error) { return tasks.Load(nameOrPath) }

// solutions are the reference solutions of task for the embedded reference provider: one per
// language and profile.
func solutions(task *tasks.Task) []reference.Solution {
	var out []reference.Solution
	for _, lang := range tasks.Languages {
		for _, prof := range tasks.Profiles {
			if files := task.Solution(lang, prof); len(files) > 0 {
				out = append(out, reference.Solution{Task: task.Name, Language: lang, Files: files})
			}
		}
	}
	return out
}

// putTask stores the task file's bytes as run runID's TaskArtifact.
func putTask(ctx context.Context, store *evidence.Store, runID string, task *tasks.Task) error {
	if _, err := store.PutArtifact(ctx, runID, TaskArtifact, "application/yaml", task.Bytes); err != nil {
		return fmt.Errorf("run %s: store task file: %w", runID, err)
	}
	return nil
}

// recordedTask re-derives run runID's task from the bytes it recorded: its TaskArtifact, which must
// hash to the SHA-256 its stored manifest binds, parsed again. Errors: ErrTaskMismatch (wrapped)
// for a run without a task artifact, a manifest that binds none, or bytes that hash otherwise; the
// parse error of bytes that no longer parse; the store's errors.
func recordedTask(ctx context.Context, store *evidence.Store, runID string) (*tasks.Task, error) {
	run, err := store.Run(ctx, runID)
	if err != nil {
		return nil, err
	}
	var m manifest
	if err := readManifest(ctx, store, run, &m); err != nil {
		return nil, err
	}
	return taskOfRun(ctx, store, run, m)
}

// taskOfRun is recordedTask for a run and its manifest already read. A manifest that binds no task
// (written before task files) is the built-in default, the only task there was.
func taskOfRun(ctx context.Context, store *evidence.Store, run evidence.RunSummary, m manifest) (*tasks.Task, error) {
	if m.Task.SHA256 == "" {
		return tasks.Builtin(tasks.Default)
	}
	for _, a := range run.Artifacts {
		if a.Name != TaskArtifact {
			continue
		}
		b, err := store.Artifact(ctx, a.Digest)
		if err != nil {
			return nil, fmt.Errorf("run %s: its task file: %w", run.RunID, err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != m.Task.SHA256 {
			return nil, fmt.Errorf("%w: run %s: its stored task file has sha256 %s, its manifest binds %s", ErrTaskMismatch, run.RunID, got, m.Task.SHA256)
		}
		t, err := tasks.Parse("run "+run.RunID+" "+TaskArtifact, b)
		if err != nil {
			return nil, err
		}
		if t.Name != m.Task.Name {
			return nil, fmt.Errorf("%w: run %s: its stored task file is task %q, its manifest names %q", ErrTaskMismatch, run.RunID, t.Name, m.Task.Name)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%w: run %s stored no %s (its manifest binds task %s, sha256 %s)", ErrTaskMismatch, run.RunID, TaskArtifact, m.Task.Name, m.Task.SHA256)
}

// sameTask refuses a task the operator gave for a resume or replay (Options.Task) that is not the
// run's recorded one: the run is re-applied with its own task or not at all.
func sameTask(given string, recorded *tasks.Task) error {
	if given == "" {
		return nil
	}
	t, err := loadTask(given)
	if err != nil {
		return err
	}
	if t.SHA256 != recorded.SHA256 {
		return fmt.Errorf("%w: the given task %s (%s, sha256 %s) is not the run's (%s, sha256 %s)", ErrTaskMismatch, given, t.Name, t.SHA256, recorded.Name, recorded.SHA256)
	}
	return nil
}
