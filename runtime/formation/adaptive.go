package formation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

// Adaptive strategies.
const (
	StrategyErrorRate   = "error_rate"
	StrategyPerformance = "performance"
	StrategyFeedback    = "feedback"
)

// adaptive is a function rather than a variable: its Run re-enters the registry, which lists it.
func adaptive() Formation {
	return Formation{
		Name: "adaptive",
		Doc: "Runs a cycle of formations (default sequential -> hierarchical -> consensus) through the " +
			"registry, switching to the next when the current attempt fails or scores below min_score, up " +
			"to max_switches (default 3). Strategies: error_rate (1 - failed/ran), performance " +
			"(min(1, target/elapsed)), and feedback, where every completion reply, a failure's too, must carry a " +
			"numeric quality_score in [0,1] (their mean is the score; an attempt with none scores 0) or the run fails. Recursive adaptive cycles " +
			"are rejected; every member must be idempotent, since adaptation repeats work. Results record " +
			"the current formation, the history, the switch count and the score; each switch is a " +
			"formation_switched event. initial_formation_hint starts the cycle at a formation of it; max_duration_seconds " +
			"ends the run at a failing attempt once that wall time has passed.",
		Durable: false,
		Options: adaptiveOptions(),
		Validate: func(e Tools, team runtime.Team, opts Options) error {
			cycle, err := adaptiveCycle(opts.Adaptive)
			if err != nil {
				return err
			}
			switch opts.Adaptive.Strategy {
			case "", StrategyErrorRate, StrategyPerformance, StrategyFeedback:
			default:
				return fmt.Errorf("%w: adaptive strategy %q is unknown (%s, %s, %s)", ErrInvalidConfig, opts.Adaptive.Strategy,
					StrategyErrorRate, StrategyPerformance, StrategyFeedback)
			}
			if s := opts.Adaptive.MaxSwitches; s < 0 || s > 10 {
				return fmt.Errorf("%w: adaptive max_switches %d is outside 0..10", ErrInvalidConfig, s)
			}
			if opts.Adaptive.MinScore < 0 || opts.Adaptive.MinScore > 1 || opts.Adaptive.TargetSeconds < 0 || opts.Adaptive.MaxDurationSeconds < 0 {
				return fmt.Errorf("%w: adaptive min_score must be in [0,1], target_seconds and max_duration_seconds >= 0", ErrInvalidConfig)
			}
			if h := opts.Adaptive.InitialFormation; h != "" && !slices.Contains(cycle, h) {
				return fmt.Errorf("%w: adaptive initial_formation_hint %q is not in the cycle (%s)", ErrInvalidConfig, h, strings.Join(cycle, ", "))
			}
			for _, m := range team.Members {
				if !m.Idempotent {
					return fmt.Errorf("%w: adaptive: member %q is not idempotent; adaptation may repeat work, so every member task must be", ErrInvalidConfig, m.ID)
				}
			}
			for _, name := range cycle {
				f, _ := Lookup(name)
				sub := team
				sub.Formation = name
				if f.Validate != nil {
					if err := f.Validate(e, sub, opts); err != nil {
						return fmt.Errorf("adaptive cycle formation %s: %w", name, err)
					}
				}
			}
			return nil
		},
		Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
			cycle, err := adaptiveCycle(opts.Adaptive)
			if err != nil {
				return runtime.TeamResult{}, err
			}
			cycle = startAt(cycle, opts.Adaptive.InitialFormation)
			begin := time.Now()
			strategy, minScore, maxSwitches := opts.Adaptive.strategy(), opts.Adaptive.minScore(), opts.Adaptive.maxSwitches()
			sub := opts
			sub.scoreCompletions = strategy == StrategyFeedback
			rs := newResults(team)
			var history []string
			var last runtime.TeamResult
			var score float64
			for switches := 0; ; switches++ {
				name := cycle[switches%len(cycle)]
				history = append(history, name)
				f, _ := Lookup(name)
				t := team
				t.Formation = name
				start := time.Now()
				res, err := f.Run(ctx, e, t, sub)
				if err != nil {
					return runtime.TeamResult{}, fmt.Errorf("adaptive attempt %d (%s): %w", switches+1, name, err)
				}
				for _, r := range res.Members {
					rs.add(r)
				}
				var reason string
				score, reason = adaptiveScore(strategy, res, time.Since(start), opts.Adaptive.targetSeconds())
				meta := map[string]string{"current_formation": name, "formation_history": strings.Join(history, ","),
					"switch_count": fmt.Sprint(switches), "score": fmt.Sprintf("%.4f", score), "strategy": strategy}
				for k, v := range res.Metadata {
					meta[name+"."+k] = v
				}
				last = res
				last.Members, last.Metadata = rs.list(), meta
				if reason != "" {
					// The strategy's evidence is missing (a reply without quality_score): fail, don't guess.
					meta["reason"] = reason
					last.Success = false
					return last, nil
				}
				if res.Success && score >= minScore {
					return last, nil
				}
				if switches >= maxSwitches {
					meta["reason"] = fmt.Sprintf("max_switches %d reached", maxSwitches)
					last.Success = false
					return last, nil
				}
				if limit := opts.Adaptive.MaxDurationSeconds; limit > 0 && time.Since(begin).Seconds() >= limit {
					meta["reason"] = fmt.Sprintf("max_duration_seconds %v reached", limit)
					last.Success = false
					return last, nil
				}
				next := cycle[(switches+1)%len(cycle)]
				why := "attempt failed"
				if res.Success {
					why = fmt.Sprintf("score %.4f below min_score %.4f", score, minScore)
				}
				if err := e.Emit(ctx, "", "", event.FormationSwitched{From: name, To: next, Reason: why,
					Score: score, Switch: switches + 1, Strategy: strategy}); err != nil {
					return runtime.TeamResult{}, fmt.Errorf("record formation_switched: %w", err)
				}
			}
		},
	}
}

