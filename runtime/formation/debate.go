package formation

import (
	"context"
	"fmt"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var debate = Formation{
	Name: "debate",
	Doc: "Debaters (every member but the judge) contribute in rounds (debate_rounds, default 2, bounded " +
		`by max_turns, default 6), each turn exactly {"content":"...","done":false,"handoff_to":null}; a ` +
		"debater that answers done contributes no more. Then the judge (formation role judge, readonly) " +
		`gives one verdict {"selected_member_id":"<debater>","verdict":"..."}, recorded as a judge_verdict ` +
		"event. A transcript over transcript_max_chars fails instead of being trimmed.",
	Durable: false,
	Options: conversationOptions(true),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		_, _, err := debateRoles(team)
		return err
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		judge, debaters, err := debateRoles(team)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		rounds := opts.Conversation.debateRounds()
		c := newConversation(ctx, e, team, opts, debaters)
		finished := map[string]bool{}
		for round := 1; round <= rounds; round++ {
			for _, d := range debaters {
				if finished[d.ID] || len(c.transcript) >= c.maxTurns {
					continue
				}
				t, ok := c.speak(d, false, fmt.Sprintf("Debate round %d of %d.", round, rounds))
				if !ok {
					return done(c.rs, false, "", c.meta("failure", "")), nil
				}
				finished[d.ID] = t.Done
			}
		}
		jc := judgeContract(team.Formation, judge, memberIDs(debaters))
		r := e.RunTurn(ctx, team, judge, runtime.Turn{Context: c.transcript.lines(), ContextHeading: "The debate:", Contract: &jc})
		c.rs.add(r)
		meta := c.meta("judge", "")
		meta["judge"] = judge.ID
		if !r.Success {
			return done(c.rs, false, "", meta), nil
		}
		v := decode[JudgeVerdict](r.Output)
		meta["selected_member_id"], meta["verdict"] = v.SelectedMemberID, v.Verdict
		if err := e.Emit(ctx, judge.ID, r.SessionID, event.JudgeVerdict{SelectedMemberID: v.SelectedMemberID,
			Verdict: v.Verdict, Candidates: memberIDs(debaters)}); err != nil {
			return runtime.TeamResult{}, fmt.Errorf("record judge_verdict: %w", err)
		}
		return done(c.rs, true, fmt.Sprintf("%s: %s", v.SelectedMemberID, v.Verdict), meta), nil
	},
}

// debateRoles returns the judge and the debaters.
func debateRoles(team runtime.Team) (runtime.MemberSpec, []runtime.MemberSpec, error) {
	judges := withRole(team, RoleJudge)
	if len(judges) != 1 {
		return runtime.MemberSpec{}, nil, fmt.Errorf("%w: debate needs exactly one member with formation role judge, got %d", ErrInvalidConfig, len(judges))
	}
	debaters := without(team.Members, judges[0].ID)
	for _, m := range debaters {
		if m.FormationRole != "" {
			return runtime.MemberSpec{}, nil, fmt.Errorf("%w: debate: debater %q has formation role %q (debaters have none)", ErrInvalidConfig, m.ID, m.FormationRole)
		}
	}
	if len(debaters) < 2 {
		return runtime.MemberSpec{}, nil, fmt.Errorf("%w: debate needs at least two debaters, got %d", ErrInvalidConfig, len(debaters))
	}
	return judges[0], debaters, nil
}
