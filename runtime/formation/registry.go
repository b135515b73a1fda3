// Package formation holds the team formations, one file each, and the one registry the coordinator
// dispatches through. Contracts: ../shared/FORMATIONS.md.
//
// A formation is a descriptor (Formation): Name, Doc, Durable, an optional Validate run before
// anything executes, and Run. The coordinator (RunWith) validates the team and options, refuses
// resume requests a formation cannot honour, sets up capacity admission, and dispatches through
// Registry — the only dispatch path; the adaptive formation re-enters the registry for the
// formations of its cycle.
//
// Structured replies are decoded strictly (runtime.DecodeExact plus each contract's own rules);
// a violation fails the step with a warning event, with no fallback parsing and no retry.
//
// Events a formation emits besides the runtime's member events (payloads are JSON objects):
//
//	team_started        formation, members, durable, options
//	team_completed      formation, success, failed_members, metadata
//	member_throttled    limit, queued (a member waiting for an admission slot)
//	worktree_allocated  path (parallel isolation)
//	critic_verdict      iteration, verdict, feedback (reflection)
//	consensus_round     round, groups, largest, agreement
//	consensus_decision  consensus_achieved, decision, tie_breaker
//	router_selected     selected_member_id, method, keyword
//	member_spoke        sequence, content, done, handoff_to
//	member_handoff      source, target, sequence
//	judge_verdict       selected_member_id, verdict (debate)
//	ensemble_decision   mode, selected_member_id, vote_key, votes, answer
//	formation_switched  from, to, reason, score, switch
//	warning             warning (and what it is about)
package formation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/tool"
)

// Formation is a descriptor: adding a formation is adding one value to the registry, with its test.
type Formation struct {
	// Name is the canonical formation name (DESIGN.md vocabulary).
	Name string
	// Doc is a one-paragraph statement of the formation's contract.
	Doc string
	// Durable says whether the formation supports durable pause/resume; one that does not refuses a
	// resume request before executing anything.
	Durable bool
	// Options are the formation's own options, as operators set them by name; Registry appends
	// capacity admission's, which apply to every formation.
	Options []OptionSpec
	// Validate checks the team and options against the formation's configuration rules before
	// anything executes; nil when the coordinator's checks are all there is. Errors wrap
	// ErrInvalidConfig.
	Validate func(tools Tools, team runtime.Team, opts Options) error
	// Run executes the team. It returns an error only when the team could not run at all (invalid
	// configuration found late, recording failure, worktree allocation failure); member failures
	// and contract violations are reported in the TeamResult.
	Run func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error)
}

// Tools is what validation needs of an engine: the access mode of each tool it knows, false for a
// tool it does not. *runtime.Engine implements it.
type Tools interface {
	ToolAccess(name string) (tool.AccessMode, bool)
}

// ErrUnknownFormation is returned for a formation name not in the registry.
var ErrUnknownFormation = errors.New("unknown formation")

// ErrNotDurable is returned when a resume is requested for a formation (or an ensemble run) that
// cannot resume durably. Nothing has executed when it is returned.
var ErrNotDurable = errors.New("formation does not support durable resume")

// ErrResumeUnavailable is returned when a resume is requested of an engine that restores no
// checkpoint (runtime.EngineConfig.Durable with Restore set): there is nothing to resume from, and
// the coordinator does not pretend to resume by starting over. Nothing has executed.
var ErrResumeUnavailable = errors.New("durable resume needs an engine restoring a checkpoint")

// Resumable reports whether a team of formation name run with opts can be paused and resumed
// durably: a formation declared Durable, not in an ensemble mode. It is false for unknown names.
func Resumable(name string, opts Options) bool {
	f, err := Lookup(name)
	return err == nil && f.Durable && opts.Ensemble.Mode == ""
}

// ErrInvalidConfig is returned (wrapped, naming the problem) for a team or options a formation
// cannot run. Nothing has executed when it is returned.
var ErrInvalidConfig = errors.New("invalid formation configuration")