// startAt returns cycle rotated to begin at the formation named first (adaptive's
// initial_formation_hint), a new slice; cycle itself when first is "" or not in it.
func startAt(cycle []string, first string) []string {
	i := slices.Index(cycle, first)
	if first == "" || i < 0 {
		return cycle
	}
	return append(slices.Clone(cycle[i:]), cycle[:i]...)
}

// adaptiveCycle returns the cycle, refusing unknown and adaptive (recursive) entries.
func adaptiveCycle(o AdaptiveOptions) ([]string, error) {
	cycle := o.Cycle
	if len(cycle) == 0 {
		cycle = DefaultAdaptiveCycle()
	}
	for _, name := range cycle {
		if name == "adaptive" {
			return nil, fmt.Errorf("%w: adaptive: a recursive adaptive cycle is rejected", ErrInvalidConfig)
		}
		if _, err := Lookup(name); err != nil {
			return nil, fmt.Errorf("%w: adaptive cycle: %v", ErrInvalidConfig, err)
		}
	}
	if slices.Contains(cycle, "") {
		return nil, fmt.Errorf("%w: adaptive cycle has an empty name", ErrInvalidConfig)
	}
	return cycle, nil
}

// adaptiveScore scores one attempt. reason is non-empty when the strategy's evidence is missing.
func adaptiveScore(strategy string, res runtime.TeamResult, elapsed time.Duration, target float64) (float64, string) {
	switch strategy {
	case StrategyPerformance:
		s := elapsed.Seconds()
		if s <= target {
			return 1, ""
		}
		return target / s, ""
	case StrategyFeedback:
		// Every completion reply carries its member's own quality_score, a failure's too
		// ({"status":"failed",...,"quality_score":0}); replies that are not completions (a
		// synthesis, a proposal) are asked for none. An attempt with no score at all has no
		// feedback: it scores 0 and the cycle adapts, it does not end the run.
		var sum float64
		n := 0
		for _, r := range res.Members {
			if r.ContractViolation == runtime.ContractCompletion {
				return 0, fmt.Sprintf("member %s did not return a valid quality_score: %s", r.MemberID, r.Error)
			}
			c, err := runtime.ParseCompletion(r.Output)
			if err != nil {
				continue // not a completion reply, or no reply at all
			}
			if c.QualityScore == nil {
				return 0, fmt.Sprintf("member %s returned no quality_score", r.MemberID)
			}
			sum += *c.QualityScore
			n++
		}
		if n == 0 {
			return 0, ""
		}
		return sum / float64(n), ""
	default:
		if len(res.Members) == 0 {
			return 0, ""
		}
		failed := 0
		for _, r := range res.Members {
			if !r.Success {
				failed++
			}
		}
		return 1 - float64(failed)/float64(len(res.Members)), ""
	}
}
