package formation

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestAdaptiveSwitchesWhenAnAttemptFails(t *testing.T) {
	// a's first request fails: sequential fails; hierarchical (a supervises b) succeeds.
	e, sink, _ := setup(t, reference.Fault{Member: "a", Turn: 0, Kind: reference.FaultHTTP500})
	res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{})
	if !res.Success || res.Metadata["current_formation"] != "hierarchical" || res.Metadata["formation_history"] != "sequential,hierarchical" ||
		res.Metadata["switch_count"] != "1" || res.Metadata["score"] != "1.0000" || res.Metadata["strategy"] != "error_rate" {
		t.Fatalf("%+v", res)
	}
	sw := sink.ofType("formation_switched")
	if len(sw) != 1 || payload(t, sw[0])["from"] != "sequential" || payload(t, sw[0])["to"] != "hierarchical" {
		t.Fatalf("switch events %v", sw)
	}
	if a := byID(res)["a"]; a.Turns != 2 || !a.Success {
		t.Fatalf("a's attempts not accumulated: %+v", a)
	}
}

func TestAdaptiveFeedbackStrategy(t *testing.T) {
	e, _, _ := setup(t)
	res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{Strategy: StrategyFeedback}})
	if !res.Success || res.Metadata["score"] != "0.9000" || res.Metadata["current_formation"] != "sequential" {
		t.Fatalf("%+v", res)
	}
	// A score below min_score switches.
	e2, _, _ := setup(t)
	res = mustRun(t, e2, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{Strategy: StrategyFeedback,
		MinScore: 0.95, Cycle: []string{"sequential", "parallel"}, MaxSwitches: 1}})
	if res.Success || res.Metadata["formation_history"] != "sequential,parallel" || !strings.Contains(res.Metadata["reason"], "max_switches") {
		t.Fatalf("%+v", res)
	}
	for name, reply := range map[string]string{
		"score missing":      `{"status":"done","files":[]}`,
		"score out of range": `{"status":"done","files":[],"quality_score":1.5}`,
		"score not a number": `{"status":"done","files":[],"quality_score":"high"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("a", 1, reply))
			res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{Strategy: StrategyFeedback}})
			wantViolation(t, sink, res, "a", "")
			// The run fails outright: no switch to another formation on missing evidence.
			if len(sink.ofType("formation_switched")) != 0 || !strings.Contains(res.Metadata["reason"], "quality_score") {
				t.Fatalf("switched instead of failing: %+v", res.Metadata)
			}
		})
	}
}

// Under the feedback strategy an attempt adapts rather than ends: a worker's failure reply counts
// with its own quality_score, and an attempt with no completion reply (a consensus) has no feedback
// and scores 0. Both ended the run with "no member returned a quality_score" (issue 22 defect 1).
func TestAdaptiveFeedbackAdaptsOnFailuresAndMissingFeedback(t *testing.T) {
	t.Run("a failed worker's score", func(t *testing.T) {
		// hierarchical: a supervises, b is the only worker and fails with quality_score 0.
		e, sink, _ := setup(t, replace("b", 1, `{"status":"failed","error":"cannot","quality_score":0}`))
		res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{Strategy: StrategyFeedback,
			Cycle: []string{"hierarchical", "sequential"}}})
		if !res.Success || res.Metadata["formation_history"] != "hierarchical,sequential" {
			t.Fatalf("%+v", res.Metadata)
		}
		if sw := sink.ofType("formation_switched"); len(sw) != 1 || payload(t, sw[0])["score"] != float64(0) {
			t.Fatalf("switch events %v", sw)
		}
	})
	t.Run("no feedback", func(t *testing.T) {
		e, sink, _ := setup(t)
		res := mustRun(t, e, build(t, "adaptive", talker("a"), talker("b")), Options{Adaptive: AdaptiveOptions{Strategy: StrategyFeedback,
			Cycle: []string{"consensus", "parallel"}, MaxSwitches: 1}})
		if len(sink.ofType("formation_switched")) != 1 || strings.Contains(res.Metadata["reason"], "quality_score") {
			t.Fatalf("the consensus attempt did not adapt: %+v", res.Metadata)
		}
	})
}

func TestAdaptiveConfiguration(t *testing.T) {
	e, sink, _ := setup(t)
	cases := []struct {
		name string
		opts AdaptiveOptions
		want string
	}{
		{"recursive", AdaptiveOptions{Cycle: []string{"sequential", "adaptive"}}, "recursive"},
		{"unknown formation", AdaptiveOptions{Cycle: []string{"sequential", "swarm"}}, "unknown formation"},
		{"unknown strategy", AdaptiveOptions{Strategy: "vibes"}, "strategy"},
		{"too many switches", AdaptiveOptions{MaxSwitches: 11}, "max_switches"},
		{"cycle formation refuses the team", AdaptiveOptions{Cycle: []string{"reflection"}}, "reflection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantConfigError(t, e, sink, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: c.opts}, c.want)
		})
	}
	nonIdem := writer("b")
	nonIdem.Idempotent = false
	wantConfigError(t, e, sink, build(t, "adaptive", writer("a"), nonIdem), Options{}, "not idempotent")
}

// initial_formation_hint starts the cycle at the hinted formation (the seed's contract); a hint
// outside the cycle is a configuration error.
func TestAdaptiveInitialFormationHint(t *testing.T) {
	e, sink, _ := setup(t, reference.Fault{Member: "a", Turn: 0, Kind: reference.FaultHTTP500})
	// hierarchical first: a supervises, its first request fails, so the cycle moves on to consensus.
	res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{InitialFormation: "hierarchical"}})
	if h := res.Metadata["formation_history"]; !strings.HasPrefix(h, "hierarchical,consensus") {
		t.Fatalf("history %q, want it to start at the hint", h)
	}
	if sw := sink.ofType("formation_switched"); len(sw) == 0 || payload(t, sw[0])["from"] != "hierarchical" {
		t.Fatalf("switch events %v", sw)
	}
	e2, sink2, _ := setup(t)
	wantConfigError(t, e2, sink2, build(t, "adaptive", writer("a"), writer("b")),
		Options{Adaptive: AdaptiveOptions{Cycle: []string{"sequential", "parallel"}, InitialFormation: "consensus"}}, "initial_formation_hint")
}

// max_duration_seconds ends the run at a failing attempt once the wall time has passed, instead of
// switching again.
func TestAdaptiveMaxDuration(t *testing.T) {
	e, sink, _ := setup(t, reference.Fault{Member: "a", Turn: 0, Kind: reference.FaultHTTP500})
	res := mustRun(t, e, build(t, "adaptive", writer("a"), writer("b")), Options{Adaptive: AdaptiveOptions{MaxDurationSeconds: 1e-9}})
	if res.Success || res.Metadata["formation_history"] != "sequential" || !strings.Contains(res.Metadata["reason"], "max_duration_seconds") {
		t.Fatalf("%+v", res.Metadata)
	}
	if n := len(sink.ofType("formation_switched")); n != 0 {
		t.Fatalf("%d switches after the duration passed", n)
	}
}