// Registry returns every registered formation, sorted by name. The slice is new on every call.
func Registry() []Formation {
	r := []Formation{sequential, pipeline, parallel, hierarchical, consensus, reflection,
		dynamicRouter, multiLevelHierarchy, adaptive(), groupChat, debate, handoff}
	for i := range r {
		r[i].Options = append(slices.Clip(r[i].Options), capacityOptions()...)
	}
	sort.Slice(r, func(i, j int) bool { return r[i].Name < r[j].Name })
	return r
}

// Names returns the registered formation names, sorted.
func Names() []string {
	var n []string
	for _, f := range Registry() {
		n = append(n, f.Name)
	}
	return n
}

// Lookup returns the formation with the given name, or ErrUnknownFormation naming the known ones.
func Lookup(name string) (Formation, error) {
	for _, f := range Registry() {
		if f.Name == name {
			return f, nil
		}
	}
	return Formation{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownFormation, name, strings.Join(Names(), ", "))
}

// Run is RunWith with default options.
func Run(ctx context.Context, e *runtime.Engine, team runtime.Team) (runtime.TeamResult, error) {
	return RunWith(ctx, e, team, Options{})
}

// RunWith is the coordinator. Before anything executes it looks the formation up, validates the
// team (runtime.Team.Validate), the options, the formation roles and their tools, and the
// formation's own rules; it refuses a resume request (ErrNotDurable for a formation or ensemble run
// that cannot resume, ErrResumeUnavailable for an engine restoring no checkpoint); with capacity-aware admission it
// obtains the capacity (runtime.ErrCapacityUnavailable when there is none). Only then does it emit
// team_started, dispatch through the registry, and emit team_completed. Errors before
// team_started mean nothing ran; member failures are in the TeamResult. Safe for concurrent use
// on distinct teams.
func RunWith(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
	f, err := checkOptions(team, opts)
	if err != nil {
		return runtime.TeamResult{}, err
	}
	if opts.Resume {
		switch {
		case !f.Durable:
			return runtime.TeamResult{}, fmt.Errorf("%w: %s (resume refused before executing anything)", ErrNotDurable, f.Name)
		case opts.Ensemble.Mode != "":
			return runtime.TeamResult{}, fmt.Errorf("%w: ensemble %s runs refuse checkpoint/resume (resume refused before executing anything)", ErrNotDurable, opts.Ensemble.Mode)
		case !e.Resuming():
			return runtime.TeamResult{}, fmt.Errorf("%w: %s; nothing was executed", ErrResumeUnavailable, f.Name)
		}
	}
	if err := checkTeam(e, f, team, opts); err != nil {
		return runtime.TeamResult{}, err
	}
	adm, err := newAdmission(ctx, e, opts.Capacity)
	if err != nil {
		return runtime.TeamResult{}, err
	}
	opts.admission = adm

	ids := make([]string, len(team.Members))
	for i, m := range team.Members {
		ids[i] = m.ID
	}
	if err := e.Emit(ctx, "", "", event.TeamStarted{Formation: f.Name, Members: ids, Durable: f.Durable,
		Options: opts.Summary()}); err != nil {
		return runtime.TeamResult{}, fmt.Errorf("record team_started: %w", err)
	}
	res, err := f.Run(ctx, e, team, opts)
	if err != nil {
		_ = e.Emit(ctx, "", "", event.TeamCompleted{Formation: f.Name, Success: false, Error: err.Error()})
		return res, err
	}
	res.Formation = f.Name
	var failed []string
	for _, m := range res.Members {
		if !m.Success {
			failed = append(failed, m.MemberID)
		}
	}
	sort.Strings(failed)
	if err := e.Emit(ctx, "", "", event.TeamCompleted{Formation: f.Name, Success: res.Success,
		FailedMembers: failed, Metadata: res.Metadata}); err != nil {
		return res, fmt.Errorf("record team_completed: %w", err)
	}
	return res, nil
}

