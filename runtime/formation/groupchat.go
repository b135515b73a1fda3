package formation

import (
	"context"
	"fmt"
	"slices"

	"github.com/assay-audit/assay/runtime"
)

var groupChat = Formation{
	Name: "group_chat",
	Doc: "Members take speaking turns, round-robin by default; an optional candidate filter and selector " +
		`callback, or a router member answering {"speaker_id":"..."}, choose the next speaker. Each turn ` +
		`answers exactly {"content":"...","done":false,"handoff_to":null} (handoff_to must be null). The ` +
		"chat ends on done, a termination predicate, or max_turns (default 6); a transcript over " +
		"transcript_max_chars (default 32768) fails instead of being trimmed. Callbacks get immutable " +
		"snapshots; a callback error fails the run with a warning. Each turn is a member_spoke event.",
	Durable: false,
	Options: conversationOptions(false),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		_, speakers, err := groupChatRoles(team)
		if err != nil {
			return err
		}
		if opts.Conversation.Selector != nil && len(withRole(team, RoleRouter)) > 0 {
			return fmt.Errorf("%w: group_chat: a selector callback and a router member are two selectors; configure one", ErrInvalidConfig)
		}
		_ = speakers
		return nil
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		router, speakers, err := groupChatRoles(team)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		c := newConversation(ctx, e, team, opts, speakers)
		cb := opts.Conversation
		last := -1
		for turn := 1; turn <= c.maxTurns; turn++ {
			candidates := memberIDs(speakers)
			if cb.CandidateFilter != nil {
				ids, err := callback(func() ([]string, error) { return cb.CandidateFilter(c.snapshot()) })
				if err == nil {
					err = checkIDs(ids, candidates)
				}
				if err != nil {
					return c.callbackFailed("candidate filter", err), nil
				}
				candidates = slices.Clone(ids)
			}
			var next string
			switch {
			case cb.Selector != nil:
				id, err := callback(func() (string, error) { return cb.Selector(c.snapshot(), slices.Clone(candidates)) })
				if err == nil && !slices.Contains(candidates, id) {
					err = fmt.Errorf("selected %q, not one of %v", id, candidates)
				}
				if err != nil {
					return c.callbackFailed("selector", err), nil
				}
				next = id
			case router != nil:
				rc := routerContract(team.Formation, *router, candidates, turn)
				r := e.RunTurn(ctx, team, *router, runtime.Turn{Context: c.transcript.lines(), ContextHeading: "The conversation so far:", Contract: &rc})
				c.rs.add(r)
				if !r.Success {
					return done(c.rs, false, "", c.meta("router_failed", r.Error)), nil
				}
				next = decode[RouterChoice](r.Output).SpeakerID
			default:
				for k := 1; k <= len(speakers); k++ {
					id := speakers[(last+k)%len(speakers)].ID
					if slices.Contains(candidates, id) {
						next = id
						break
					}
				}
			}
			m, _ := team.Member(next)
			last = slices.Index(memberIDs(speakers), next)
			t, ok := c.speak(m, false, fmt.Sprintf("Group chat turn %d of at most %d.", turn, c.maxTurns))
			if !ok {
				return done(c.rs, false, c.lastContent(), c.meta("failure", "")), nil
			}
			if t.Done {
				return done(c.rs, true, t.Content, c.meta("done", "")), nil
			}
			if cb.Terminate != nil {
				stop, err := callback(func() (bool, error) { return cb.Terminate(c.snapshot()) })
				if err != nil {
					return c.callbackFailed("termination predicate", err), nil
				}
				if stop {
					return done(c.rs, true, t.Content, c.meta("termination", "")), nil
				}
			}
		}
		return done(c.rs, true, c.lastContent(), c.meta("max_turns", "")), nil
	},
}

// groupChatRoles returns the optional router and the speakers.
func groupChatRoles(team runtime.Team) (*runtime.MemberSpec, []runtime.MemberSpec, error) {
	r, found, err := oneWithRole(team, RoleRouter, -1)
	if err != nil {
		return nil, nil, err
	}
	speakers := team.Members
	var router *runtime.MemberSpec
	if found {
		router = &r
		speakers = without(team.Members, r.ID)
	}
	for _, m := range speakers {
		if m.FormationRole != "" {
			return nil, nil, fmt.Errorf("%w: group_chat: member %q has formation role %q (speakers have none; one router is allowed)", ErrInvalidConfig, m.ID, m.FormationRole)
		}
	}
	if len(speakers) < 2 {
		return nil, nil, fmt.Errorf("%w: group_chat needs at least two speakers, got %d", ErrInvalidConfig, len(speakers))
	}
	return router, speakers, nil
}
