package formation

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// OptionSpec describes one formation option as an operator sets it by name
// (`assay matrix run --formation-option NAME=VALUE`) and as `assay formations` lists it. The
// registry (Formation.Options) is the one list: what is listed is what can be set, and a test pins
// every documented default against it.
type OptionSpec struct {
	// Name is the option's name, e.g. "consensus_threshold".
	Name string
	// Doc says what the option decides, in the units of its value.
	Doc string
	// Default is the documented default as a value Set accepts; Effective(Options{}) returns it.
	Default string
	// Range is the accepted values: "0..3", "(0.5,1]", "line|count|auto", "JSON tree", ...
	Range string
	// Durable is true when the option belongs to a formation that resumes durably and its value is
	// bound to the run's checkpoint: a resume under another value is refused.
	Durable bool
	// Set parses value, checks it against Range and stores it in o. Errors wrap ErrInvalidConfig.
	Set func(o *Options, value string) error
	// Effective returns the value a run with o uses: the set value, else the default (the same
	// helper the formation's Run uses, so the listing cannot drift from the behaviour).
	Effective func(o Options) string
}

// Option returns formation name's option called option, or an error naming the known ones
// (ErrUnknownFormation for an unknown formation, ErrInvalidConfig for an unknown option).
func Option(name, option string) (OptionSpec, error) {
	f, err := Lookup(name)
	if err != nil {
		return OptionSpec{}, err
	}
	var names []string
	for _, o := range f.Options {
		if o.Name == option {
			return o, nil
		}
		names = append(names, o.Name)
	}
	return OptionSpec{}, fmt.Errorf("%w: %s has no option %q (its options: %s)", ErrInvalidConfig, name, option, strings.Join(names, ", "))
}

// StricterThanSeed returns where assay deliberately departs from the seed's contracts by being
// stricter, one sentence each (`assay formations` and docs/formations.md list them). The slice is
// new on every call.
func StricterThanSeed() []string {
	return []string{
		"parallel succeeds only when every member does",
		"member tools refuse absolute paths: every path is relative to the member's own directory",
		"reflection has only the JSON verdict format (verdict_format=json); there is no prose verdict parsing",
	}
}

// The effective values: every formation's Run reads its settings through these, and the registry's
// OptionSpec.Effective reports them.

func (c ConsensusOptions) rounds() int            { return or(c.Rounds, DefaultConsensusRounds) }
func (c ConsensusOptions) threshold() float64     { return or(c.Threshold, DefaultConsensusThreshold) }
func (r ReflectionOptions) iterations() int       { return or(r.MaxIterations, DefaultReflectionIterations) }
func (r ReflectionOptions) verdictFormat() string { return or(r.VerdictFormat, "json") }
func (c ConversationOptions) maxTurns() int       { return or(c.MaxTurns, DefaultMaxTurns) }
func (c ConversationOptions) transcriptMaxChars() int {
	return or(c.TranscriptMaxChars, DefaultTranscriptMaxChars)
}
func (c ConversationOptions) debateRounds() int  { return or(c.DebateRounds, DefaultDebateRounds) }
func (e EnsembleOptions) maxAnswerChars() int    { return or(e.MaxAnswerChars, DefaultMaxAnswerChars) }
func (h HierarchyOptions) fanout() int           { return or(h.Fanout, DefaultFanout) }
func (h HierarchyOptions) maxDepth() int         { return or(h.MaxDepth, DefaultMaxDepth) }
func (h HierarchyOptions) split() string         { return or(h.Split, "auto") }
func (a AdaptiveOptions) strategy() string       { return or(a.Strategy, StrategyErrorRate) }
func (a AdaptiveOptions) maxSwitches() int       { return or(a.MaxSwitches, DefaultMaxSwitches) }
func (a AdaptiveOptions) targetSeconds() float64 { return or(a.TargetSeconds, 60) }
func (a AdaptiveOptions) cycle() []string {
	if len(a.Cycle) == 0 {
		return DefaultAdaptiveCycle()
	}
	return a.Cycle
}

// minScore is 1 under error_rate (every member must succeed), 0.5 under the other strategies.
func (a AdaptiveOptions) minScore() float64 {
	if a.MinScore != 0 {
		return a.MinScore
	}
	if a.strategy() == StrategyErrorRate {
		return 1
	}
	return 0.5
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Option constructors.

func badOption(name, value, want string) error {
	return fmt.Errorf("%w: option %s=%q: want %s", ErrInvalidConfig, name, value, want)
}

func intOption(name, doc string, lo, hi int, def int, durable bool, field func(*Options) *int, eff func(Options) int) OptionSpec {
	rng := fmt.Sprintf("%d..%d", lo, hi)
	return OptionSpec{Name: name, Doc: doc, Default: strconv.Itoa(def), Range: rng, Durable: durable,
		Set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || n > hi {
				return badOption(name, v, "an integer in "+rng)
			}
			*field(o) = n
			return nil
		},
		Effective: func(o Options) string { return strconv.Itoa(eff(o)) }}
}

