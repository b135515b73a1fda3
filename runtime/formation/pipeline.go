package formation

import (
	"context"
	"fmt"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var pipeline = Formation{
	Name: "pipeline",
	Doc: "An assembly line in configuration order: each member's output is the next member's input. A " +
		"failed stage stops the line; the members after it do not run. The final output is the last " +
		"stage's output; the team succeeds only when every stage ran and succeeded.",
	Durable: true,
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		rs := newResults(team)
		var input []string
		heading := ""
		output := ""
		for i, m := range team.Members {
			r := e.RunTurn(ctx, team, m, runtime.Turn{Context: input, ContextHeading: heading, Contract: completion(team, m, opts),
				Instruction: fmt.Sprintf("You are stage %d of %d of a pipeline.", i+1, len(team.Members))})
			rs.add(r)
			if !r.Success {
				stopped := len(team.Members) - i - 1
				if stopped > 0 {
					_ = e.Emit(ctx, m.ID, r.SessionID, event.Warning{Warning: fmt.Sprintf(
						"pipeline stopped at stage %d (%s): %d later stage(s) not run", i+1, m.ID, stopped), Stage: i + 1})
				}
				return done(rs, false, "", map[string]string{"stopped_at": m.ID, "stages_run": fmt.Sprint(i + 1)}), nil
			}
			output = r.Output
			input = []string{r.Output}
			heading = fmt.Sprintf("Input: the output of stage %d (%s):", i+1, m.ID)
		}
		return done(rs, true, output, map[string]string{"stages_run": fmt.Sprint(len(team.Members))}), nil
	},
}
