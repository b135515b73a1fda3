// Package event declares, once, every event type the runtime and the harness record in a run's
// trace, each with its payload as a Go type. The writer (runtime.Engine.Emit, the harness's sink),
// the acceptance checks, replay and the reports all use these types: an event type is a string in
// the evidence store only.
//
// A payload marshals to a JSON object (encoding/json, field tags below); its event type is
// Payload.EventType(). Decode reads a stored payload back into its type. Fields tagged omitempty
// are absent when they do not apply; every other field is always present (a JSON null where a
// value is unknown, never a zero standing for it).
package event

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/tool"
)

// Payload is an event payload: a struct of this package that knows its event type.
type Payload interface {
	// EventType is the event's type as stored, e.g. "consensus_round".
	EventType() string
}

// Event types, as stored in the evidence store's events.type column.
const (
	TypeTeamStarted        = "team_started"
	TypeTeamCompleted      = "team_completed"
	TypeMemberStarted      = "member_started"
	TypeMemberCompleted    = "member_completed"
	TypeMemberFailed       = "member_failed"
	TypeMemberRestored     = "member_restored"
	TypeMemberDeferred     = "member_deferred"
	TypeMemberPaused       = "member_paused"
	TypeMemberThrottled    = "member_throttled"
	TypeBudgetRefused      = "budget_refused"
	TypeProviderExchange   = "provider_exchange"
	TypeToolCall           = "tool_call"
	TypeToolResult         = "tool_result"
	TypeWarning            = "warning"
	TypeCriticVerdict      = "critic_verdict"
	TypeConsensusRound     = "consensus_round"
	TypeConsensusDecision  = "consensus_decision"
	TypeEnsembleDecision   = "ensemble_decision"
	TypeJudgeVerdict       = "judge_verdict"
	TypeRouterSelected     = "router_selected"
	TypeMemberSpoke        = "member_spoke"
	TypeMemberHandoff      = "member_handoff"
	TypeFormationSwitched  = "formation_switched"
	TypeWorktreeAllocated  = "worktree_allocated"
	TypeBoundaryConfigured = "boundary_configured"
	TypeCheckCompleted     = "check_completed"
	TypeCheckpoint         = "checkpoint"
	TypeRunResumed         = "run_resumed"
)

// Types returns every event type of this package, in the order above; a new slice on every call.
func Types() []string {
	return []string{TypeTeamStarted, TypeTeamCompleted, TypeMemberStarted, TypeMemberCompleted, TypeMemberFailed,
		TypeMemberRestored, TypeMemberDeferred, TypeMemberPaused, TypeMemberThrottled, TypeBudgetRefused,
		TypeProviderExchange, TypeToolCall, TypeToolResult, TypeWarning, TypeCriticVerdict, TypeConsensusRound,
		TypeConsensusDecision, TypeEnsembleDecision, TypeJudgeVerdict, TypeRouterSelected, TypeMemberSpoke,
		TypeMemberHandoff, TypeFormationSwitched, TypeWorktreeAllocated, TypeBoundaryConfigured, TypeCheckCompleted,
		TypeCheckpoint, TypeRunResumed, TypeReplayStarted, TypeReplayVerdict}
}

