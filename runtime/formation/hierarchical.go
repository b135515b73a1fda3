package formation

import (
	"context"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/runtime"
)

var hierarchical = Formation{
	Name: "hierarchical",
	Doc: "A supervisor (the member with formation role supervisor, else the first member) delegates the " +
		"task to every other member; they run concurrently (disjoint working directories, capacity " +
		"admission applies). The supervisor then sees every outcome, failures included, and synthesizes " +
		`them, answering exactly {"answer":"..."}. The final output is that answer; a failed member stays ` +
		"failed and fails the team even though the supervisor synthesized.",
	Durable: true,
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		sup, _, err := oneWithRole(team, RoleSupervisor, 0)
		if err != nil {
			return err
		}
		workers := without(team.Members, sup.ID)
		if len(workers) == 0 {
			return fmt.Errorf("%w: hierarchical: supervisor %q has no member to delegate to", ErrInvalidConfig, sup.ID)
		}
		return disjointWriters("hierarchical", workers)
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		sup, _, err := oneWithRole(team, RoleSupervisor, 0)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		workers := without(team.Members, sup.ID)
		rs := newResults(team)
		delegated := fmt.Sprintf("Supervisor %s delegated this task to you; your outcome will be reported to it.", sup.ID)
		outcomes := opts.admission.run(ctx, e, team, workers, func(m runtime.MemberSpec) runtime.MemberResult {
			return e.RunTurn(ctx, team, m, runtime.Turn{Instruction: delegated, Contract: completion(team, m, opts)})
		})
		var context []string
		for _, r := range outcomes {
			rs.add(r)
			context = append(context, outcomeLine(r))
		}
		c := synthesisContract(team.Formation, sup, memberIDs(workers), DefaultMaxAnswerChars)
		r := e.RunTurn(ctx, team, sup, runtime.Turn{Context: context, ContextHeading: "Outcomes of the members you delegated to:",
			Instruction: "Synthesize these outcomes. A failed member stays failed: say so.", Contract: &c})
		rs.add(r)
		meta := map[string]string{"supervisor": sup.ID, "delegated_to": strings.Join(memberIDs(workers), ",")}
		if !r.Success {
			return done(rs, false, "", meta), nil
		}
		return done(rs, true, decode[Synthesis](r.Output).Answer, meta), nil
	},
}
