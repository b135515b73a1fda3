package indexer

import (
	"context"
	"os/exec"
	"strings"
)

// vcsState is the git state of the directory being indexed. revision is ""
// when it is unknown, and then dirty carries no information.
type vcsState struct {
	revision string
	dirty    bool
}

// readVCS asks git for HEAD and for uncommitted changes in dir. Any failure
// (git absent, not a checkout, no commit yet, status failing) yields the
// unknown state rather than a partial one: a revision is reported only when
// its dirty flag is known too. Dirty covers the whole work tree, tracked and
// untracked files, because a module can use sources outside its directory
// (replace directives).
func readVCS(ctx context.Context, dir string) vcsState {
	git, err := exec.LookPath("git")
	if err != nil {
		return vcsState{}
	}
	rev, err := exec.CommandContext(ctx, git, "-C", dir, "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		return vcsState{}
	}
	status, err := exec.CommandContext(ctx, git, "-C", dir, "status", "--porcelain", "--untracked-files=normal").Output()
	if err != nil {
		return vcsState{}
	}
	return vcsState{
		revision: strings.TrimSpace(string(rev)),
		dirty:    len(strings.TrimSpace(string(status))) > 0,
	}
}
