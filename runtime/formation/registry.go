// Package formation holds the team formations, one file each, and the one registry the coordinator
// dispatches through. Contracts: ../shared/FORMATIONS.md.
package formation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime"
)

// Formation is a descriptor: adding a formation is adding one value to the registry, with its test.
type Formation struct {
	// Name is the canonical formation name (DESIGN.md vocabulary).
	Name string
	// Doc is a one-paragraph statement of the formation's contract.
	Doc string
	// Durable says whether the formation supports durable pause/resume; one that does not refuses a
	// resume request before executing anything.
	Durable bool
	// Run executes the team. It returns an error only when the team could not run at all (invalid
	// configuration, recording failure); member failures are reported in the TeamResult.
	Run func(ctx context.Context, e *runtime.Engine, team runtime.Team) (runtime.TeamResult, error)
}

// ErrUnknownFormation is returned for a formation name not in the registry.
var ErrUnknownFormation = errors.New("unknown formation")

// ErrNotDurable is returned when a resume is requested for a formation that cannot resume durably.
var ErrNotDurable = errors.New("formation does not support durable resume")

// Registry returns every registered formation, sorted by name. The slice is new on every call.
func Registry() []Formation {
	r := []Formation{sequential, parallel}
	sort.Slice(r, func(i, j int) bool { return r[i].Name < r[j].Name })
	return r
}

// Names returns the registered formation names, sorted.
func Names() []string {
	var n []string
	for _, f := range Registry() {
		n = append(n, f.Name)
	}
	return n
}

// Lookup returns the formation with the given name, or ErrUnknownFormation naming the known ones.
func Lookup(name string) (Formation, error) {
	for _, f := range Registry() {
		if f.Name == name {
			return f, nil
		}
	}
	return Formation{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownFormation, name, strings.Join(Names(), ", "))
}

// Run is the coordinator: it validates the team, dispatches through the registry, and emits
// team_started and team_completed around the formation's run.
func Run(ctx context.Context, e *runtime.Engine, team runtime.Team) (runtime.TeamResult, error) {
	f, err := Lookup(team.Formation)
	if err != nil {
		return runtime.TeamResult{}, err
	}
	if err := team.Validate(); err != nil {
		return runtime.TeamResult{}, err
	}
	ids := make([]string, len(team.Members))
	for i, m := range team.Members {
		ids[i] = m.ID
	}
	if err := e.Emit(ctx, "team_started", "", "", map[string]any{"formation": f.Name, "members": ids, "durable": f.Durable}); err != nil {
		return runtime.TeamResult{}, fmt.Errorf("record team_started: %w", err)
	}
	res, err := f.Run(ctx, e, team)
	if err != nil {
		return res, err
	}
	res.Formation = f.Name
	var failed []string
	for _, m := range res.Members {
		if !m.Success {
			failed = append(failed, m.MemberID)
		}
	}
	if err := e.Emit(ctx, "team_completed", "", "", map[string]any{"formation": f.Name, "success": res.Success,
		"failed_members": failed}); err != nil {
		return res, fmt.Errorf("record team_completed: %w", err)
	}
	return res, nil
}

// failedSummary is the deterministic failed-member summary: failed member ids in id order with
// their errors, or "" when every member succeeded.
func failedSummary(results []runtime.MemberResult) string {
	var lines []string
	for _, r := range results {
		if !r.Success {
			lines = append(lines, fmt.Sprintf("- %s: %s", r.MemberID, r.Error))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Sort(lines)
	return "failed members:\n" + strings.Join(lines, "\n")
}
