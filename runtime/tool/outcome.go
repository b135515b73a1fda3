package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// Outcome states of an effect (DESIGN.md vocabulary). Terminal states never regress.
const (
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateUnknown   = "unknown"
	StateCancelled = "cancelled"
	// StateAwaitingApproval: policy asked for an approval; nothing was dispatched. The call runs
	// only through Confirm with an exact approval.
	StateAwaitingApproval = "awaiting_approval"
)

// Mode is the run mode (DESIGN.md envelope). Results of dry_run and observe are labelled as such
// everywhere and never count as live effect evidence (SAFETY.md rule 15).
type Mode string

// The run modes.
const (
	Live Mode = "live"
	// DryRun validates, decides and records every call but simulates every tool that is not
	// readonly: nothing is written or executed.
	DryRun Mode = "dry_run"
	// Observe records policy decisions without enforcing approvals: an ask is recorded and the call
	// proceeds. Deny still denies; budgets and identity still hold.
	Observe Mode = "observe"
)

// Call is one proposed tool call, as a model or a typed API proposed it.
type Call struct {
	RunID     string
	MemberID  string
	SessionID string
	// CallID is the id the model gave the call (or the caller's id). Required.
	CallID string
	// Tool is the tool name.
	Tool string
	// Arguments is the JSON arguments text exactly as proposed.
	Arguments string
	// Payload is the arguments as JSON bytes, for typed API callers; used when Arguments is empty.
	// Invoke copies it before anything else, so the caller changing the bytes later changes nothing.
	Payload json.RawMessage
	// Root is the member's directory; every path argument is resolved inside it.
	Root string
	// Allowed is the member's allowed tool names; a tool not in it is refused.
	Allowed []string
	// ReadOnly restricts the member to ReadOnly tools whatever Allowed says (reviewers by default).
	ReadOnly bool
}

// Key returns the call's idempotency key, "{run_id}:{member_id}:{call_id}".
func (c Call) Key() string { return c.RunID + ":" + c.MemberID + ":" + c.CallID }

// Intent is the record written before dispatch (SAFETY.md rule 9).
type Intent struct {
	RunID     string `json:"run_id"`
	MemberID  string `json:"member_id"`
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	// IdempotencyKey is "{run_id}:{member_id}:{call_id}": namespaced by the run, so two runtime
	// instances never produce the same key (SAFETY.md rule 2).
	IdempotencyKey string     `json:"idempotency_key"`
	Tool           string     `json:"tool"`
	Access         AccessMode `json:"access"`
	// Arguments is the RFC 8785 canonical form of the arguments, passed through the redaction
	// projection (empty when they were not valid JSON).
	Arguments json.RawMessage `json:"arguments"`
	// PayloadSHA256 is the SHA-256 hex (64 chars) of the canonical arguments before redaction.
	PayloadSHA256 string `json:"payload_sha256"`
	// SchemaSHA256 is the SHA-256 hex of the tool's canonical argument schema.
	SchemaSHA256 string `json:"schema_sha256,omitempty"`
	// Dispatched is false when the call was refused before dispatch (unknown tool, not allowed,
	// invalid arguments, denied) or is waiting for an approval: the intent is still recorded so the
	// refusal or the question is evidence.
	Dispatched bool `json:"dispatched"`
	// Mode is the run mode ("" for live).
	Mode Mode `json:"mode,omitempty"`
	// Revision counts revisions of a proposal awaiting approval (0 for the first).
	Revision int `json:"revision"`
	// Attempt is 1 for the first dispatch, more for automatic retries of readonly tools.
	Attempt int `json:"attempt,omitempty"`
	// Policy is the decision that let the call proceed (or refused it), nil when none was made.
	Policy *policy.Decision `json:"policy,omitempty"`
	// Approval names the approval the dispatch consumed, nil when none was needed.
	Approval *ApprovalRef `json:"approval,omitempty"`
}

// ApprovalRef is what an intent records of the approval it used.
type ApprovalRef struct {
	Approver  string    `json:"approver"`
	Source    string    `json:"source"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Outcome is the record written after the call ends (or stops before dispatch).
type Outcome struct {
	RunID          string `json:"run_id"`
	MemberID       string `json:"member_id"`
	SessionID      string `json:"session_id"`
	CallID         string `json:"call_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Tool           string `json:"tool"`
	// State is succeeded, failed, unknown, cancelled or awaiting_approval.
	State string `json:"state"`
	// Result is what the tool returned (the text the model sees on success), redacted; a
	// placeholder when disclosure was not granted.
	Result string `json:"result"`
	// Error is the failure text (redacted), "" on success.
	Error string `json:"error"`
	// ReconciliationRequired is true for unknown outcomes: the effect may have committed.
	ReconciliationRequired bool `json:"reconciliation_required"`
	// Retryable is true only for a failure of a readonly tool; never for an effect that may have
	// committed.
	Retryable bool `json:"retryable"`
	// Mode is the run mode ("" for live); Simulated is true when dry_run did not execute the tool.
	Mode      Mode `json:"mode,omitempty"`
	Simulated bool `json:"simulated,omitempty"`
	// Disclosed is false when the result was withheld from the member; ResultSHA256 is then the
	// SHA-256 hex of the (redacted) result that was withheld.
	Disclosed    bool   `json:"disclosed"`
	ResultSHA256 string `json:"result_sha256,omitempty"`
	// Attempts counts dispatches (more than 1 only for retried readonly tools).
	Attempts int `json:"attempts"`
	// Source says what produced this outcome: "invocation", "reconciliation", "operator",
	// "recovery", "approval" (awaiting or rejected), "refusal".
	Source string `json:"source"`
	// Receipt is the backend's receipt that resolved an unknown effect.
	Receipt *effect.Receipt `json:"receipt,omitempty"`
	// Note is an operator's note on a reconciliation decision.
	Note string `json:"note,omitempty"`
	// PolicyNotEnforced is set in observe mode when policy asked for an approval that was not
	// required: the decision that would have applied.
	PolicyNotEnforced string `json:"policy_not_enforced,omitempty"`
	// Revision is the proposal revision this outcome is for.
	Revision int `json:"revision"`
	// Files observes the world after a succeeded call of a tool that is not readonly and touches
	// paths: each touched path (member-relative) with the SHA-256 hex of the regular file there
	// right after the call, or "" when there is none (deleted, a directory). It is what ties a
	// file on disk to the effect that wrote it; nil for every other outcome.
	Files map[string]string `json:"files,omitempty"`
}

// Journal records intents and outcomes durably. Intent must return only after the record is
// durable; an Intent error stops the dispatch (fail closed).
type Journal interface {
	Intent(ctx context.Context, in Intent) error
	Outcome(ctx context.Context, out Outcome) error
}
