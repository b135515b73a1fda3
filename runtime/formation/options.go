package formation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

// Options configures one team run. The zero value is every formation's defaults (FORMATIONS.md).
// Options are read-only during a run; callbacks must be safe to call from the coordinator's
// goroutine.
type Options struct {
	// Resume requests a durable resume of a checkpointed run: the engine must restore its
	// checkpoint (runtime.DurableConfig.Restore), or ErrResumeUnavailable. Non-durable formations
	// and ensemble runs refuse it with ErrNotDurable. Both refusals come before anything executes.
	Resume bool

	Parallel     ParallelOptions
	Consensus    ConsensusOptions
	Reflection   ReflectionOptions
	Router       RouterOptions
	Hierarchy    HierarchyOptions
	Adaptive     AdaptiveOptions
	Conversation ConversationOptions
	Ensemble     EnsembleOptions
	Capacity     CapacityOptions
	Isolation    IsolationOptions

	// admission is the per-team-run slot pool, set by the coordinator.
	admission *admission
	// scoreCompletions makes completion contracts ask for quality_score (adaptive feedback).
	scoreCompletions bool
}

// ParallelOptions configures the parallel formation.
type ParallelOptions struct {
	// MemberRetries is parallel_member_retries, 0..3 (default 0): how many times a failed
	// idempotent member is run again. Succeeded and non-idempotent members are never retried.
	MemberRetries int
}

// MaxParallelMemberRetries bounds ParallelOptions.MemberRetries.
const MaxParallelMemberRetries = 3

// ConsensusOptions configures the consensus formation.
type ConsensusOptions struct {
	// Rounds is the maximum number of proposal rounds (default DefaultConsensusRounds).
	Rounds int
	// Threshold is the fraction of proposers the largest agreeing group must reach, in (0,1]
	// (default DefaultConsensusThreshold). Failed members count in the denominator.
	Threshold float64
}

// Consensus defaults (FORMATIONS.md).
const (
	DefaultConsensusRounds    = 3
	DefaultConsensusThreshold = 0.7
)

// ReflectionOptions configures the reflection formation.
type ReflectionOptions struct {
	// MaxIterations bounds generate-then-critique iterations, 1..10 (default 3).
	MaxIterations int
	// VerdictFormat is the critic's reply format; only "json" (the default) exists: the critic must
	// answer {"verdict":"satisfied"|"needs_work","feedback":"..."} exactly.
	VerdictFormat string
}

// DefaultReflectionIterations is ReflectionOptions.MaxIterations's default.
const DefaultReflectionIterations = 3

// RouterOptions configures dynamic_router.
type RouterOptions struct {
	// Routes maps a keyword of the team task to a member name (MemberSpec.Name). Names must be
	// unique in the team and are resolved to member ids before execution; an unknown name is a
	// configuration error. Keywords are matched case-insensitively as whole words, in sorted
	// keyword order; the first match routes.
	Routes map[string]string
}

// TreeNode is one node of an explicit multi_level_hierarchy tree:
// {"member_id":"root","children":[{"member_id":"a"}]}.
type TreeNode struct {
	MemberID string     `json:"member_id"`
	Children []TreeNode `json:"children,omitempty"`
}

// HierarchyOptions configures multi_level_hierarchy.
type HierarchyOptions struct {
	// Tree is an explicit tree; nil builds one from member order (breadth-first, Fanout children
	// per node).
	Tree *TreeNode
	// Fanout is the children per node of a tree built from member order (default 2).
	Fanout int
	// MaxDepth bounds the tree depth, a lone root being depth 1 (default 3).
	MaxDepth int
	// Split is how the team task is divided among the leaves: "line", "count" or "auto"
	// (default): line whenever the task has lines (holds a line break), else count.
	Split string
}

// Hierarchy defaults.
const (
	DefaultFanout   = 2
	DefaultMaxDepth = 3
)

// AdaptiveOptions configures the adaptive formation.
type AdaptiveOptions struct {
	// Cycle is the formation cycle (default sequential, hierarchical, consensus). It may not
	// contain adaptive.
	Cycle []string
	// MaxSwitches bounds formation switches, 1..10; 0 means the default 3.
	MaxSwitches int
	// Strategy is "error_rate" (default), "performance" or "feedback".
	Strategy string
	// MinScore is the score below which an attempt that succeeded still switches (defaults:
	// error_rate 1.0, performance and feedback 0.5).
	MinScore float64
	// TargetSeconds is the performance strategy's target wall time for an attempt (default 60).
	// Score = min(1, target / elapsed).
	TargetSeconds float64
	// InitialFormation is initial_formation_hint: the formation of Cycle the first attempt runs;
	// the cycle continues from there. "" starts at the cycle's first. A name not in the cycle is a
	// configuration error.
	InitialFormation string
	// MaxDurationSeconds bounds the whole adaptive run's wall time in seconds (0: no bound): once
	// it has passed, an attempt that failed or scored below min_score ends the run (failed, reason
	// "max_duration_seconds ... reached") instead of switching.
	MaxDurationSeconds float64
}

