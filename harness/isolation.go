package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// A case with worktree isolation (formation.IsolationOptions.Enabled) works in a git repository
// the harness makes in its case directory, cases/<run>/repo, with one commit (the Go scaffold
// go.mod, or a .gitignore for Python); the runtime adds each member's worktree under
// cases/<run>/worktrees/<run>-<member>, detached at that commit, and they are kept for inspection.
const (
	isolationRepo      = "repo"
	isolationWorktrees = "worktrees"
)

// caseOptions returns the formation options of entry e for a case in caseDir: the entry's, with
// worktree isolation's repository and worktree directory set to the case directory's (absolute).
func caseOptions(e CatalogEntry, caseDir string) formation.Options {
	o := e.Options()
	if o.Isolation.Enabled {
		if abs, err := filepath.Abs(caseDir); err == nil {
			caseDir = abs
		}
		o.Isolation.Repo = filepath.Join(caseDir, isolationRepo)
		o.Isolation.Dir = filepath.Join(caseDir, isolationWorktrees)
	}
	return o
}

// manifestOptions is what the manifest records of the options: the summary, with the isolation
// repository named relative to the case directory (where it is is a per-run location, not part of
// what defines the case).
func manifestOptions(o formation.Options) map[string]any {
	if o.Isolation.Enabled {
		o.Isolation.Repo = isolationRepo
	}
	return o.Summary()
}

// worktreePath is where the runtime puts member id's worktree of a case in caseDir whose team run
// is runID (formation.IsolationOptions: Dir/<run>-<member>).
func worktreePath(caseDir, runID, id string) string {
	if abs, err := filepath.Abs(caseDir); err == nil {
		caseDir = abs
	}
	return filepath.Join(caseDir, isolationWorktrees, runID+"-"+id)
}

// makeCaseRepo makes the case's repository with one commit: go.mod for Go (what the scaffold
// gives each Go member), a .gitignore for Python. It fails when git is not installed.
func makeCaseRepo(ctx context.Context, caseDir, language string) error {
	repo := filepath.Join(caseDir, isolationRepo)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return err
	}
	name, body := ".gitignore", "__pycache__/\n.pytest_cache/\n"
	if language == reference.LanguageGo {
		name, body = "go.mod", goModule
	}
	if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", name},
		{"-c", "user.name=assay", "-c", "user.email=assay@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "assay case scaffold"}} {
		if out, err := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("case repository %s: git %s: %v: %s", repo, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// isolate gives an implementing member of an isolated case its worktree as directory and the
// worktree session id (formation.WorktreeSessionID), as the runtime will.
func isolate(spec *runtime.MemberSpec, caseDir, runID, formationName string) {
	spec.Dir = worktreePath(caseDir, runID, spec.ID)
	spec.SessionID = formation.WorktreeSessionID(runtime.Team{RunID: runID, Formation: formationName}, spec.ID)
}