// Marshal returns p's JSON object, without HTML escaping (a '>' in a reply stays '>').
func Marshal(p Payload) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("event %s: marshal payload: %w", p.EventType(), err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode reads a stored payload of type typ into T. It returns an error when typ is not T's event
// type or the payload is not T's JSON object (unknown keys are allowed: a newer writer may add
// fields; a missing field keeps its zero value, so a reader that must tell "absent" from zero
// uses a pointer field).
func Decode[T Payload](typ string, raw json.RawMessage) (T, error) {
	var v T
	if want := v.EventType(); typ != want {
		return v, fmt.Errorf("event type %q is not %q", typ, want)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("%s payload: %w", typ, err)
	}
	return v, nil
}

// TeamStarted is recorded before a formation runs its members.
type TeamStarted struct {
	Formation string   `json:"formation"`
	Members   []string `json:"members"`
	Durable   bool     `json:"durable"`
	// Options is the formation options' summary (formation.Options.Summary).
	Options map[string]any `json:"options"`
}

// TeamCompleted is recorded when a formation returns: its claimed outcome. Error is set (and the
// other fields but Formation and Success empty) when the formation stopped with an error.
type TeamCompleted struct {
	Formation     string            `json:"formation"`
	Success       bool              `json:"success"`
	Error         string            `json:"error,omitempty"`
	FailedMembers []string          `json:"failed_members,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// MemberTurn is the payload shared by member_started, member_completed and member_failed: one
// invocation (turn) of a member.
type MemberTurn struct {
	Formation     string `json:"formation"`
	DomainRole    string `json:"domain_role"`
	FormationRole string `json:"formation_role,omitempty"`
	// Contract names the structured reply that ends the turn (runtime.Contract* names).
	Contract string `json:"contract"`
	// Invocation is the 1-based count of the member's turns in the team run.
	Invocation int    `json:"invocation"`
	Dir        string `json:"dir,omitempty"`
	// Output is the member's final reply text (member_completed).
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// ToolCalls and Requests count the turn's tool calls and provider requests so far.
	ToolCalls    int `json:"tool_calls"`
	Requests     int `json:"requests"`
	UsageUnknown int `json:"usage_unknown_responses"`
	// Resumed marks a turn continued from a checkpoint; Paused a turn that ended paused.
	Resumed bool `json:"resumed,omitempty"`
	Paused  bool `json:"paused,omitempty"`
}

// MemberStarted is recorded when a member's turn begins.
type MemberStarted struct{ MemberTurn }

// MemberCompleted is recorded when a member's turn ends with a reply that satisfied its contract.
type MemberCompleted struct{ MemberTurn }

// MemberFailed is recorded when a member's turn ends in failure (Error says why).
type MemberFailed struct{ MemberTurn }

// MemberRestored stands, in a resumed run, for a turn that ended before the resume, restored from
// the checkpoint.
type MemberRestored struct {
	Invocation  int    `json:"invocation"`
	Success     bool   `json:"success"`
	Output      string `json:"output"`
	Error       string `json:"error"`
	ToolCalls   int    `json:"tool_calls"`
	Requests    int    `json:"requests"`
	InputSHA256 string `json:"input_sha256"`
}

// MemberDeferred is recorded for a member that did not start because the run had paused.
type MemberDeferred struct {
	Invocation int    `json:"invocation"`
	Reason     string `json:"reason"`
}

// MemberPaused is recorded when a member stops at a call awaiting approval or reconciliation.
type MemberPaused struct {
	Invocation     int    `json:"invocation"`
	CallID         string `json:"call_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Tool           string `json:"tool"`
	State          string `json:"state"`
	Reason         string `json:"reason"`
}

// MemberThrottled is recorded when capacity admission queues a member.
type MemberThrottled struct {
	// Limit is the number of admission slots.
	Limit   int    `json:"limit"`
	Warning string `json:"warning"`
}

// BudgetRefused is recorded when a budget refused a provider request before it was sent.
type BudgetRefused struct {
	Request     string       `json:"request"`
	Error       string       `json:"error"`
	MemberUsage policy.Usage `json:"member_usage"`
	TeamUsage   policy.Usage `json:"team_usage"`
}

// ProviderExchange is one provider request of a member and its response: what replay and the
// checks need to re-derive everything from the recorded bytes.
type ProviderExchange struct {
	// Seq is the session's 0-based request sequence number.
	Seq int `json:"seq"`
	// Model is the model the response named (the requested model when it named none).
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Status int    `json:"status"`
	// RequestSHA256 is the SHA-256 hex of the request body bytes sent on the wire.
	RequestSHA256   string `json:"request_sha256"`
	RequestArtifact string `json:"request_artifact"`
	// ResponseSHA256 and ResponseArtifact are the digest of the stored raw response bytes.
	ResponseSHA256   string `json:"response_sha256"`
	ResponseArtifact string `json:"response_artifact"`
	// MessageArtifact is the digest of the parsed reply in canonical form, kept beside the raw
	// bytes so a report can show both what the wire said and what was understood.
	MessageArtifact string `json:"message_artifact,omitempty"`
	FinishReason    string `json:"finish_reason"`
	// Usage is what the runtime's client parsed; null when the response reported none.
	Usage     *provider.Usage `json:"usage"`
	ToolCalls int             `json:"tool_calls"`
	// Attempts is how many HTTP requests the client sent for this exchange (retries of 429/5xx).
	Attempts  int     `json:"attempts"`
	LatencyMS float64 `json:"latency_ms"` // milliseconds; volatile
	Error     string  `json:"error,omitempty"`
}

// ToolCall is a tool call's intent, recorded before dispatch (SAFETY.md rule 9).
type ToolCall struct{ tool.Intent }

// ToolResult is a tool call's outcome.
type ToolResult struct{ tool.Outcome }

// Warning records something that went wrong without an event of its own; the optional fields
// say where.
type Warning struct {
	Warning      string `json:"warning"`
	Contract     string `json:"contract,omitempty"`
	Reply        string `json:"reply,omitempty"`
	CallID       string `json:"call_id,omitempty"`
	Tool         string `json:"tool,omitempty"`
	RawArguments string `json:"raw_arguments,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
	Sequence     int    `json:"sequence,omitempty"`
	Stage        int    `json:"stage,omitempty"`
}

// CriticVerdict is a reflection critic's verdict as the runtime understood it.
type CriticVerdict struct {
	Iteration     int    `json:"iteration"`
	Verdict       string `json:"verdict"`
	Feedback      string `json:"feedback"`
	Generator     string `json:"generator"`
	VerdictFormat string `json:"verdict_format"`
}

// ConsensusRound is one consensus round's tally as the runtime computed it. Groups maps a group
// key ("key:<consensus_key>" or "reply:<complete reply>") to its members.
type ConsensusRound struct {
	Round     int                 `json:"round"`
	Groups    map[string][]string `json:"groups"`
	Largest   int                 `json:"largest"`
	Proposers int                 `json:"proposers"`
	Threshold float64             `json:"threshold"`
	Agreement bool                `json:"agreement"`
}

// ConsensusDecision is a consensus run's claimed decision. Decision is null when there was none.
type ConsensusDecision struct {
	ConsensusAchieved bool     `json:"consensus_achieved"`
	Rounds            int      `json:"rounds"`
	Decision          *string  `json:"decision"`
	AgreeingMembers   []string `json:"agreeing_members,omitempty"`
	TieBreaker        string   `json:"tie_breaker,omitempty"`
	TieBreakerFailed  string   `json:"tie_breaker_failed,omitempty"`
}

// EnsembleDecision is an ensemble mode's claimed decision. Decision is "none" (with Reason) when
// no decision was reached.
type EnsembleDecision struct {
	Mode             string         `json:"mode"`
	Votes            map[string]int `json:"votes"`
	Candidates       []string       `json:"candidates"`
	Decision         string         `json:"decision"`
	Reason           string         `json:"reason,omitempty"`
	SelectedMemberID string         `json:"selected_member_id,omitempty"`
	VoteKey          string         `json:"vote_key,omitempty"`
	Judge            string         `json:"judge,omitempty"`
	Synthesizer      string         `json:"synthesizer,omitempty"`
}

// JudgeVerdict is a debate judge's verdict as the runtime understood it.
type JudgeVerdict struct {
	SelectedMemberID string   `json:"selected_member_id"`
	Verdict          string   `json:"verdict"`
	Candidates       []string `json:"candidates"`
}

// RouterSelected is dynamic_router's selection: Method is "router", "route", "domain_role" or
// "fallback"; Keyword the route or role keyword that matched.
type RouterSelected struct {
	SelectedMemberID string `json:"selected_member_id"`
	Method           string `json:"method"`
	Keyword          string `json:"keyword"`
}

// MemberSpoke is one conversation turn as the runtime understood it; Sequence is 1-based.
type MemberSpoke struct {
	Sequence  int     `json:"sequence"`
	Content   string  `json:"content"`
	Done      bool    `json:"done"`
	HandoffTo *string `json:"handoff_to"`
}

// MemberHandoff is a handoff from Source to Target after turn Sequence.
type MemberHandoff struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	Sequence int    `json:"sequence"`
}

// FormationSwitched is an adaptive switch after attempt Switch (1-based).
type FormationSwitched struct {
	From     string  `json:"from"`
	To       string  `json:"to"`
	Reason   string  `json:"reason"`
	Score    float64 `json:"score"`
	Switch   int     `json:"switch"`
	Strategy string  `json:"strategy"`
}

// WorktreeAllocated records a member's git worktree (working-directory isolation).
type WorktreeAllocated struct {
	Path string `json:"path"`
	Repo string `json:"repo"`
}

// BoundaryConfigured records a case's execution boundary before its team runs.
type BoundaryConfigured struct {
	Mode               string `json:"mode"`
	PolicyFile         string `json:"policy_file"`
	PolicyDigest       string `json:"policy_digest"`
	ApprovalsFile      string `json:"approvals_file"`
	ApprovalsPreloaded int    `json:"approvals_preloaded"`
	MemberToolCalls    int64  `json:"member_tool_calls"`
	TeamToolCalls      int64  `json:"team_tool_calls"`
	MemberTokens       int64  `json:"member_tokens"`
	TeamTokens         int64  `json:"team_tokens"`
}

// CheckCompleted records an acceptance check's result.
type CheckCompleted struct {
	Check    string `json:"check"`
	Required bool   `json:"required"`
	Status   string `json:"status"`
	Detail   string `json:"detail"`
}

// Checkpoint records that a durable run's state (SHA-256 hex of its canonical JSON) was saved.
type Checkpoint struct {
	Turns       int    `json:"turns"`
	Paused      bool   `json:"paused"`
	StateSHA256 string `json:"state_sha256"`
}

// RunResumed records that this run continues another from its checkpoint.
type RunResumed struct {
	ResumesRunID        string   `json:"resumes_run_id"`
	Lineage             []string `json:"lineage"`
	TeamRunID           string   `json:"team_run_id"`
	CheckpointSeq       int64    `json:"checkpoint_seq"`
	CheckpointHash      string   `json:"checkpoint_hash"`
	CheckpointEventHash string   `json:"checkpoint_event_hash"`
	Turns               int      `json:"turns"`
	Pauses              []string `json:"pauses"`
}

func (TeamStarted) EventType() string        { return TypeTeamStarted }
func (TeamCompleted) EventType() string      { return TypeTeamCompleted }
func (MemberStarted) EventType() string      { return TypeMemberStarted }
func (MemberCompleted) EventType() string    { return TypeMemberCompleted }
func (MemberFailed) EventType() string       { return TypeMemberFailed }
func (MemberRestored) EventType() string     { return TypeMemberRestored }
func (MemberDeferred) EventType() string     { return TypeMemberDeferred }
func (MemberPaused) EventType() string       { return TypeMemberPaused }
func (MemberThrottled) EventType() string    { return TypeMemberThrottled }
func (BudgetRefused) EventType() string      { return TypeBudgetRefused }
func (ProviderExchange) EventType() string   { return TypeProviderExchange }
func (ToolCall) EventType() string           { return TypeToolCall }
func (ToolResult) EventType() string         { return TypeToolResult }
func (Warning) EventType() string            { return TypeWarning }
func (CriticVerdict) EventType() string      { return TypeCriticVerdict }
func (ConsensusRound) EventType() string     { return TypeConsensusRound }
func (ConsensusDecision) EventType() string  { return TypeConsensusDecision }
func (EnsembleDecision) EventType() string   { return TypeEnsembleDecision }
func (JudgeVerdict) EventType() string       { return TypeJudgeVerdict }
func (RouterSelected) EventType() string     { return TypeRouterSelected }
func (MemberSpoke) EventType() string        { return TypeMemberSpoke }
func (MemberHandoff) EventType() string      { return TypeMemberHandoff }
func (FormationSwitched) EventType() string  { return TypeFormationSwitched }
func (WorktreeAllocated) EventType() string  { return TypeWorktreeAllocated }
func (BoundaryConfigured) EventType() string { return TypeBoundaryConfigured }
func (CheckCompleted) EventType() string     { return TypeCheckCompleted }
func (Checkpoint) EventType() string         { return TypeCheckpoint }
func (RunResumed) EventType() string         { return TypeRunResumed }