// DefaultAdaptiveCycle returns the adaptive formation's default cycle (FORMATIONS.md), a new slice
// on every call.
func DefaultAdaptiveCycle() []string { return []string{"sequential", "hierarchical", "consensus"} }

// DefaultMaxSwitches is the adaptive formation's default bound on formation switches.
const DefaultMaxSwitches = 3

// ConversationOptions configures group_chat, debate and handoff.
type ConversationOptions struct {
	// MaxTurns bounds speaking turns (default 6).
	MaxTurns int
	// TranscriptMaxChars bounds the transcript's total content length in characters (default
	// 32768); exceeding it fails the run instead of trimming.
	TranscriptMaxChars int
	// DebateRounds is how many times each debater may contribute before the judge (default 2),
	// bounded by MaxTurns.
	DebateRounds int
	// CandidateFilter (group_chat) returns the unique eligible speaker ids for the next turn.
	CandidateFilter func(Transcript) ([]string, error)
	// Selector (group_chat) picks one id among the candidates.
	Selector func(Transcript, []string) (string, error)
	// Terminate (group_chat) ends the chat when it returns true.
	Terminate func(Transcript) (bool, error)
}

// Conversation defaults (FORMATIONS.md).
const (
	DefaultMaxTurns           = 6
	DefaultTranscriptMaxChars = 32768
	DefaultDebateRounds       = 2
)

// EnsembleOptions selects ensemble aggregation, a mode of parallel or consensus.
type EnsembleOptions struct {
	// Mode is "" (no ensemble), "vote", "judge" or "synthesizer".
	Mode string
	// MaxAnswerChars bounds an answer in characters (default 8192).
	MaxAnswerChars int
}

// Ensemble modes and limits.
const (
	EnsembleVote          = "vote"
	EnsembleJudge         = "judge"
	EnsembleSynthesizer   = "synthesizer"
	DefaultMaxAnswerChars = 8192
)

// ensembleModeNames are the names of EnsembleModes, in order.
func ensembleModeNames() []string {
	var names []string
	for _, m := range EnsembleModes() {
		names = append(names, m.Name)
	}
	return names
}

// CapacityOptions configures capacity admission of concurrently running members.
type CapacityOptions struct {
	// Aware turns capacity-aware admission on: the capacity is Declared, or else the provider's
	// declared parallel capacity for the model; missing or invalid capacity fails the run before
	// anything executes.
	Aware bool
	// Declared is an operator-declared capacity (used instead of asking the provider), >= 1.
	Declared int
	// MaxWorkers lowers the number of slots further (0 = no further limit). Without Aware it is
	// the only limit.
	MaxWorkers int
}

// IsolationOptions configures working-directory isolation for parallel members.
type IsolationOptions struct {
	// Enabled gives each parallel member its own git worktree of Repo, detached at HEAD; the
	// member's Dir becomes the worktree. This is working-directory isolation, not a sandbox.
	Enabled bool
	// Repo is the git repository the worktrees are made from.
	Repo string
	// Dir is where worktrees are created (default Repo + ".worktrees"); each is Dir/<run>-<member>.
	Dir string
	// Cleanup removes the worktrees after the run; by default they are kept for inspection.
	// Nothing is ever merged back.
	Cleanup bool
}

