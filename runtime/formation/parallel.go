package formation

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/assay-audit/assay/runtime"
)

var parallel = Formation{
	Name: "parallel",
	Doc: "All members run concurrently with independent contexts and must be given disjoint working " +
		"directories. Per-member outcomes stay in member results; when any member fails the final " +
		"output carries a deterministic failed-member summary ordered by member id; with every member " +
		"successful the output is the members' outputs in configuration order.",
	Durable: false,
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team) (runtime.TeamResult, error) {
		dirs := map[string]string{}
		for _, m := range team.Members {
			if other, ok := dirs[m.Dir]; ok {
				return runtime.TeamResult{}, fmt.Errorf("parallel: members %q and %q share working directory %s; give each member its own (shared paths race)", other, m.ID, m.Dir)
			}
			dirs[m.Dir] = m.ID
		}
		results := make([]runtime.MemberResult, len(team.Members))
		var wg sync.WaitGroup
		for i, m := range team.Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = e.RunMember(ctx, team, m, nil)
			}()
		}
		wg.Wait()
		res := runtime.TeamResult{Success: true, Members: results}
		var outputs []string
		for _, r := range results {
			if r.Success {
				outputs = append(outputs, r.Output)
			} else {
				res.Success = false
			}
		}
		res.FinalOutput = strings.Join(outputs, "\n")
		if s := failedSummary(results); s != "" {
			res.FinalOutput += "\n" + s
		}
		return res, nil
	},
}
