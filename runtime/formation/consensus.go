package formation

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var consensus = Formation{
	Name: "consensus",
	Doc: "Members (all but an optional supervisor) propose concurrently in rounds (default 3) until they " +
		`agree, each answering exactly {"consensus_key":"...","proposal":"..."}. Members agree when their ` +
		"non-empty consensus keys match or, without keys, when their complete replies match exactly; the " +
		"largest agreeing group must reach the threshold (default 0.7) of all proposers, failed members " +
		"counted in the denominator. Successful execution alone is not agreement. Without agreement an " +
		"optional supervisor breaks the tie with its final proposal (consensus_achieved stays false, the " +
		"tie-breaker and decision are recorded); without either the team fails. Each round boundary is " +
		"recorded as a consensus_round event. With an ensemble mode, proposals are " +
		`{"vote_key":...,"answer":...} and the mode decides over the last round.`,
	Durable: true,
	Options: append(consensusOptions(), ensembleOptions()...),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		proposers, _, _, err := consensusRoles(team, opts)
		if err != nil {
			return err
		}
		return disjointWriters("consensus", proposers)
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		proposers, supervisor, aggregator, err := consensusRoles(team, opts)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		rounds, threshold := opts.Consensus.rounds(), opts.Consensus.threshold()
		ensemble := opts.Ensemble.Mode != ""
		contract := func(m runtime.MemberSpec, round int) *runtime.Contract {
			c := proposalContract(team.Formation, m, round)
			if ensemble {
				c = ensembleContract(team.Formation, m, round, answerLimit(opts))
			}
			return &c
		}
		rs := newResults(team)
		active := proposers
		var context []string
		agreed := false
		var agreeKey string
		var agreeing []string
		round := 0
		for round = 1; round <= rounds && len(active) > 0; round++ {
			instruction := fmt.Sprintf("Consensus round %d of %d.", round, rounds)
			out := opts.admission.run(ctx, e, team, active, func(m runtime.MemberSpec) runtime.MemberResult {
				return e.RunTurn(ctx, team, m, runtime.Turn{Context: context, ContextHeading: "Proposals of the previous round:",
					Instruction: instruction, Contract: contract(m, round)})
			})
			groups := map[string][]string{}
			context = nil
			var next []runtime.MemberSpec
			for i, r := range out {
				rs.add(r)
				if !r.Success {
					continue
				}
				next = append(next, active[i])
				key := "reply:" + r.Output
				if ensemble {
					key = "key:" + decode[EnsembleProposal](r.Output).VoteKey
				} else if k := decode[ConsensusProposal](r.Output).ConsensusKey; k != "" {
					key = "key:" + k
				}
				groups[key] = append(groups[key], r.MemberID)
				context = append(context, outcomeLine(r))
			}
			active = next
			agreeKey, agreeing = largestGroup(groups)
			agreed = float64(len(agreeing)) >= threshold*float64(len(proposers))
			if err := e.Emit(ctx, "", "", event.ConsensusRound{Round: round, Groups: groups, Largest: len(agreeing),
				Proposers: len(proposers), Threshold: threshold, Agreement: agreed}); err != nil {
				return runtime.TeamResult{}, fmt.Errorf("record consensus_round %d: %w", round, err)
			}
			if agreed {
				break
			}
		}
		roundsRun := min(round, rounds)
		meta := map[string]string{"consensus_achieved": fmt.Sprint(agreed), "rounds": fmt.Sprint(roundsRun), "threshold": fmt.Sprint(threshold)}
		decision := event.ConsensusDecision{ConsensusAchieved: agreed, Rounds: roundsRun}
		var output string
		ok := false
		switch {
		case ensemble:
			var emeta map[string]string
			ok, output, emeta = aggregate(ctx, e, team, opts, rs, proposers, aggregator)
			for k, v := range emeta {
				meta[k] = v
			}
			decision.Decision = ptrTo(output)
		case agreed:
			ok = true
			r, _ := rs.get(agreeing[0])
			output = decode[ConsensusProposal](r.Output).Proposal
			meta["consensus_key"], meta["agreeing_members"], meta["decision"] = strings.TrimPrefix(agreeKey, "key:"), strings.Join(agreeing, ","), output
			decision.AgreeingMembers, decision.Decision = agreeing, ptrTo(output)
		case supervisor != nil:
			r := e.RunTurn(ctx, team, *supervisor, runtime.Turn{Context: context, ContextHeading: "Proposals of the last round:",
				Instruction: fmt.Sprintf("The members did not agree in %d rounds. Break the tie with your final proposal.", roundsRun),
				Contract:    contract(*supervisor, roundsRun+1)})
			rs.add(r)
			if r.Success {
				ok = true
				output = decode[ConsensusProposal](r.Output).Proposal
				meta["tie_breaker"], meta["decision"] = supervisor.ID, output
				decision.TieBreaker, decision.Decision = supervisor.ID, ptrTo(output)
			} else {
				decision.TieBreakerFailed = supervisor.ID
			}
		}
		if !ok && output == "" {
			output = fmt.Sprintf("no consensus after %d round(s)", roundsRun)
			decision.Decision = nil
		}
		if err := e.Emit(ctx, "", "", decision); err != nil {
			return runtime.TeamResult{}, fmt.Errorf("record consensus_decision: %w", err)
		}
		res := done(rs, ok, output, meta)
		// Agreement (or a tie-break, or the ensemble decision) is the team's outcome; a member that
		// failed stays failed in its result and is named in the output.
		res.Success = ok
		return res, nil
	},
}

// consensusRoles returns the proposers, the optional supervisor and (in ensemble mode) the
// aggregator.
func consensusRoles(team runtime.Team, opts Options) ([]runtime.MemberSpec, *runtime.MemberSpec, *runtime.MemberSpec, error) {
	var sup *runtime.MemberSpec
	s, found, err := oneWithRole(team, RoleSupervisor, -1)
	if err != nil {
		return nil, nil, nil, err
	}
	if found {
		sup = &s
	}
	if opts.Ensemble.Mode != "" {
		candidates, agg, err := ensembleRoles(team, opts.Ensemble.Mode, RoleSupervisor)
		return candidates, sup, agg, err
	}
	var proposers []runtime.MemberSpec
	for _, m := range team.Members {
		switch m.FormationRole {
		case "", RoleCandidate:
			proposers = append(proposers, m)
		case RoleSupervisor:
		default:
			return nil, nil, nil, fmt.Errorf("%w: consensus: member %q has formation role %q (only supervisor or none)", ErrInvalidConfig, m.ID, m.FormationRole)
		}
	}
	if len(proposers) < 2 {
		return nil, nil, nil, fmt.Errorf("%w: consensus needs at least two proposers, got %d", ErrInvalidConfig, len(proposers))
	}
	return proposers, sup, nil, nil
}

// largestGroup returns the key and members of the largest group; ties go to the smallest key, so
// the choice is deterministic.
func largestGroup(groups map[string][]string) (string, []string) {
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best := ""
	for _, k := range keys {
		if best == "" || len(groups[k]) > len(groups[best]) {
			best = k
		}
	}
	return best, groups[best]
}

// ptrTo returns a pointer to a copy of s.
func ptrTo(s string) *string { return &s }