// validate checks the formation-independent option ranges and that ensemble mode is used only
// with parallel or consensus.
func (o Options) validate(formation string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case o.Parallel.MemberRetries < 0 || o.Parallel.MemberRetries > MaxParallelMemberRetries:
		return bad("parallel_member_retries %d is outside 0..%d", o.Parallel.MemberRetries, MaxParallelMemberRetries)
	case o.Consensus.Rounds < 0:
		return bad("consensus rounds %d is negative", o.Consensus.Rounds)
	case o.Consensus.Threshold < 0 || o.Consensus.Threshold > 1:
		return bad("consensus threshold %v is outside (0.5,1]", o.Consensus.Threshold)
	case o.Consensus.Threshold != 0 && o.Consensus.Threshold <= 0.5:
		// Two disjoint groups could both reach it: a 1-1 split would count as agreement, its
		// winner chosen by key order.
		return bad("consensus threshold %v is at most 0.5: two disagreeing halves would both reach it; use a value in (0.5,1]", o.Consensus.Threshold)
	case o.Reflection.MaxIterations < 0 || o.Reflection.MaxIterations > 10:
		return bad("reflection max iterations %d is outside 1..10", o.Reflection.MaxIterations)
	case o.Reflection.VerdictFormat != "" && o.Reflection.VerdictFormat != "json":
		return bad("reflection verdict_format %q is not supported (only json)", o.Reflection.VerdictFormat)
	case o.Conversation.MaxTurns < 0 || o.Conversation.TranscriptMaxChars < 0 || o.Conversation.DebateRounds < 0:
		return bad("conversation limits must not be negative")
	case o.Ensemble.Mode != "" && !slices.Contains(ensembleModeNames(), o.Ensemble.Mode):
		return bad("ensemble mode %q is unknown (known: %s)", o.Ensemble.Mode, strings.Join(ensembleModeNames(), ", "))
	case o.Ensemble.Mode != "" && formation != "parallel" && formation != "consensus":
		return bad("ensemble mode %s is a mode of parallel or consensus, not of %s", o.Ensemble.Mode, formation)
	case o.Ensemble.MaxAnswerChars < 0:
		return bad("ensemble answer limit %d is negative", o.Ensemble.MaxAnswerChars)
	case o.Capacity.Declared < 0 || o.Capacity.MaxWorkers < 0:
		return bad("capacity values must not be negative")
	case o.Capacity.Declared > 0 && !o.Capacity.Aware:
		return bad("a declared capacity needs capacity-aware admission on")
	case o.Isolation.Enabled && formation != "parallel":
		return bad("working-directory isolation applies to parallel members, not to %s", formation)
	case o.Isolation.Enabled && o.Isolation.Repo == "":
		return bad("working-directory isolation needs a git repository")
	}
	return nil
}

// Summary is what team_started records of the options: the non-default settings, callbacks as
// their presence only. It is JSON-marshalable.
func (o Options) Summary() map[string]any {
	s := map[string]any{}
	if o.Parallel.MemberRetries > 0 {
		s["parallel_member_retries"] = o.Parallel.MemberRetries
	}
	if o.Ensemble.Mode != "" {
		s["ensemble_mode"] = o.Ensemble.Mode
	}
	if o.Capacity.Aware || o.Capacity.MaxWorkers > 0 {
		s["capacity"] = map[string]any{"aware": o.Capacity.Aware, "declared": o.Capacity.Declared, "max_workers": o.Capacity.MaxWorkers}
	}
	if o.Isolation.Enabled {
		s["isolation"] = map[string]any{"repo": o.Isolation.Repo, "cleanup": o.Isolation.Cleanup}
	}
	if o.Adaptive.Strategy != "" || len(o.Adaptive.Cycle) > 0 {
		s["adaptive"] = map[string]any{"cycle": o.Adaptive.Cycle, "strategy": o.Adaptive.Strategy, "max_switches": o.Adaptive.MaxSwitches}
	}
	if o.Conversation.CandidateFilter != nil || o.Conversation.Selector != nil || o.Conversation.Terminate != nil {
		s["conversation_callbacks"] = map[string]bool{"candidate_filter": o.Conversation.CandidateFilter != nil,
			"selector": o.Conversation.Selector != nil, "terminate": o.Conversation.Terminate != nil}
	}
	if len(o.Router.Routes) > 0 {
		s["routes"] = o.Router.Routes
	}
	// What decides a durable formation's course is part of what a run is bound to, so a resume
	// under other settings is refused (the reflection verdict format cannot change on resume).
	if o.Reflection.MaxIterations != 0 || o.Reflection.VerdictFormat != "" {
		s["reflection"] = map[string]any{"max_iterations": o.Reflection.MaxIterations, "verdict_format": o.Reflection.VerdictFormat}
	}
	if o.Consensus.Rounds != 0 || o.Consensus.Threshold != 0 {
		s["consensus"] = map[string]any{"rounds": o.Consensus.Rounds, "threshold": o.Consensus.Threshold}
	}
	if o.Hierarchy.Tree != nil {
		s["tree"] = o.Hierarchy.Tree
	}
	return s
}

