package formation

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var parallel = Formation{
	Name: "parallel",
	Doc: "All members run concurrently with independent contexts and must be given disjoint working " +
		"directories (or isolated git worktrees). Per-member outcomes stay in member results; when any " +
		"member fails the final output carries a deterministic failed-member summary ordered by member " +
		"id; with every member successful the output is the members' outputs in configuration order. " +
		"parallel_member_retries (0..3) retries only failed idempotent members, accumulating attempts, " +
		"tool calls and durations. Capacity admission and ensemble modes (vote, judge, synthesizer) apply.",
	Durable: true,
	Options: append(parallelOptions(), ensembleOptions()...),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		if opts.Ensemble.Mode != "" {
			if _, _, err := ensembleRoles(team, opts.Ensemble.Mode); err != nil {
				return err
			}
		} else {
			for _, m := range team.Members {
				if m.FormationRole != "" && m.FormationRole != RoleCandidate {
					return fmt.Errorf("%w: parallel: member %q has formation role %q; parallel members have none (use an ensemble mode for judges and synthesizers)",
						ErrInvalidConfig, m.ID, m.FormationRole)
				}
			}
		}
		if opts.Isolation.Enabled {
			return nil // every member gets its own worktree
		}
		return disjointWriters("parallel", team.Members)
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		candidates := team.Members
		var aggregator *runtime.MemberSpec
		if opts.Ensemble.Mode != "" {
			var err error
			if candidates, aggregator, err = ensembleRoles(team, opts.Ensemble.Mode); err != nil {
				return runtime.TeamResult{}, err
			}
		}
		var worktrees map[string]string
		if opts.Isolation.Enabled {
			var err error
			worktrees, err = allocateWorktrees(ctx, e, team, candidates, opts.Isolation)
			if err != nil {
				return runtime.TeamResult{}, err
			}
			// The caller's member slice is not touched: this run's members get the worktrees, and
			// the worktree session format unless their session is bound explicitly.
			isolate := func(m *runtime.MemberSpec) {
				if p, ok := worktrees[m.ID]; ok {
					m.Dir = p
					if m.SessionID == "" {
						m.SessionID = WorktreeSessionID(team, m.ID)
					}
				}
			}
			team.Members = slices.Clone(team.Members)
			for i := range team.Members {
				isolate(&team.Members[i])
			}
			candidates = slices.Clone(candidates)
			for i := range candidates {
				isolate(&candidates[i])
			}
			if opts.Isolation.Cleanup {
				defer removeWorktrees(e, opts.Isolation.Repo, worktrees)
			}
		}
		rs := newResults(team)
		invoke := func(m runtime.MemberSpec) runtime.MemberResult {
			c := completion(team, m, opts)
			if opts.Ensemble.Mode != "" {
				ec := ensembleContract(team.Formation, m, 0, answerLimit(opts))
				c = &ec
			}
			return e.RunTurn(ctx, team, m, runtime.Turn{Contract: c})
		}
		for _, r := range opts.admission.run(ctx, e, team, candidates, invoke) {
			rs.add(r)
		}
		for attempt := 1; attempt <= opts.Parallel.MemberRetries; attempt++ {
			var retry []runtime.MemberSpec
			for _, m := range candidates {
				r, _ := rs.get(m.ID)
				if r.Success || r.Paused {
					continue // a paused member is never retried: it resumes
				}
				if !m.Idempotent {
					if attempt == 1 {
						_ = e.Emit(ctx, m.ID, team.SessionID(m), event.Warning{
							Warning: "member " + m.ID + " failed and is not retried: its task is not declared idempotent"})
					}
					continue
				}
				retry = append(retry, m)
			}
			if len(retry) == 0 {
				break
			}
			for _, r := range opts.admission.run(ctx, e, team, retry, invoke) {
				rs.add(r)
			}
		}
		for _, m := range candidates {
			r, _ := rs.get(m.ID)
			rs.setMeta(m.ID, "attempts", fmt.Sprint(r.Turns))
			if p, ok := worktrees[m.ID]; ok {
				rs.setMeta(m.ID, "worktree", p)
			}
		}
		if opts.Ensemble.Mode != "" {
			ok, output, meta := aggregate(ctx, e, team, opts, rs, candidates, aggregator)
			return done(rs, ok, output, meta), nil
		}
		var outputs []string
		for _, r := range rs.list() {
			if r.Success {
				outputs = append(outputs, r.Output)
			}
		}
		return done(rs, true, strings.Join(outputs, "\n"), nil), nil
	},
}

// allocateWorktrees creates one detached git worktree per member at the repository's HEAD. The
// first failure stops the run; worktrees already created are kept (and named in the error) for
// inspection.
func allocateWorktrees(ctx context.Context, e *runtime.Engine, team runtime.Team, members []runtime.MemberSpec, iso IsolationOptions) (map[string]string, error) {
	base := iso.Dir
	if base == "" {
		base = strings.TrimRight(iso.Repo, string(filepath.Separator)) + ".worktrees"
	}
	out := map[string]string{}
	for _, m := range members {
		path, err := filepath.Abs(filepath.Join(base, team.RunID+"-"+m.ID))
		if err != nil {
			return out, fmt.Errorf("worktree for %s: %w", m.ID, err)
		}
		cmd := exec.CommandContext(ctx, "git", "-C", iso.Repo, "worktree", "add", "--detach", path, "HEAD")
		if msg, err := cmd.CombinedOutput(); err != nil {
			var kept []string
			for id, p := range out {
				kept = append(kept, id+"="+p)
			}
			return out, fmt.Errorf("allocate worktree for member %s at %s: %v: %s (kept for inspection: %s)",
				m.ID, path, err, strings.TrimSpace(string(msg)), strings.Join(kept, ", "))
		}
		out[m.ID] = path
		if err := e.Emit(ctx, m.ID, team.SessionID(m), event.WorktreeAllocated{Path: path, Repo: iso.Repo}); err != nil {
			return out, fmt.Errorf("record worktree_allocated: %w", err)
		}
	}
	return out, nil
}

// removeWorktrees removes the worktrees (cleanup asked for); failures are warnings.
func removeWorktrees(e *runtime.Engine, repo string, worktrees map[string]string) {
	for id, p := range worktrees {
		if msg, err := exec.Command("git", "-C", repo, "worktree", "remove", "--force", p).CombinedOutput(); err != nil {
			_ = e.Emit(context.Background(), id, "", event.Warning{Warning: fmt.Sprintf("remove worktree %s: %v: %s", p, err, strings.TrimSpace(string(msg)))})
		}
	}
}

// WorktreeSessionID is the session id of a member working in its own worktree (the seed's colon
// format, "{parent}:{team}:{member}"): the team run's id, the formation, the member id; for
// example "run-1:parallel:exec-1". An explicit MemberSpec.SessionID takes precedence.
func WorktreeSessionID(team runtime.Team, memberID string) string {
	return team.RunID + ":" + team.Formation + ":" + memberID
}