// Check runs the configuration checks RunWith runs before anything executes, except those of a
// resume and of capacity (which ask the engine and the provider): the formation is registered
// (ErrUnknownFormation), team.Validate, the option ranges and their use, the formation roles and
// their tools' access modes (tools), and the formation's own Validate. Errors other than
// ErrUnknownFormation and team.Validate's wrap ErrInvalidConfig. It executes nothing.
func Check(tools Tools, team runtime.Team, opts Options) error {
	f, err := checkOptions(team, opts)
	if err != nil {
		return err
	}
	return checkTeam(tools, f, team, opts)
}

// checkOptions looks the formation up and validates the team and the option ranges and their use.
func checkOptions(team runtime.Team, opts Options) (Formation, error) {
	f, err := Lookup(team.Formation)
	if err != nil {
		return f, err
	}
	if err := team.Validate(); err != nil {
		return f, err
	}
	return f, opts.validate(f.Name)
}

// checkTeam validates the formation roles and their tools, then the formation's own rules.
func checkTeam(tools Tools, f Formation, team runtime.Team, opts Options) error {
	if err := validateRoles(tools, team); err != nil {
		return err
	}
	if f.Validate != nil {
		return f.Validate(tools, team, opts)
	}
	return nil
}

// Formation roles (MemberSpec.FormationRole). Roles that do not implement may only hold readonly
// tools and have no deliverables.
const (
	RoleSupervisor  = "supervisor"
	RoleGenerator   = "generator"
	RoleCritic      = "critic"
	RoleJudge       = "judge"
	RoleReviewer    = "reviewer"
	RoleRouter      = "router"
	RoleSynthesizer = "synthesizer"
	RoleCandidate   = "candidate"
)

var knownRoles = []string{"", RoleSupervisor, RoleGenerator, RoleCritic, RoleJudge, RoleReviewer, RoleRouter, RoleSynthesizer, RoleCandidate}

// implements reports whether a member may hold write-capable tools: not a member whose formation
// role does not implement (supervisor, critic, judge, reviewer, router, synthesizer), nor a member
// whose domain role is reviewer.
func implements(m runtime.MemberSpec) bool {
	switch m.FormationRole {
	case RoleSupervisor, RoleCritic, RoleJudge, RoleReviewer, RoleRouter, RoleSynthesizer:
		return false
	}
	return m.DomainRole != "reviewer"
}

// validateRoles checks formation roles are known, allowed tools exist, and members that do not
// implement hold only readonly tools.
func validateRoles(e Tools, team runtime.Team) error {
	for _, m := range team.Members {
		if !slices.Contains(knownRoles, m.FormationRole) {
			return fmt.Errorf("%w: member %q has unknown formation role %q (known: %s)", ErrInvalidConfig, m.ID, m.FormationRole,
				strings.Join(knownRoles[1:], ", "))
		}
		for _, name := range m.AllowedTools {
			access, ok := e.ToolAccess(name)
			if !ok {
				return fmt.Errorf("%w: member %q is allowed unknown tool %q", ErrInvalidConfig, m.ID, name)
			}
			if !implements(m) && access != tool.ReadOnly {
				return fmt.Errorf("%w: member %q (formation role %q, domain role %q) does not implement and may hold only readonly tools, not %s tool %q",
					ErrInvalidConfig, m.ID, m.FormationRole, m.DomainRole, access, name)
			}
		}
	}
	return nil
}

// failedSummary is the deterministic failed-member summary: failed member ids in id order with
// their errors, or "" when every member succeeded.
func failedSummary(results []runtime.MemberResult) string {
	var lines []string
	for _, r := range results {
		if !r.Success {
			lines = append(lines, fmt.Sprintf("- %s: %s", r.MemberID, r.Error))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Sort(lines)
	return "failed members:\n" + strings.Join(lines, "\n")
}

// withSummary appends the failed-member summary to output when there is one.
func withSummary(output string, results []runtime.MemberResult) string {
	s := failedSummary(results)
	switch {
	case s == "":
		return output
	case output == "":
		return s
	default:
		return output + "\n" + s
	}
}