// admission admits concurrently running members through a fixed number of slots (0 = unlimited).
type admission struct {
	limit int
	slots chan struct{}
}

// newAdmission builds the per-team-run slot pool: capacity-aware (declared or asked of the
// provider), lowered by MaxWorkers.
func newAdmission(ctx context.Context, e *runtime.Engine, c CapacityOptions) (*admission, error) {
	limit := 0
	if c.Aware {
		limit = c.Declared
		if limit == 0 {
			n, err := e.ParallelCapacity(ctx)
			if err != nil {
				return nil, fmt.Errorf("capacity-aware admission: %w", err)
			}
			limit = n
		}
	}
	if c.MaxWorkers > 0 && (limit == 0 || c.MaxWorkers < limit) {
		limit = c.MaxWorkers
	}
	a := &admission{limit: limit}
	if limit > 0 {
		a.slots = make(chan struct{}, limit)
	}
	return a, nil
}

// run runs fn for every member concurrently, admitted through the slots in configuration order:
// at the start of the round each member in turn takes a free slot or is queued, and every queued
// member emits member_throttled (carrying the limit) before the first of them waits; queued members
// then take slots in configuration order as they free. So which members wait is decided by the
// order and the slots free when the round starts, never by goroutine scheduling: with an empty
// pool of N slots and k members, exactly the members after the N-th wait (k-N of them). Results
// are in the order of members.
func (a *admission) run(ctx context.Context, e *runtime.Engine, team runtime.Team, members []runtime.MemberSpec,
	fn func(m runtime.MemberSpec) runtime.MemberResult) []runtime.MemberResult {
	if a == nil || a.slots == nil {
		return concurrently(members, fn)
	}
	results := make([]runtime.MemberResult, len(members))
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-a.slots }()
			results[i] = fn(members[i])
		}()
	}
	// Every slot is taken before any admitted member starts: a member that finished at once would
	// otherwise free its slot for a later member of the same round, and who waits would depend on
	// scheduling.
	var admitted, queued []int
	for i := range members {
		select {
		case a.slots <- struct{}{}:
			admitted = append(admitted, i)
		default:
			queued = append(queued, i)
		}
	}
	for _, i := range admitted {
		start(i)
	}
	for _, i := range queued {
		m := members[i]
		_ = e.Emit(ctx, m.ID, team.SessionID(m), event.MemberThrottled{Limit: a.limit,
			Warning: fmt.Sprintf("member %s queued: %d admission slot(s) in use", m.ID, a.limit)})
	}
	for _, i := range queued {
		select {
		case a.slots <- struct{}{}:
			start(i)
		case <-ctx.Done():
			m := members[i]
			results[i] = runtime.MemberResult{MemberID: m.ID, SessionID: team.SessionID(m), Turns: 1,
				Error: "cancelled while waiting for admission: " + ctx.Err().Error()}
		}
	}
	wg.Wait()
	return results
}

// admit runs fn for m once a slot is free; a member that has to wait first emits member_throttled
// carrying the limit. The slot is held only while fn runs: a caller must not wait for another
// admitted member inside fn (a supervisor admits only its own turn, never its wait for its
// members), or a pool smaller than the tree's depth would deadlock.
func (a *admission) admit(ctx context.Context, e *runtime.Engine, team runtime.Team, m runtime.MemberSpec,
	fn func(m runtime.MemberSpec) runtime.MemberResult) runtime.MemberResult {
	if a == nil || a.slots == nil {
		return fn(m)
	}
	select {
	case a.slots <- struct{}{}:
	default:
		_ = e.Emit(ctx, m.ID, team.SessionID(m), event.MemberThrottled{Limit: a.limit,
			Warning: fmt.Sprintf("member %s queued: %d admission slot(s) in use", m.ID, a.limit)})
		select {
		case a.slots <- struct{}{}:
		case <-ctx.Done():
			return runtime.MemberResult{MemberID: m.ID, SessionID: team.SessionID(m), Turns: 1,
				Error: "cancelled while waiting for admission: " + ctx.Err().Error()}
		}
	}
	defer func() { <-a.slots }()
	return fn(m)
}

// concurrently runs fn for every member on its own goroutine and returns the results in the order
// of members.
func concurrently(members []runtime.MemberSpec, fn func(m runtime.MemberSpec) runtime.MemberResult) []runtime.MemberResult {
	results := make([]runtime.MemberResult, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = fn(m)
		}()
	}
	wg.Wait()
	return results
}
