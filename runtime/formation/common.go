package formation

import (
	"fmt"
	"strings"

	"github.com/assay-audit/assay/runtime"
)

// completion is the completion contract for m, asking for quality_score when the run needs it.
func completion(team runtime.Team, m runtime.MemberSpec, opts Options) *runtime.Contract {
	c := runtime.Completion(team.Formation, m.ID, opts.scoreCompletions)
	return &c
}

// withRole returns the members with formation role role, in configuration order.
func withRole(team runtime.Team, role string) []runtime.MemberSpec {
	var out []runtime.MemberSpec
	for _, m := range team.Members {
		if m.FormationRole == role {
			out = append(out, m)
		}
	}
	return out
}

// without returns the members whose id is not in ids, in configuration order.
func without(members []runtime.MemberSpec, ids ...string) []runtime.MemberSpec {
	var out []runtime.MemberSpec
	for _, m := range members {
		skip := false
		for _, id := range ids {
			if m.ID == id {
				skip = true
			}
		}
		if !skip {
			out = append(out, m)
		}
	}
	return out
}

func memberIDs(members []runtime.MemberSpec) []string {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	return ids
}

// oneWithRole returns the single member with role, or fallback (by index into team.Members, -1 for
// none) when none has it; two members with the role is a configuration error.
func oneWithRole(team runtime.Team, role string, fallback int) (runtime.MemberSpec, bool, error) {
	ms := withRole(team, role)
	switch {
	case len(ms) > 1:
		return runtime.MemberSpec{}, false, fmt.Errorf("%w: %s: %d members have formation role %s (%s); at most one may",
			ErrInvalidConfig, team.Formation, len(ms), role, strings.Join(memberIDs(ms), ", "))
	case len(ms) == 1:
		return ms[0], true, nil
	case fallback >= 0 && fallback < len(team.Members):
		return team.Members[fallback], true, nil
	}
	return runtime.MemberSpec{}, false, nil
}

// disjointWriters refuses members that implement (may hold write tools) sharing a working
// directory: they would run concurrently and shared paths race.
func disjointWriters(formation string, members []runtime.MemberSpec) error {
	dirs := map[string]string{}
	for _, m := range members {
		if !implements(m) {
			continue
		}
		if other, ok := dirs[m.Dir]; ok {
			return fmt.Errorf("%w: %s: members %q and %q share working directory %s; give each member its own (shared paths race)",
				ErrInvalidConfig, formation, other, m.ID, m.Dir)
		}
		dirs[m.Dir] = m.ID
	}
	return nil
}

// results accumulates member results across invocations, reported in configuration order.
type results struct {
	team runtime.Team
	byID map[string]*runtime.MemberResult
}

func newResults(team runtime.Team) *results {
	return &results{team: team, byID: map[string]*runtime.MemberResult{}}
}

// add folds an invocation's result into its member's.
func (r *results) add(res runtime.MemberResult) {
	cur, ok := r.byID[res.MemberID]
	if !ok {
		c := res
		r.byID[res.MemberID] = &c
		return
	}
	cur.Accumulate(res)
}

// get returns the member's accumulated result.
func (r *results) get(id string) (runtime.MemberResult, bool) {
	cur, ok := r.byID[id]
	if !ok {
		return runtime.MemberResult{}, false
	}
	return *cur, true
}

// markFailed records a formation-level failure of a member's last invocation (e.g. a reply that
// was well-formed but broke a rule only the formation can check).
func (r *results) markFailed(id, reason string) {
	if cur, ok := r.byID[id]; ok {
		cur.Success, cur.Error = false, reason
	}
}

// setMeta sets a metadata key on a member's result.
func (r *results) setMeta(id, key, value string) {
	if cur, ok := r.byID[id]; ok {
		if cur.Metadata == nil {
			cur.Metadata = map[string]string{}
		}
		cur.Metadata[key] = value
	}
}

// list returns the results of members that ran, in configuration order.
func (r *results) list() []runtime.MemberResult {
	var out []runtime.MemberResult
	for _, m := range r.team.Members {
		if cur, ok := r.byID[m.ID]; ok {
			out = append(out, *cur)
		}
	}
	return out
}

// allSucceeded reports whether every member that ran succeeded.
func allSucceeded(rs []runtime.MemberResult) bool {
	for _, r := range rs {
		if !r.Success {
			return false
		}
	}
	return true
}

// outcomeLine is how a member's outcome is shown to other members: "[id] output" or
// "[id] failed: error".
func outcomeLine(r runtime.MemberResult) string {
	if r.Success {
		return fmt.Sprintf("[%s] %s", r.MemberID, r.Output)
	}
	return fmt.Sprintf("[%s] failed: %s", r.MemberID, r.Error)
}

// done builds the team result from the collected member results: success only when ok and every
// member that ran succeeded; the output carries the failed-member summary.
func done(r *results, ok bool, output string, meta map[string]string) runtime.TeamResult {
	list := r.list()
	return runtime.TeamResult{Success: ok && allSucceeded(list), FinalOutput: withSummary(output, list), Members: list, Metadata: meta}
}
