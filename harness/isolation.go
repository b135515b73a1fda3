package harness

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assay-audit/assay/harness/gateway"
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

// pythonIgnore is the .gitignore of a Python case repository.
const pythonIgnore = "__pycache__/\n.pytest_cache/\n"

// makeCaseRepo makes the case's repository with one commit: go.mod for Go (goModule, the task's
// module file the scaffold gives each Go member), a .gitignore for Python. It fails when git is not installed.
func makeCaseRepo(ctx context.Context, caseDir, language, goModule string) error {
	repo := filepath.Join(caseDir, isolationRepo)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return err
	}
	name, body := ".gitignore", pythonIgnore
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
func isolate(p *memberPlan, caseDir, runID, formationName string) {
	spec := &p.Spec
	if abs, err := filepath.Abs(caseDir); err == nil {
		caseDir = abs
	}
	p.Repo = filepath.Join(caseDir, isolationRepo)
	spec.Dir = worktreePath(caseDir, runID, spec.ID)
	spec.SessionID = formation.WorktreeSessionID(runtime.Team{RunID: runID, Formation: formationName}, spec.ID)
}

// teamRecords returns the gateway's records of team run runID's member sessions, in record id
// order: sessions "{run}-{member}" and the worktree sessions "{run}:{formation}:{member}".
func teamRecords(ctx context.Context, gw *gateway.Gateway, runID string) ([]gateway.Record, error) {
	var out []gateway.Record
	for _, sep := range []string{"-", ":"} {
		recs, err := gw.Records(ctx, runID+sep, true)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	slices.SortFunc(out, func(a, b gateway.Record) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// worktreeScaffold reports whether a file an isolated member's worktree holds without a recorded
// call is git's or the case repository's: the worktree's .git file pointing into the case
// repository's .git/worktrees, or the Python scaffold's .gitignore byte for byte (the Go go.mod
// is every Go member's scaffold).
func worktreeScaffold(pl memberPlan, rel string, data []byte) bool {
	if pl.Repo == "" {
		return false
	}
	switch rel {
	case ".git":
		dir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
		return ok && !strings.Contains(dir, "\n") && filepath.Dir(dir) == filepath.Join(pl.Repo, ".git", "worktrees")
	case ".gitignore":
		return string(data) == pythonIgnore
	}
	return false
}

// worktreeSession reports whether sid is member's worktree session id in a case with worktree
// isolation: {run}:{formation}:{member}, for an implementing member of the case.
func (s *caseState) worktreeSession(member, sid string) bool {
	if !s.entry.Options().Isolation.Enabled {
		return false
	}
	for _, p := range s.plans {
		if p.Spec.ID == member && p.Repo != "" {
			return sid == formation.WorktreeSessionID(runtime.Team{RunID: s.team.RunID, Formation: s.entry.Formation}, member)
		}
	}
	return false
}

// CaseDirOf returns the case directory of a member directory as member_started records it:
// its parent, or for a member in its own worktree (cases/<run>/worktrees/<run>-<member>) the
// worktrees directory's parent.
func CaseDirOf(memberDir string) string {
	d := filepath.Dir(memberDir)
	if filepath.Base(d) == isolationWorktrees {
		return filepath.Dir(d)
	}
	return d
}