func floatOption(name, doc, rng string, def float64, durable bool, ok func(float64) bool, field func(*Options) *float64, eff func(Options) float64) OptionSpec {
	return OptionSpec{Name: name, Doc: doc, Default: fmtFloat(def), Range: rng, Durable: durable,
		Set: func(o *Options, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !ok(f) {
				return badOption(name, v, "a number in "+rng)
			}
			*field(o) = f
			return nil
		},
		Effective: func(o Options) string { return fmtFloat(eff(o)) }}
}

func enumOption(name, doc string, values []string, def string, durable bool, field func(*Options) *string, eff func(Options) string) OptionSpec {
	rng := strings.Join(values, "|")
	return OptionSpec{Name: name, Doc: doc, Default: def, Range: rng, Durable: durable,
		Set: func(o *Options, v string) error {
			if !slices.Contains(values, v) {
				return badOption(name, v, "one of "+rng)
			}
			*field(o) = v
			return nil
		},
		Effective: eff}
}

func boolOption(name, doc string, field func(*Options) *bool) OptionSpec {
	return OptionSpec{Name: name, Doc: doc, Default: "false", Range: "true|false",
		Set: func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return badOption(name, v, "true or false")
			}
			*field(o) = b
			return nil
		},
		Effective: func(o Options) string { return strconv.FormatBool(*field(&o)) }}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// The options, by what they configure.

func capacityOptions() []OptionSpec {
	return []OptionSpec{
		boolOption("capacity_aware", "admit concurrently running members through the provider's declared parallel capacity "+
			"for the model (or capacity_declared); missing or invalid capacity fails before anything runs",
			func(o *Options) *bool { return &o.Capacity.Aware }),
		intOption("capacity_declared", "an operator-declared capacity used instead of the provider's (needs capacity_aware; 0: ask the provider)",
			0, 1024, 0, false, func(o *Options) *int { return &o.Capacity.Declared }, func(o Options) int { return o.Capacity.Declared }),
		intOption("max_workers", "lowers the admission slots further (0: no further limit)", 0, 1024, 0, false,
			func(o *Options) *int { return &o.Capacity.MaxWorkers }, func(o Options) int { return o.Capacity.MaxWorkers }),
	}
}

func ensembleOptions() []OptionSpec {
	return []OptionSpec{
		OptionSpec{Name: "ensemble_mode", Doc: "ensemble aggregation of the candidates' answers (none: the formation's own rule)",
			Default: "none", Range: "none|" + strings.Join(ensembleModeNames(), "|"),
			Set: func(o *Options, v string) error {
				if v == "none" {
					o.Ensemble.Mode = ""
					return nil
				}
				if !slices.Contains(ensembleModeNames(), v) {
					return badOption("ensemble_mode", v, "none or one of "+strings.Join(ensembleModeNames(), ", "))
				}
				o.Ensemble.Mode = v
				return nil
			},
			Effective: func(o Options) string { return or(o.Ensemble.Mode, "none") }},
		intOption("ensemble_max_answer_chars", "longest ensemble answer in characters; longer is rejected (return an artifact reference)",
			1, 1<<20, DefaultMaxAnswerChars, false, func(o *Options) *int { return &o.Ensemble.MaxAnswerChars },
			func(o Options) int { return o.Ensemble.maxAnswerChars() }),
	}
}

func conversationOptions(debate bool) []OptionSpec {
	s := []OptionSpec{
		intOption("conversation_max_turns", "speaking turns before the conversation fails for running out", 1, 100, DefaultMaxTurns, false,
			func(o *Options) *int { return &o.Conversation.MaxTurns }, func(o Options) int { return o.Conversation.maxTurns() }),
		intOption("transcript_max_chars", "the transcript's total content in characters; exceeding it fails the run (no silent trimming)",
			1, 1<<24, DefaultTranscriptMaxChars, false,
			func(o *Options) *int { return &o.Conversation.TranscriptMaxChars }, func(o Options) int { return o.Conversation.transcriptMaxChars() }),
	}
	if debate {
		s = append(s, intOption("debate_rounds", "contributions of each debater before the judge, bounded by conversation_max_turns",
			1, 50, DefaultDebateRounds, false,
			func(o *Options) *int { return &o.Conversation.DebateRounds }, func(o Options) int { return o.Conversation.debateRounds() }))
	}
	return s
}

