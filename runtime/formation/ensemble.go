package formation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

// Ensemble aggregation is a mode of parallel or consensus (FORMATIONS.md): every candidate gets the
// same task and answers {"vote_key":...,"answer":...}; the mode decides.

// EnsembleMode describes one ensemble aggregation mode: a mode of parallel and consensus, selected
// by EnsembleOptions.Mode.
type EnsembleMode struct {
	// Name is the value of EnsembleOptions.Mode.
	Name string
	// Doc states what decides the answer, and the exact reply the deciding member gives.
	Doc string
}

// EnsembleContract states what every ensemble mode shares: the candidates' reply, the answer
// limit (EnsembleOptions.MaxAnswerChars, DefaultMaxAnswerChars by default), and the refusal of
// resume.
func EnsembleContract() string {
	return fmt.Sprintf(`every candidate answers exactly {"vote_key":"...","answer":"..."} (an answer over %d characters by `+
		"default is rejected: return an artifact reference instead); ensemble runs refuse resume before any member executes",
		DefaultMaxAnswerChars)
}

// EnsembleModes returns the ensemble aggregation modes, in the order vote, judge, synthesizer. The
// slice is new on every call.
func EnsembleModes() []EnsembleMode {
	return []EnsembleMode{
		{Name: EnsembleVote, Doc: "the strict majority of the candidates' vote keys decides; a tie or an invalid proposal fails"},
		{Name: EnsembleJudge, Doc: `one judge member selects a candidate, answering exactly {"selected_member_id":"<candidate>"}`},
		{Name: EnsembleSynthesizer, Doc: `one synthesizer member composes the answer in one pass, answering exactly {"answer":"..."}`},
	}
}

// ensembleRoles splits the team into candidates (formation role "" or candidate) and the one
// aggregator the mode needs (a judge for judge, a synthesizer for synthesizer, none for vote).
// extra lists further roles the calling formation allows (consensus: supervisor).
func ensembleRoles(team runtime.Team, mode string, extra ...string) (candidates []runtime.MemberSpec, aggregator *runtime.MemberSpec, err error) {
	var judges, synths []runtime.MemberSpec
	for _, m := range team.Members {
		switch {
		case m.FormationRole == "" || m.FormationRole == RoleCandidate:
			candidates = append(candidates, m)
		case m.FormationRole == RoleJudge:
			judges = append(judges, m)
		case m.FormationRole == RoleSynthesizer:
			synths = append(synths, m)
		case slices.Contains(extra, m.FormationRole):
		default:
			return nil, nil, fmt.Errorf("%w: ensemble %s: member %q has formation role %q, which has no part in an ensemble", ErrInvalidConfig, mode, m.ID, m.FormationRole)
		}
	}
	if len(candidates) < 2 {
		return nil, nil, fmt.Errorf("%w: ensemble %s needs at least two candidates, got %d", ErrInvalidConfig, mode, len(candidates))
	}
	need := map[string]int{RoleJudge: 0, RoleSynthesizer: 0}
	switch mode {
	case EnsembleJudge:
		need[RoleJudge] = 1
	case EnsembleSynthesizer:
		need[RoleSynthesizer] = 1
	}
	if len(judges) != need[RoleJudge] || len(synths) != need[RoleSynthesizer] {
		return nil, nil, fmt.Errorf("%w: ensemble %s needs exactly %d judge and %d synthesizer member(s), got %d and %d",
			ErrInvalidConfig, mode, need[RoleJudge], need[RoleSynthesizer], len(judges), len(synths))
	}
	switch {
	case len(judges) == 1:
		aggregator = &judges[0]
	case len(synths) == 1:
		aggregator = &synths[0]
	}
	return candidates, aggregator, nil
}

func answerLimit(opts Options) int { return opts.Ensemble.maxAnswerChars() }

