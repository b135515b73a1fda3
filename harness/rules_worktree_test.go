package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// A runtime variant (or a tampered worktree) for each worktree rule, on the parallel+worktrees
// case: each is rejected by the formation check naming the rule.
func TestWorktreeVariantsAreRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the parallel+worktrees case five times; skipped with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	artifact := deliverables(t, caseLanguage(t))[0] // double.go or double.py, as runHooked runs the case
	// removed is, per variant, the path of exec-3's worktree as the runtime recorded it.
	type variant struct {
		name string
		h    func(removed *string) *testHooks
		want []string
	}
	variants := []variant{
		{"no isolation", func(*string) *testHooks {
			return &testHooks{options: func(o *formation.Options) { o.Isolation = formation.IsolationOptions{} }}
		}, []string{"worktrees: the runtime recorded isolation", "exec-1 recorded 0 worktree_allocated events"}},
		{"one worktree claimed for two members", func(*string) *testHooks {
			return only(rewrite(func(p *event.WorktreeAllocated) {
				p.Path = strings.Replace(p.Path, "exec-2", "exec-1", 1)
			}))
		}, []string{"worktrees: exec-1 and exec-2 were both allocated worktree", "exec-2 was allocated"}},
		{"default session ids", func(*string) *testHooks {
			return only(func(ev runtime.Event) runtime.Event {
				if ev.MemberID == "exec-2" && strings.Contains(ev.SessionID, ":") {
					ev.SessionID = strings.Replace(ev.SessionID, ":parallel:", "-", 1)
				}
				return ev
			})
		}, []string{"worktrees: exec-2's", "its worktree session is"}},
		{"a worktree git does not list", func(removed *string) *testHooks {
			return &testHooks{afterTeam: func(ctx context.Context, _ string) {
				// The worktree is unregistered from the repository; its files stay where they are.
				out, err := exec.CommandContext(ctx, "git", "-C", *removed, "rev-parse", "--git-common-dir").Output()
				if err != nil {
					t.Errorf("git rev-parse: %v", err)
					return
				}
				common := strings.TrimSpace(string(out))
				if !filepath.IsAbs(common) {
					common = filepath.Join(*removed, common)
				}
				if err := os.RemoveAll(filepath.Join(common, "worktrees", filepath.Base(*removed))); err != nil {
					t.Error(err)
				}
			}}
		}, []string{"worktrees: exec-3's worktree", "is not a worktree of"}},
		{"files written outside the member's worktree", func(removed *string) *testHooks {
			return &testHooks{afterTeam: func(ctx context.Context, _ string) {
				other := strings.Replace(*removed, "exec-3", "exec-2", 1)
				if err := os.Rename(filepath.Join(*removed, artifact), filepath.Join(other, "3"+artifact)); err != nil {
					t.Error(err)
				}
			}}
		}, []string{"worktrees: exec-3's " + artifact + " is not a new file of its worktree"}},
	}
	// The variants are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	for _, v := range variants {
		removed := new(string)
		h := v.h(removed)
		h.event = chain(func(ev runtime.Event) runtime.Event {
			if ev.Type == event.TypeWorktreeAllocated && ev.MemberID == "exec-3" {
				p, err := event.Decode[event.WorktreeAllocated](ev.Type, ev.Payload)
				if err == nil {
					*removed = p.Path
				}
			}
			return ev
		}, orIdentity(h.event))
		hooks = append(hooks, h)
	}
	got := runHookedRepeats(t, "parallel+worktrees", nil, hooks...)
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) { mustFail(t, got[i], "formation", v.want...) })
	}
}

func orIdentity(h func(runtime.Event) runtime.Event) func(runtime.Event) runtime.Event {
	if h == nil {
		return func(ev runtime.Event) runtime.Event { return ev }
	}
	return h
}
