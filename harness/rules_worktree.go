package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// worktreeEvidence re-derives worktree isolation of a parallel team from the configured options,
// the recorded events and git's own account of the repository, and returns the problems, each
// naming the rule ("worktrees: ..."):
//
//   - the team_started options record isolation of the case's repository;
//   - every member recorded exactly one worktree_allocated, of the case's repository, at the path
//     the harness derives for it (worktrees/<run>-<member> in the case directory), and no two
//     members share one;
//   - `git worktree list --porcelain` on the repository lists each such path as a worktree of it,
//     detached (nothing is merged back);
//   - every event of the member is under the worktree session id {run}:{formation}:{member};
//   - the member's deliverables are in its own worktree — git status there lists each as a new
//     file — and it has no directory outside it; the files, tests and oracle checks read them from
//     there (the member's directory is its worktree, so a file it did not write there is theirs).
func (d *derivation) worktreeEvidence(ids []string) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, "worktrees: "+fmt.Sprintf(format, args...))
	}
	iso := d.opts.Isolation
	if starts, at, err := claims[event.TeamStarted](d); err != nil {
		bad("team_started: %v", err)
	} else if len(starts) == 1 {
		got, _ := starts[0].Options["isolation"].(map[string]any)
		if got == nil || got["repo"] != iso.Repo || got["cleanup"] != false {
			bad("the runtime recorded isolation %v (team_started, %s), the case configured the kept worktrees of %s", starts[0].Options["isolation"], d.at(at[0]), iso.Repo)
		}
	}
	listed, err := gitWorktrees(context.Background(), iso.Repo)
	if err != nil {
		bad("%v", err)
	}
	allocs, at, err := claims[event.WorktreeAllocated](d)
	if err != nil {
		bad("worktree_allocated: %v", err)
		return problems
	}
	byMember := map[string][]event.WorktreeAllocated{}
	owner := map[string]string{}
	for i, a := range allocs {
		m := d.eventMember(at[i])
		byMember[m] = append(byMember[m], a)
		if o, ok := owner[a.Path]; ok && o != m {
			bad("%s and %s were both allocated worktree %s", o, m, a.Path)
		}
		owner[a.Path] = m
	}
	runID := d.s.team.RunID
	var paths []string
	for _, id := range ids {
		want := worktreePath(d.s.caseDir, runID, id)
		got := byMember[id]
		delete(byMember, id)
		switch {
		case len(got) != 1:
			bad("%s recorded %d worktree_allocated events, want 1", id, len(got))
			continue
		case got[0].Path != want:
			bad("%s was allocated %s, the case's worktree for it is %s", id, got[0].Path, want)
			continue
		case got[0].Repo != iso.Repo:
			bad("%s's worktree is recorded of repository %s, the case's is %s", id, got[0].Repo, iso.Repo)
		}
		paths = append(paths, want)
		if listed != nil {
			w, ok := listed[canonicalPath(want)]
			switch {
			case !ok:
				bad("%s's worktree %s is not a worktree of %s (git worktree list --porcelain does not list it)", id, want, iso.Repo)
			case !w.detached:
				bad("%s's worktree %s is on a branch (%s), not detached", id, want, w.branch)
			}
		}
		if m, ok := d.member(id); !ok || m.Dir != want {
			bad("%s's directory (where the files check reads its deliverables) is %s, not its worktree %s", id, m.Dir, want)
		}
		wantSession := formation.WorktreeSessionID(runtime.Team{RunID: runID, Formation: d.formation}, id)
		for _, ev := range d.t.events {
			if ev.RunID == d.t.runs[len(d.t.runs)-1] && ev.MemberID == id && ev.SessionID != wantSession {
				bad("%s's %s (run %s event %d) is under session %q, its worktree session is %q", id, ev.Type, ev.RunID, ev.Seq, ev.SessionID, wantSession)
				break
			}
		}
	}
	for m, got := range byMember {
		bad("%d worktree_allocated event(s) for %q, which is not a member of the team", len(got), m)
	}
	// Each member's deliverables are new files of its own worktree (a file elsewhere is the files
	// check's: no recorded call of that member produced it).
	for i, id := range ids {
		if i >= len(paths) || len(problems) > 0 {
			break
		}
		p, _ := d.planOf(id)
		status, err := gitStatus(context.Background(), paths[i])
		if err != nil {
			bad("%v", err)
			continue
		}
		for _, f := range p.Deliverables {
			if !slices.Contains(status, filepath.ToSlash(f)) {
				bad("%s's %s is not a new file of its worktree %s (git status does not list it)", id, f, paths[i])
			}
		}
		if _, err := os.Stat(filepath.Join(d.s.caseDir, id)); err == nil {
			bad("%s has a directory outside its worktree (%s)", id, filepath.Join(d.s.caseDir, id))
		}
	}
	if len(problems) == 0 {
		d.worktreeDetail = fmt.Sprintf("; worktrees: %d distinct detached worktrees of %s (git worktree list), each member's files new in its own (git status), sessions %s",
			len(paths), iso.Repo, formation.WorktreeSessionID(runtime.Team{RunID: runID, Formation: d.formation}, "<member>"))
	}
	return problems
}

// planOf is the case plan of member id.
func (d *derivation) planOf(id string) (memberPlan, bool) {
	for _, p := range d.s.plans {
		if p.Spec.ID == id {
			return p, true
		}
	}
	return memberPlan{}, false
}

// eventMember is the member of the event at p.
func (d *derivation) eventMember(p pos) string {
	run := d.t.runs[p.run]
	for _, ev := range d.t.events {
		if ev.RunID == run && ev.Seq == p.seq {
			return ev.MemberID
		}
	}
	return ""
}

// gitWorktree is one entry of `git worktree list --porcelain`.
type gitWorktree struct {
	detached bool
	branch   string
}

// gitWorktrees runs `git worktree list --porcelain` in repo and returns its worktrees by canonical
// path (the main worktree included).
func gitWorktrees(ctx context.Context, repo string) (map[string]gitWorktree, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", repo, "worktree", "list", "--porcelain").Output()
	if err != nil {
		return nil, fmt.Errorf("git worktree list --porcelain in %s: %v", repo, err)
	}
	list := map[string]gitWorktree{}
	var path string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "worktree "):
			path = canonicalPath(strings.TrimPrefix(line, "worktree "))
			list[path] = gitWorktree{}
		case line == "detached":
			w := list[path]
			w.detached = true
			list[path] = w
		case strings.HasPrefix(line, "branch "):
			w := list[path]
			w.branch = strings.TrimPrefix(line, "branch ")
			list[path] = w
		}
	}
	return list, nil
}

// gitStatus lists the paths `git status --porcelain --untracked-files=all` reports in worktree dir
// (slash-separated, relative to it).
func gitStatus(ctx context.Context, dir string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		return nil, fmt.Errorf("git status in %s: %v", dir, err)
	}
	var paths []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if len(line) > 3 {
			paths = append(paths, strings.TrimSpace(line[3:]))
		}
	}
	return paths, nil
}

// canonicalPath resolves symbolic links where it can, so git's paths and the harness's compare.
func canonicalPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
