package formation

import (
	"context"
	"strings"

	"github.com/assay-audit/assay/runtime"
)

var sequential = Formation{
	Name: "sequential",
	Doc: "Members run one after another in configuration order; each receives the outputs of the " +
		"members before it as context. Every member runs even if an earlier one failed (its failure is " +
		"shown to the members after it); the team succeeds only if every member succeeded.",
	Durable: true,
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		rs := newResults(team)
		var context, outputs []string
		for _, m := range team.Members {
			r := e.RunTurn(ctx, team, m, runtime.Turn{Context: context, Contract: completion(team, m, opts)})
			rs.add(r)
			context = append(context, outcomeLine(r))
			if r.Success {
				outputs = append(outputs, r.Output)
			}
		}
		return done(rs, true, strings.Join(outputs, "\n"), nil), nil
	},
}
