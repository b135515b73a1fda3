package formation

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var reflection = Formation{
	Name: "reflection",
	Doc: "Two members: a generator (formation role generator or none) produces; the critic (formation " +
		"role critic, readonly tools only) evaluates, answering exactly " +
		`{"verdict":"satisfied","feedback":"..."} or {"verdict":"needs_work","feedback":"..."} with ` +
		"non-empty feedback (verdict_format json, the only format). The loop repeats with the feedback " +
		"until the critic is satisfied or the iteration limit (default 3) is hit, which fails the team. " +
		"A malformed verdict fails at once, with no extra generation attempt. Every verdict is recorded " +
		"as a critic_verdict event; member results hold the real generator and critic results with " +
		"their usage and the ordered attempts; the final output is the generated solution.",
	Durable: true,
	Options: reflectionOptions(),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		_, _, err := reflectionRoles(team)
		return err
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		gen, critic, err := reflectionRoles(team)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		limit := opts.Reflection.iterations()
		type attempt struct {
			Iteration        int    `json:"iteration"`
			GeneratorSuccess bool   `json:"generator_success"`
			CriticSuccess    bool   `json:"critic_success"`
			Verdict          string `json:"verdict,omitempty"`
			Feedback         string `json:"feedback,omitempty"`
		}
		var attempts []attempt
		rs := newResults(team)
		var feedback []string
		solution := ""
		satisfied := false
		finish := func(ok bool, reason string) runtime.TeamResult {
			a, _ := json.Marshal(attempts)
			rs.setMeta(gen.ID, "attempts", string(a))
			rs.setMeta(critic.ID, "attempts", string(a))
			meta := map[string]string{"generator": gen.ID, "critic": critic.ID, "iterations": fmt.Sprint(len(attempts)),
				"satisfied": fmt.Sprint(satisfied), "verdict_format": "json"}
			if len(attempts) > 0 {
				meta["verdict"] = attempts[len(attempts)-1].Verdict
			}
			if reason != "" {
				meta["reason"] = reason
			}
			return done(rs, ok, solution, meta)
		}
		for it := 1; it <= limit; it++ {
			g := e.RunTurn(ctx, team, gen, runtime.Turn{Context: feedback, ContextHeading: "The critic's feedback on your previous attempt:",
				Instruction: fmt.Sprintf("Reflection iteration %d of %d.", it, limit), Contract: completion(team, gen, opts)})
			rs.add(g)
			attempts = append(attempts, attempt{Iteration: it, GeneratorSuccess: g.Success})
			if !g.Success {
				return finish(false, "generator failed at iteration "+fmt.Sprint(it)), nil
			}
			solution = g.Output
			files := runtime.CompletionReply{}
			if r, err := runtime.ParseCompletion(g.Output); err == nil {
				files = r
			}
			c := criticContract(team.Formation, critic, it, files.Files)
			v := e.RunTurn(ctx, team, critic, runtime.Turn{Context: []string{outcomeLine(g)}, ContextHeading: "The generator's solution:",
				Instruction: fmt.Sprintf("Reflection iteration %d of %d.", it, limit), Contract: &c})
			rs.add(v)
			attempts[len(attempts)-1].CriticSuccess = v.Success
			if !v.Success {
				return finish(false, "critic failed at iteration "+fmt.Sprint(it)), nil
			}
			verdict := decode[CriticVerdict](v.Output)
			attempts[len(attempts)-1].Verdict, attempts[len(attempts)-1].Feedback = verdict.Verdict, verdict.Feedback
			if err := e.Emit(ctx, critic.ID, v.SessionID, event.CriticVerdict{Iteration: it, Verdict: verdict.Verdict,
				Feedback: verdict.Feedback, Generator: gen.ID, VerdictFormat: "json"}); err != nil {
				return runtime.TeamResult{}, fmt.Errorf("record critic_verdict: %w", err)
			}
			if verdict.Verdict == "satisfied" {
				satisfied = true
				return finish(true, ""), nil
			}
			feedback = []string{fmt.Sprintf("[%s] %s", critic.ID, verdict.Feedback)}
		}
		_ = e.Emit(ctx, critic.ID, team.SessionID(critic), event.Warning{
			Warning: fmt.Sprintf("the critic was not satisfied within %d iteration(s)", limit)})
		return finish(false, fmt.Sprintf("not satisfied within %d iteration(s)", limit)), nil
	},
}

// reflectionRoles returns the generator and the critic; a reflection team has exactly these two.
func reflectionRoles(team runtime.Team) (gen, critic runtime.MemberSpec, err error) {
	if len(team.Members) != 2 {
		return gen, critic, fmt.Errorf("%w: reflection takes exactly a generator and a critic, got %d members", ErrInvalidConfig, len(team.Members))
	}
	gen, critic = team.Members[0], team.Members[1]
	if team.Members[1].FormationRole == RoleGenerator || team.Members[0].FormationRole == RoleCritic {
		gen, critic = team.Members[1], team.Members[0]
	}
	if gen.FormationRole != "" && gen.FormationRole != RoleGenerator {
		return gen, critic, fmt.Errorf("%w: reflection: member %q has formation role %q, want generator", ErrInvalidConfig, gen.ID, gen.FormationRole)
	}
	if critic.FormationRole != RoleCritic {
		return gen, critic, fmt.Errorf("%w: reflection: member %q must have formation role critic, not %q (a critic holds only readonly tools)",
			ErrInvalidConfig, critic.ID, critic.FormationRole)
	}
	return gen, critic, nil
}