// aggregate applies the ensemble mode to the candidates' last results, running the judge or
// synthesizer when the mode has one, and emits ensemble_decision. It reports whether a decision
// was reached, the output, and the metadata.
func aggregate(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options, rs *results,
	candidates []runtime.MemberSpec, aggregator *runtime.MemberSpec) (bool, string, map[string]string) {
	mode := opts.Ensemble.Mode
	meta := map[string]string{"ensemble_mode": mode}
	var ok []string
	var keys []string
	var context []string
	proposals := map[string]EnsembleProposal{}
	votes := map[string]int{}
	var invalid []string
	for _, c := range candidates {
		r, _ := rs.get(c.ID)
		if !r.Success {
			invalid = append(invalid, c.ID)
			continue
		}
		p := decode[EnsembleProposal](r.Output)
		proposals[c.ID] = p
		ok = append(ok, c.ID)
		keys = append(keys, p.VoteKey)
		votes[p.VoteKey]++
		context = append(context, fmt.Sprintf("[%s] vote_key=%q answer=%q", c.ID, p.VoteKey, p.Answer))
	}
	votesJSON, _ := json.Marshal(votes)
	meta["votes"] = string(votesJSON)
	decision := event.EnsembleDecision{Mode: mode, Votes: votes, Candidates: memberIDs(candidates)}
	fail := func(reason string) (bool, string, map[string]string) {
		meta["decision"] = "none"
		meta["reason"] = reason
		decision.Decision, decision.Reason = "none", reason
		_ = e.Emit(ctx, "", "", decision)
		return false, "no ensemble decision: " + reason, meta
	}
	switch mode {
	case EnsembleVote:
		if len(invalid) > 0 {
			return fail("invalid or missing proposal from " + strings.Join(invalid, ", "))
		}
		best, bestN := "", 0
		for _, k := range keys {
			if votes[k] > bestN {
				best, bestN = k, votes[k]
			}
		}
		if 2*bestN <= len(candidates) {
			return fail(fmt.Sprintf("no strict majority: the largest vote has %d of %d", bestN, len(candidates)))
		}
		winner := ok[slices.Index(keys, best)]
		meta["selected_member_id"], meta["vote_key"], meta["decision"] = winner, best, proposals[winner].Answer
		decision.SelectedMemberID, decision.VoteKey, decision.Decision = winner, best, proposals[winner].Answer
		_ = e.Emit(ctx, "", "", decision)
		return true, proposals[winner].Answer, meta
	case EnsembleJudge:
		if len(ok) == 0 {
			return fail("no candidate gave a valid proposal")
		}
		c := ensembleJudgeContract(team.Formation, *aggregator, ok, keys)
		r := e.RunTurn(ctx, team, *aggregator, runtime.Turn{Context: context, ContextHeading: "Candidate answers:", Contract: &c})
		rs.add(r)
		if !r.Success {
			return fail("judge " + aggregator.ID + " failed: " + r.Error)
		}
		sel := decode[EnsembleJudgement](r.Output).SelectedMemberID
		meta["selected_member_id"], meta["judge"], meta["vote_key"], meta["decision"] = sel, aggregator.ID, proposals[sel].VoteKey, proposals[sel].Answer
		decision.SelectedMemberID, decision.Judge, decision.VoteKey, decision.Decision = sel, aggregator.ID, proposals[sel].VoteKey, proposals[sel].Answer
		_ = e.Emit(ctx, aggregator.ID, r.SessionID, decision)
		return true, proposals[sel].Answer, meta
	case EnsembleSynthesizer:
		if len(ok) == 0 {
			return fail("no candidate gave a valid proposal")
		}
		c := synthesisContract(team.Formation, *aggregator, ok, answerLimit(opts))
		r := e.RunTurn(ctx, team, *aggregator, runtime.Turn{Context: context, ContextHeading: "Candidate answers:", Contract: &c})
		rs.add(r)
		if !r.Success {
			return fail("synthesizer " + aggregator.ID + " failed: " + r.Error)
		}
		answer := decode[Synthesis](r.Output).Answer
		meta["synthesizer"], meta["decision"] = aggregator.ID, answer
		decision.Synthesizer, decision.Decision = aggregator.ID, answer
		_ = e.Emit(ctx, aggregator.ID, r.SessionID, decision)
		return true, answer, meta
	}
	return fail("unknown mode " + mode)
}
