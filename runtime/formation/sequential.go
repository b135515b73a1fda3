package formation

import (
	"context"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/runtime"
)

var sequential = Formation{
	Name: "sequential",
	Doc: "Members run one after another in configuration order; each receives the outputs of the " +
		"members before it as context. Every member runs even if an earlier one failed; the team " +
		"succeeds only if every member succeeded.",
	Durable: false,
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team) (runtime.TeamResult, error) {
		res := runtime.TeamResult{Success: true}
		var context []string
		var outputs []string
		for _, m := range team.Members {
			r := e.RunMember(ctx, team, m, context)
			res.Members = append(res.Members, r)
			if r.Success {
				context = append(context, fmt.Sprintf("[%s] %s", m.ID, r.Output))
				outputs = append(outputs, r.Output)
			} else {
				res.Success = false
				context = append(context, fmt.Sprintf("[%s] failed: %s", m.ID, r.Error))
			}
		}
		res.FinalOutput = strings.Join(outputs, "\n")
		if s := failedSummary(res.Members); s != "" {
			res.FinalOutput += "\n" + s
		}
		return res, nil
	},
}
