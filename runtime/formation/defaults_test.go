package formation

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// Every documented default (FORMATIONS.md, the formations' Doc), read from the registry's options:
// changing a default, or listing an option without documenting its default here, fails.
func TestDocumentedDefaultsAreTheRegistrys(t *testing.T) {
	capacity := map[string]string{"capacity_aware": "false", "capacity_declared": "0", "max_workers": "0"}
	ensemble := map[string]string{"ensemble_mode": "none", "ensemble_max_answer_chars": "8192"}
	conversation := map[string]string{"conversation_max_turns": "6", "transcript_max_chars": "32768"}
	with := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range append(ms, capacity) {
			maps.Copy(out, m)
		}
		return out
	}
	documented := map[string]map[string]string{
		"sequential":   with(),
		"pipeline":     with(),
		"hierarchical": with(),
		"parallel": with(ensemble, map[string]string{"parallel_member_retries": "0", "worktree_isolation": "false",
			"worktree_repo": "", "worktree_cleanup": "false"}),
		"consensus":             with(ensemble, map[string]string{"consensus_rounds": "3", "consensus_threshold": "0.7"}),
		"reflection":            with(map[string]string{"reflection_max_iterations": "3", "verdict_format": "json"}),
		"dynamic_router":        with(map[string]string{"routes": "none"}),
		"multi_level_hierarchy": with(map[string]string{"fanout": "2", "max_depth": "3", "split": "auto", "tree": "none"}),
		"adaptive": with(map[string]string{"adaptive_cycle": "sequential,hierarchical,consensus", "max_switches": "3",
			"adaptive_strategy": "error_rate", "min_score": "1", "target_seconds": "60", "initial_formation_hint": "none",
			"max_duration_seconds": "0"}),
		"group_chat": with(conversation),
		"handoff":    with(conversation),
		"debate":     with(conversation, map[string]string{"debate_rounds": "2"}),
	}
	if got, want := Names(), slices.Sorted(maps.Keys(documented)); !slices.Equal(got, want) {
		t.Fatalf("registry formations %v, documented %v", got, want)
	}
	for _, f := range Registry() {
		want := documented[f.Name]
		var listed []string
		for _, o := range f.Options {
			listed = append(listed, o.Name)
			t.Run(f.Name+"/"+o.Name, func(t *testing.T) {
				def, ok := want[o.Name]
				if !ok {
					t.Fatalf("option %s is listed but its default is not documented here", o.Name)
				}
				if o.Default != def {
					t.Errorf("registry default %q, documented %q", o.Default, def)
				}
				if eff := o.Effective(Options{}); eff != def {
					t.Errorf("a run with no options uses %q, documented %q", eff, def)
				}
				var set Options
				if err := o.Set(&set, o.Default); err != nil {
					t.Errorf("the default %q is refused: %v", o.Default, err)
				} else if eff := o.Effective(set); eff != def {
					t.Errorf("set to its default, the run uses %q", eff)
				}
				if o.Doc == "" || o.Range == "" {
					t.Errorf("doc %q range %q", o.Doc, o.Range)
				}
				if o.Durable && !f.Durable {
					t.Errorf("durable option of a formation that does not resume durably")
				}
			})
		}
		if missing := slices.DeleteFunc(slices.Sorted(maps.Keys(want)), func(n string) bool { return slices.Contains(listed, n) }); len(missing) > 0 {
			t.Errorf("%s: documented options %v are not in the registry", f.Name, missing)
		}
	}
}

// Values outside an option's range are refused as configuration errors; values inside are what the
// run uses.
func TestOptionSetChecksTheRange(t *testing.T) {
	cases := []struct {
		formation, option, value string
		ok                       bool
	}{
		{"consensus", "consensus_threshold", "0.5", false},
		{"consensus", "consensus_threshold", "0.51", true},
		{"consensus", "consensus_threshold", "1.01", false},
		{"consensus", "consensus_rounds", "0", false},
		{"reflection", "reflection_max_iterations", "11", false},
		{"reflection", "verdict_format", "prose", false},
		{"parallel", "parallel_member_retries", "4", false},
		{"parallel", "ensemble_mode", "vote", true},
		{"parallel", "ensemble_mode", "majority", false},
		{"adaptive", "adaptive_cycle", "sequential,adaptive", false},
		{"adaptive", "adaptive_cycle", "parallel,consensus", true},
		{"adaptive", "max_switches", "11", false},
		{"adaptive", "min_score", "0", false},
		{"multi_level_hierarchy", "split", "words", false},
		{"multi_level_hierarchy", "tree", `{"member_id":"root","children":[{"member_id":"a"}]}`, true},
		{"multi_level_hierarchy", "tree", `{"member_id":"root","kids":[]}`, false},
		{"dynamic_router", "routes", "review:Reviewer One,write:Exec a", true},
		{"dynamic_router", "routes", "review", false},
		{"debate", "debate_rounds", "x", false},
		{"group_chat", "conversation_max_turns", "7", true},
		{"sequential", "max_workers", "-1", false},
	}
	for _, c := range cases {
		t.Run(c.formation+"/"+c.option+"="+c.value, func(t *testing.T) {
			o, err := Option(c.formation, c.option)
			if err != nil {
				t.Fatal(err)
			}
			var opts Options
			err = o.Set(&opts, c.value)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
				t.Fatalf("Set: %v, want ok=%v", err, c.ok)
			}
			if c.ok && o.Effective(opts) != c.value {
				t.Fatalf("the run uses %q, set %q", o.Effective(opts), c.value)
			}
		})
	}
	if _, err := Option("group_chat", "debate_rounds"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("group_chat lists debate_rounds: %v", err)
	}
}
