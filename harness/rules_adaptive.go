package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// The evidence rule of adaptive: each attempt re-derived by its formation's rule.

// attemptRules are the rules adaptive re-derives its attempts with, by formation.
func attemptRule(name string) evidenceRule {
	switch name {
	case "sequential":
		return sequentialEvidence
	case "pipeline":
		return pipelineEvidence
	case "parallel":
		return parallelEvidence
	case "hierarchical":
		return hierarchicalEvidence
	case "consensus":
		return consensusEvidence
	case "reflection":
		return reflectionEvidence
	case "dynamic_router":
		return routerEvidence
	case "multi_level_hierarchy":
		return multiLevelEvidence
	case "group_chat":
		return groupChatEvidence
	case "debate":
		return debateEvidence
	case "handoff":
		return handoffEvidence
	}
	return nil
}

// adaptiveEvidence splits the trace into attempts at the recorded switches, re-derives each
// attempt's outcome with its formation's rule and its score from the raw replies (feedback: the
// mean quality_score of the attempt's completion replies; error_rate: 1 - failed/ran), and checks
// every switch follows an attempt that failed or scored below min_score, the switches stay within
// max_switches, and the last attempt's outcome is the team's.
func adaptiveEvidence(d *derivation) (string, string) {
	a := d.opts.Adaptive
	cycle := a.Cycle
	if len(cycle) == 0 {
		cycle = defaultAdaptiveCycle()
	}
	// initial_formation_hint: the first attempt runs the hinted formation, the cycle continuing from
	// there.
	if i := slices.Index(cycle, a.InitialFormation); a.InitialFormation != "" && i >= 0 {
		cycle = append(slices.Clone(cycle[i:]), cycle[:i]...)
	}
	strategy := labelOr(a.Strategy, formation.StrategyErrorRate)
	minScore := a.MinScore
	if minScore == 0 {
		minScore = defaultMinScore
		if strategy == formation.StrategyErrorRate {
			minScore = defaultMinScoreErrorRate
		}
	}
	maxSwitches := a.MaxSwitches
	if maxSwitches == 0 {
		maxSwitches = defaultMaxSwitches
	}
	switches, at, err := claims[event.FormationSwitched](d)
	if err != nil {
		return failedf("formation_switched: %v", err)
	}
	var problems, history []string
	if len(switches) > maxSwitches {
		problems = append(problems, fmt.Sprintf("%d switches recorded, over max_switches %d", len(switches), maxSwitches))
	}
	ok, why := false, ""
	for i := 0; i <= len(switches); i++ {
		name := cycle[i%len(cycle)]
		history = append(history, name)
		sub := *d
		sub.attempt, sub.ok, sub.why = true, false, ""
		sub.formation, sub.scoreAsked = name, strategy == formation.StrategyFeedback
		if i > 0 {
			sub.from = at[i-1]
		}
		sub.to = pos{}
		if i < len(switches) {
			sub.to = at[i]
		}
		sub.turns = map[string][]*memberTurn{}
		for id, ts := range d.turns {
			for _, mt := range ts {
				if !mt.Start.before(sub.from) && (sub.to.zero() || mt.Start.before(sub.to)) {
					sub.turns[id] = append(sub.turns[id], mt)
				}
			}
		}
		rule := attemptRule(name)
		if rule == nil {
			return failedf("attempt %d: formation %q has no rule to re-derive it", i+1, name)
		}
		if st, detail := rule(&sub); st == statusFailed {
			problems = append(problems, fmt.Sprintf("attempt %d (%s): %s", i+1, name, detail))
		}
		score, reason := sub.attemptScore(strategy)
		good := sub.ok && reason == "" && score >= minScore
		if i < len(switches) {
			sw := switches[i]
			if good {
				problems = append(problems, fmt.Sprintf("the runtime switched from %s after attempt %d (formation_switched, %s), but the raw replies give a "+
					"successful attempt scoring %.4f (min_score %v)", name, i+1, d.at(at[i]), score, minScore))
			}
			if reason != "" {
				problems = append(problems, fmt.Sprintf("attempt %d: %s; the run must fail, not switch", i+1, reason))
			}
			if sw.From != name || sw.To != cycle[(i+1)%len(cycle)] || sw.Switch != i+1 {
				problems = append(problems, fmt.Sprintf("the runtime recorded switch %d %s -> %s (%s), the cycle gives %s -> %s", sw.Switch, sw.From, sw.To,
					d.at(at[i]), name, cycle[(i+1)%len(cycle)]))
			}
			continue
		}
		switch {
		case good:
			ok = true
		case reason != "":
			why = reason
		case len(switches) >= maxSwitches:
			why = fmt.Sprintf("attempt %d (%s) %s and max_switches %d is reached", i+1, name, failedOrScored(sub.ok, sub.why, score, minScore), maxSwitches)
		default:
			why = fmt.Sprintf("attempt %d (%s) %s, yet the runtime did not switch", i+1, name, failedOrScored(sub.ok, sub.why, score, minScore))
			problems = append(problems, why)
		}
	}
	if md, mok := d.metadata(); mok && (md["current_formation"] != history[len(history)-1] || md["switch_count"] != fmt.Sprint(len(switches)) ||
		md["formation_history"] != strings.Join(history, ",")) {
		problems = append(problems, fmt.Sprintf("the runtime recorded formation %q after %q switch(es), history %q; the trace gives %s after %d, history %s",
			md["current_formation"], md["switch_count"], md["formation_history"], history[len(history)-1], len(switches), strings.Join(history, ",")))
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, fmt.Sprintf("attempts %s re-derived from the raw replies (%s strategy, %d switch(es) of at most %d)",
		strings.Join(history, " -> "), strategy, len(switches), maxSwitches))
}

func failedOrScored(ok bool, why string, score, min float64) string {
	if !ok {
		return "failed" + because(why)
	}
	return fmt.Sprintf("scored %.4f below min_score %v", score, min)
}

// attemptScore re-derives an attempt's score from its turns' raw replies; reason is non-empty when
// the strategy's evidence is missing (a completion reply without quality_score: the run fails).
// The performance strategy measures wall time, which the recorded bytes do not carry: its score is
// taken as 1 (only the attempt's outcome is re-derived).
func (d *derivation) attemptScore(strategy string) (float64, string) {
	ids := slices.Sorted(maps.Keys(d.turns))
	switch strategy {
	case formation.StrategyFeedback:
		// Every completion reply of the attempt, a failure's too, carries its member's score; an
		// attempt with none has no feedback and scores 0.
		sum, n := 0.0, 0
		for _, id := range ids {
			ts := d.turns[id]
			o := d.outcome(ts[len(ts)-1])
			if o.Line.Contract != runtime.ContractCompletion || o.Reply == "" {
				continue
			}
			c, err := readCompletion(o.Reply, true)
			if err != nil {
				return 0, fmt.Sprintf("member %s did not return a valid quality_score: %v", id, err)
			}
			sum += *c.QualityScore
			n++
		}
		if n == 0 {
			return 0, ""
		}
		return sum / float64(n), ""
	case formation.StrategyPerformance:
		return 1, ""
	default:
		if len(ids) == 0 {
			return 0, ""
		}
		failed := 0
		for _, id := range ids {
			ts := d.turns[id]
			if !d.outcome(ts[len(ts)-1]).OK {
				failed++
			}
		}
		return 1 - float64(failed)/float64(len(ids)), ""
	}
}
