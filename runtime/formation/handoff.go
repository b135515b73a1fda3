package formation

import (
	"context"
	"fmt"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var handoff = Formation{
	Name: "handoff",
	Doc: "The first member speaks first; each speaker names the next in handoff_to, and the transcript " +
		`travels with it. A turn answers exactly {"content":"...","done":false,"handoff_to":"<member id>"} ` +
		`or {"content":"...","done":true,"handoff_to":null}; a self-handoff, an unknown destination, done ` +
		"together with a destination, or an unfinished turn without one fails. Each handoff is a " +
		"member_handoff event (source, target, sequence). Reaching max_turns (default 6) with a handoff " +
		"still pending fails; so does a transcript over transcript_max_chars.",
	Durable: false,
	Options: conversationOptions(false),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		for _, m := range team.Members {
			if m.FormationRole != "" {
				return fmt.Errorf("%w: handoff: member %q has formation role %q (handoff members have none)", ErrInvalidConfig, m.ID, m.FormationRole)
			}
		}
		if len(team.Members) < 2 {
			return fmt.Errorf("%w: handoff needs at least two members, got %d", ErrInvalidConfig, len(team.Members))
		}
		return nil
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		c := newConversation(ctx, e, team, opts, team.Members)
		speaker := team.Members[0]
		for turn := 1; turn <= c.maxTurns; turn++ {
			t, ok := c.speak(speaker, true, fmt.Sprintf("Handoff turn %d of at most %d.", turn, c.maxTurns))
			if !ok {
				return done(c.rs, false, c.lastContent(), c.meta("failure", "")), nil
			}
			if t.Done {
				return done(c.rs, true, t.Content, c.meta("done", "")), nil
			}
			target, _ := team.Member(*t.HandoffTo)
			if err := e.Emit(ctx, speaker.ID, team.SessionID(speaker), event.MemberHandoff{Source: speaker.ID,
				Target: target.ID, Sequence: turn}); err != nil {
				return runtime.TeamResult{}, fmt.Errorf("record member_handoff: %w", err)
			}
			speaker = target
		}
		reason := fmt.Sprintf("max_turns %d reached with a handoff to %s pending", c.maxTurns, speaker.ID)
		_ = e.Emit(ctx, "", "", event.Warning{Warning: reason})
		return done(c.rs, false, c.lastContent(), c.meta("max_turns", reason)), nil
	},
}