func parallelOptions() []OptionSpec {
	return []OptionSpec{
		intOption("parallel_member_retries", "runs of a failed idempotent member again; succeeded members and members paused for approval are never retried",
			0, MaxParallelMemberRetries, 0, false,
			func(o *Options) *int { return &o.Parallel.MemberRetries }, func(o Options) int { return o.Parallel.MemberRetries }),
		boolOption("worktree_isolation", "each member in its own git worktree of worktree_repo (working-directory isolation, not a sandbox)",
			func(o *Options) *bool { return &o.Isolation.Enabled }),
		OptionSpec{Name: "worktree_repo", Doc: "the git repository the isolated worktrees are made from", Default: "", Range: "a path",
			Set:       func(o *Options, v string) error { o.Isolation.Repo = v; return nil },
			Effective: func(o Options) string { return o.Isolation.Repo }},
		boolOption("worktree_cleanup", "remove the worktrees after the run (kept for inspection by default; nothing is merged)",
			func(o *Options) *bool { return &o.Isolation.Cleanup }),
	}
}

func consensusOptions() []OptionSpec {
	return []OptionSpec{
		intOption("consensus_rounds", "proposal rounds before the team fails without agreement", 1, 20, DefaultConsensusRounds, true,
			func(o *Options) *int { return &o.Consensus.Rounds }, func(o Options) int { return o.Consensus.rounds() }),
		floatOption("consensus_threshold", "fraction of proposers (failed ones counted) the largest agreeing group must reach; "+
			"at most 0.5 is refused, since two disagreeing halves would both reach it",
			"(0.5,1]", DefaultConsensusThreshold, true, func(f float64) bool { return f > 0.5 && f <= 1 },
			func(o *Options) *float64 { return &o.Consensus.Threshold }, func(o Options) float64 { return o.Consensus.threshold() }),
	}
}

func reflectionOptions() []OptionSpec {
	return []OptionSpec{
		intOption("reflection_max_iterations", "generate-then-critique iterations before the team fails unsatisfied", 1, 10,
			DefaultReflectionIterations, true,
			func(o *Options) *int { return &o.Reflection.MaxIterations }, func(o Options) int { return o.Reflection.iterations() }),
		enumOption("verdict_format", "the critic's reply format; only json exists (assay is stricter than the seed here)",
			[]string{"json"}, "json", true, func(o *Options) *string { return &o.Reflection.VerdictFormat },
			func(o Options) string { return o.Reflection.verdictFormat() }),
	}
}

func routerOptions() []OptionSpec {
	return []OptionSpec{{Name: "routes", Doc: "keyword routes to member names (MemberSpec.Name), matched case-insensitively as whole " +
		"words in sorted keyword order; unknown names are configuration errors (none: the domain-role selector)",
		Default: "none", Range: "keyword:Member Name[,keyword:Member Name...]",
		Set: func(o *Options, v string) error {
			if v == "none" {
				o.Router.Routes = nil
				return nil
			}
			routes := map[string]string{}
			for _, pair := range strings.Split(v, ",") {
				kw, name, ok := strings.Cut(pair, ":")
				kw, name = strings.TrimSpace(kw), strings.TrimSpace(name)
				if !ok || kw == "" || name == "" || strings.ContainsAny(kw, " \t") {
					return badOption("routes", v, "keyword:Member Name pairs separated by commas")
				}
				if _, dup := routes[kw]; dup {
					return badOption("routes", v, "each keyword once")
				}
				routes[kw] = name
			}
			o.Router.Routes = routes
			return nil
		},
		Effective: func(o Options) string {
			if len(o.Router.Routes) == 0 {
				return "none"
			}
			var pairs []string
			for kw, name := range o.Router.Routes {
				pairs = append(pairs, kw+":"+name)
			}
			slices.Sort(pairs)
			return strings.Join(pairs, ",")
		}}}
}

func hierarchyOptions() []OptionSpec {
	return []OptionSpec{
		intOption("fanout", "children per node of a tree built from member order", 1, 16, DefaultFanout, false,
			func(o *Options) *int { return &o.Hierarchy.Fanout }, func(o Options) int { return o.Hierarchy.fanout() }),
		intOption("max_depth", "deepest tree accepted, a lone root being depth 1; deeper trees fail before execution", 1, 16, DefaultMaxDepth, false,
			func(o *Options) *int { return &o.Hierarchy.MaxDepth }, func(o Options) int { return o.Hierarchy.maxDepth() }),
		enumOption("split", "how the team task is divided among the leaves (auto: line whenever the task has lines, else count)",
			[]string{"auto", "line", "count"}, "auto", false, func(o *Options) *string { return &o.Hierarchy.Split },
			func(o Options) string { return o.Hierarchy.split() }),
		{Name: "tree", Doc: `an explicit tree {"member_id":"root","children":[{"member_id":"a"}]} (none: built from member order)`,
			Default: "none", Range: "JSON tree",
			Set: func(o *Options, v string) error {
				if v == "none" {
					o.Hierarchy.Tree = nil
					return nil
				}
				var t TreeNode
				dec := json.NewDecoder(strings.NewReader(v))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&t); err != nil || t.MemberID == "" || dec.More() {
					return badOption("tree", v, `a JSON tree {"member_id":"root","children":[...]}`)
				}
				o.Hierarchy.Tree = &t
				return nil
			},
			Effective: func(o Options) string {
				if o.Hierarchy.Tree == nil {
					return "none"
				}
				b, _ := json.Marshal(o.Hierarchy.Tree)
				return string(b)
			}},
	}
}

func adaptiveOptions() []OptionSpec {
	return []OptionSpec{
		{Name: "adaptive_cycle", Doc: "the formations tried in turn (never adaptive itself)",
			Default: strings.Join(DefaultAdaptiveCycle(), ","), Range: "comma-separated formation names",
			Set: func(o *Options, v string) error {
				cycle := strings.Split(v, ",")
				if _, err := adaptiveCycle(AdaptiveOptions{Cycle: cycle}); err != nil {
					return fmt.Errorf("option adaptive_cycle=%q: %w", v, err)
				}
				o.Adaptive.Cycle = cycle
				return nil
			},
			Effective: func(o Options) string { return strings.Join(o.Adaptive.cycle(), ",") }},
		{Name: "initial_formation_hint", Doc: "the formation of adaptive_cycle the first attempt runs; the cycle continues from there (none: the cycle's first)",
			Default: "none", Range: "a formation of adaptive_cycle",
			Set: func(o *Options, v string) error {
				if v == "none" {
					o.Adaptive.InitialFormation = ""
					return nil
				}
				if _, err := Lookup(v); err != nil || v == "adaptive" {
					return badOption("initial_formation_hint", v, "a formation of adaptive_cycle")
				}
				o.Adaptive.InitialFormation = v
				return nil
			},
			Effective: func(o Options) string { return or(o.Adaptive.InitialFormation, "none") }},
		floatOption("max_duration_seconds", "wall time of the whole adaptive run, in seconds, after which a failing attempt ends the run instead of switching (0: no bound)",
			"[0,86400]", 0, false, func(f float64) bool { return f >= 0 && f <= 86400 },
			func(o *Options) *float64 { return &o.Adaptive.MaxDurationSeconds }, func(o Options) float64 { return o.Adaptive.MaxDurationSeconds }),
		intOption("max_switches", "formation switches before the run fails", 1, 10, DefaultMaxSwitches, false,
			func(o *Options) *int { return &o.Adaptive.MaxSwitches }, func(o Options) int { return o.Adaptive.maxSwitches() }),
		enumOption("adaptive_strategy", "how an attempt is scored: error_rate (1 - failed/ran), performance (min(1, target_seconds/elapsed)), "+
			"feedback (mean quality_score of the completion replies)",
			[]string{StrategyErrorRate, StrategyPerformance, StrategyFeedback}, StrategyErrorRate, false,
			func(o *Options) *string { return &o.Adaptive.Strategy }, func(o Options) string { return o.Adaptive.strategy() }),
		floatOption("min_score", "score below which a successful attempt still switches (default 1 under error_rate, 0.5 under the others)",
			"(0,1]", 1, false, func(f float64) bool { return f > 0 && f <= 1 },
			func(o *Options) *float64 { return &o.Adaptive.MinScore }, func(o Options) float64 { return o.Adaptive.minScore() }),
		floatOption("target_seconds", "the performance strategy's target wall time of an attempt, in seconds", "(0,86400]", 60, false,
			func(f float64) bool { return f > 0 && f <= 86400 },
			func(o *Options) *float64 { return &o.Adaptive.TargetSeconds }, func(o Options) float64 { return o.Adaptive.targetSeconds() }),
	}
}
