package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/internal/digest"
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

// ErrDuplicateCall is returned when a call id was already used by the same member with a
// different payload (SAFETY.md rule 2: a conflict, never the cached outcome of the first).
var ErrDuplicateCall = errors.New("tool call id reused with a different payload")

// The boundary's refusals of control commands.
var (
	// ErrNoSuchTransaction: an explicit transaction (call key) the boundary does not hold. It never
	// falls back to the current or latest one (rule 3).
	ErrNoSuchTransaction = errors.New("no such transaction")
	// ErrNotAwaitingApproval: Confirm, Revise or Cancel of a transaction that is running, done or
	// cancelled (rule 6: terminal states stay terminal; no second effect set).
	ErrNotAwaitingApproval = errors.New("transaction is not awaiting approval")
	// ErrStaleEvidence: a confirmation whose evidence (revision, payload hash) is missing or names
	// another version of the action than the one pending (rule 12). It is never filled in from the
	// current state.
	ErrStaleEvidence = errors.New("confirmation evidence is stale or incomplete")
	// ErrAmbiguousConfirmation: the confirmation's interpretation is ambiguous or below the
	// confidence threshold. Nothing executes; the question stays pending.
	ErrAmbiguousConfirmation = errors.New("confirmation is ambiguous")
)

// Hook transforms a call's canonical arguments after policy and before dispatch (a middleware that
// fills defaults, normalises paths). Its result is validated, re-decided by policy and checked
// against the approval again; an error refuses the call (enforcers fail closed).
type Hook func(ctx context.Context, c Call, args json.RawMessage) (json.RawMessage, error)

// Option configures a Boundary.
type Option func(*Boundary)

// WithPolicy sets the policy engine (default: policy.AllowAll with an empty digest).
func WithPolicy(e *policy.Engine) Option { return func(b *Boundary) { b.policy = e } }

// WithApprovals sets the approval store (default: a new one on the boundary's clock).
func WithApprovals(a *policy.Approvals) Option { return func(b *Boundary) { b.approvals = a } }

// WithBudget makes every dispatch, retry and reconciliation reserve one tool call from budget
// (default: no budget beyond the caller's own).
func WithBudget(bg *policy.Budget) Option { return func(b *Boundary) { b.budget = bg } }

// WithBackend sets the backend that reconciliation asks for receipts.
func WithBackend(be effect.Backend) Option { return func(b *Boundary) { b.backend = be } }

// WithRedactor sets the redaction projection for recorded arguments, results and errors.
func WithRedactor(r *policy.Redactor) Option { return func(b *Boundary) { b.redactor = r } }

// WithHooks appends argument hooks, run in order before dispatch.
func WithHooks(h ...Hook) Option { return func(b *Boundary) { b.hooks = append(b.hooks, h...) } }

// WithMode sets the run mode (default Live).
func WithMode(m Mode) Option { return func(b *Boundary) { b.mode = m } }

// WithReadonlyRetries lets a ReadOnly tool that fails with ErrTransient be dispatched up to n more
// times. No other access mode is ever retried, whatever the error says.
func WithReadonlyRetries(n int) Option { return func(b *Boundary) { b.retries = max(n, 0) } }

// WithClock sets the clock for approvals' expiry (default time.Now).
func WithClock(now func() time.Time) Option { return func(b *Boundary) { b.now = now } }

// WithApprovalTTL sets how long a granted approval stays valid when the grant names no expiry
// (default 15 minutes).
func WithApprovalTTL(d time.Duration) Option { return func(b *Boundary) { b.approvalTTL = d } }

// WithMinConfidence sets the confidence a confirmation's interpretation needs (default 0.9).
func WithMinConfidence(c float64) Option { return func(b *Boundary) { b.minConfidence = c } }

// Boundary is the one entry point every tool call passes. It is safe for concurrent use by the
// members of one team.
type Boundary struct {
	tools         map[string]Tool
	schemas       map[string]compiledSchema
	journal       Journal
	policy        *policy.Engine
	approvals     *policy.Approvals
	budget        *policy.Budget
	backend       effect.Backend
	ledger        *effect.Ledger
	redactor      *policy.Redactor
	hooks         []Hook
	mode          Mode
	retries       int
	now           func() time.Time
	approvalTTL   time.Duration
	minConfidence float64

	mu      sync.Mutex
	calls   map[string]*callRecord // by idempotency key
	paused  bool
	resumed chan struct{} // closed by Resume
	waiting int           // calls parked at a pause
}

// callRecord is one call's transaction: its snapshot, its revision and its latest outcome.
type callRecord struct {
	identity string
	done     chan struct{} // closed when the first delivery returned
	ctl      sync.Mutex    // serialises Confirm, Revise and Cancel of this call

	// Guarded by Boundary.mu.
	call     Call
	prep     prepared
	decision policy.Decision
	outcome  Outcome
}

// prepared is a validated call: its tool, canonical arguments and what policy sees.
type prepared struct {
	tool      Tool
	schema    compiledSchema
	canonical json.RawMessage
	hash      string
	paths     []string
	revision  int
}

// NewBoundary returns a boundary over the given tools (by name) that records through journal.
// Tools whose schema does not compile are refused at call time (CheckSchemas reports them early).
func NewBoundary(tools map[string]Tool, journal Journal, opts ...Option) *Boundary {
	b := &Boundary{tools: tools, journal: journal, calls: map[string]*callRecord{}, schemas: map[string]compiledSchema{},
		mode: Live, now: time.Now, approvalTTL: 15 * time.Minute, minConfidence: 0.9}
	for _, o := range opts {
		o(b)
	}
	for n, t := range tools {
		b.schemas[n] = compileSchema(t)
	}
	if b.policy == nil {
		b.policy = policy.NewEngine("", 0, policy.AllowAll())
	}
	if b.approvals == nil {
		b.approvals = policy.NewApprovals(b.now)
	}
	b.ledger = effect.NewLedger(b.backend, b.now)
	return b
}

// Definitions returns the tools among names that exist, in the order given, for sending to a model.
func (b *Boundary) Definitions(names []string) []Tool {
	var out []Tool
	for _, n := range names {
		if t, ok := b.tools[n]; ok {
			out = append(out, t)
		}
	}
	return out
}

// DefinitionsFor is Definitions restricted to ReadOnly tools when readOnly is set: a read-only
// member is not shown tools it cannot call.
func (b *Boundary) DefinitionsFor(names []string, readOnly bool) []Tool {
	var out []Tool
	for _, t := range b.Definitions(names) {
		if !readOnly || t.Access == ReadOnly {
			out = append(out, t)
		}
	}
	return out
}

// PolicyDigest returns the digest of the policy in force (the envelope's policy digest).
func (b *Boundary) PolicyDigest() string { return b.policy.Digest() }

// Budget returns the budget the boundary reserves tool calls from (WithBudget), nil when it has
// none. The runtime reserves provider tokens from the same budget before each provider request, so
// tool calls and tokens of every member share one set of limits. A policy.Budget is safe for
// concurrent use.
func (b *Boundary) Budget() *policy.Budget { return b.budget }

// Approvals returns the boundary's approval store (pending questions, for operators and APIs).
func (b *Boundary) Approvals() *policy.Approvals { return b.approvals }

// Effects returns the ledger's records in state (all when ""), ordered by idempotency key.
func (b *Boundary) Effects(state effect.State) []effect.Record { return b.ledger.List(state) }

// identityOf is what makes two deliveries the same call: tool and canonical payload (or the raw
// text when it is not JSON). The root is fixed per member.
func identityOf(c Call) string {
	if canon, err := canonicalArguments(c.Arguments); err == nil {
		sum := sha256.Sum256(canon)
		return c.Tool + "\x00" + hex.EncodeToString(sum[:])
	}
	return c.Tool + "\x00raw\x00" + c.Arguments
}

// Invoke runs one call through the boundary: it snapshots the call, refuses what is not allowed or
// not valid (recording the refusal), asks policy, records the intent, dispatches, and records the
// outcome. The returned Outcome is the recorded one. A repeated call id with identical content
// returns the call's current outcome (concurrent duplicates share one execution); with different
// content it returns ErrDuplicateCall and nothing executes. A call policy sends to an approver
// returns StateAwaitingApproval and runs only through Confirm. An error is returned only when the
// journal failed or the call conflicts; the call then did not dispatch unless the Outcome says so.
func (b *Boundary) Invoke(ctx context.Context, c Call) (Outcome, error) {
	// Rule 1: snapshot before any await; nothing the caller still holds changes what executes.
	c.Allowed = slices.Clone(c.Allowed)
	if c.Arguments == "" && c.Payload != nil {
		c.Arguments = string(c.Payload) // a copy: strings are immutable
	}
	c.Payload = nil
	key := c.Key()
	identity := identityOf(c)

	b.mu.Lock()
	if prev, ok := b.calls[key]; ok {
		b.mu.Unlock()
		if prev.identity != identity {
			return Outcome{}, fmt.Errorf("%w: call %s of member %s", ErrDuplicateCall, c.CallID, c.MemberID)
		}
		select {
		case <-prev.done:
			b.mu.Lock()
			defer b.mu.Unlock()
			return prev.outcome, nil
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
	rec := &callRecord{identity: identity, done: make(chan struct{}), call: c}
	b.calls[key] = rec
	b.mu.Unlock()

	out, err := b.propose(ctx, rec)
	close(rec.done)
	return out, err
}

// propose validates, decides and, when allowed, dispatches a new call.
func (b *Boundary) propose(ctx context.Context, rec *callRecord) (Outcome, error) {
	c := rec.call
	p, err := b.prepare(c, c.Arguments, 0)
	if err != nil {
		return b.refuse(ctx, rec, p, nil, err)
	}
	d := b.decide(ctx, c, p)
	switch d.Effect {
	case policy.Deny:
		return b.refuse(ctx, rec, p, &d, &policy.DeniedError{Decision: d})
	case policy.Ask:
		if b.mode != Observe {
			// An approval granted ahead of time (an approval file) may cover exactly this call;
			// dispatch consumes it. Anything else asks.
			if _, err := b.approvals.Check(b.binding(c, p, d)); err != nil {
				return b.askApproval(ctx, rec, p, d)
			}
		}
	}
	if err := b.ledger.Add(c.Key(), effect.Pending); err != nil {
		return b.refuse(ctx, rec, p, &d, err)
	}
	return b.dispatch(ctx, rec, p, d, nil)
}

// prepare canonicalises and validates a call's arguments against everything that does not depend on
// policy: the call id, the tool, the member's allowed tools, the schema and the paths.
func (b *Boundary) prepare(c Call, args string, revision int) (prepared, error) {
	p := prepared{revision: revision}
	t, known := b.tools[c.Tool]
	p.tool = t
	p.schema = b.schemas[c.Tool]
	canonical, cerr := canonicalArguments(args)
	if cerr == nil {
		p.canonical = canonical
		sum := sha256.Sum256(canonical)
		p.hash = hex.EncodeToString(sum[:])
	}
	switch {
	case c.CallID == "":
		return p, fmt.Errorf("%w: call id is empty", ErrInvalidArguments)
	case !known:
		return p, fmt.Errorf("unknown tool %q", c.Tool)
	case !slices.Contains(c.Allowed, c.Tool):
		return p, fmt.Errorf("tool %q is not in the member's allowed tools", c.Tool)
	case c.ReadOnly && t.Access != ReadOnly:
		return p, fmt.Errorf("tool %q is %s and the member is read-only", c.Tool, t.Access)
	case cerr != nil:
		return p, cerr
	}
	if err := p.schema.validate(canonical); err != nil {
		return p, err
	}
	paths, err := toolPaths(t, canonical)
	if err != nil {
		return p, err
	}
	p.paths = paths
	return p, nil
}

// toolPaths returns the paths a call touches: the tool's Paths, or its "path" argument.
func toolPaths(t Tool, canonical json.RawMessage) ([]string, error) {
	if t.Paths != nil {
		return t.Paths(canonical)
	}
	var a map[string]json.RawMessage
	if err := json.Unmarshal(canonical, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	raw, ok := a["path"]
	if !ok {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: field \"path\" is not a string", ErrInvalidArguments)
	}
	rel, err := CleanRelative(s)
	if err != nil {
		return nil, err
	}
	return []string{rel}, nil
}

func (b *Boundary) decide(ctx context.Context, c Call, p prepared) policy.Decision {
	return b.policy.Decide(ctx, policy.Request{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID,
		CallID: c.CallID, Tool: c.Tool, Access: string(p.tool.Access), Paths: p.paths, PayloadSHA256: p.hash,
		Arguments: p.canonical, Mode: string(b.mode)})
}

func (b *Boundary) binding(c Call, p prepared, d policy.Decision) policy.Binding {
	return policy.Binding{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID, CallID: c.CallID, Tool: c.Tool,
		PayloadSHA256: p.hash, SchemaSHA256: p.schema.sha256, Access: string(p.tool.Access), Scope: d.Scope, Revision: p.revision}
}

func (b *Boundary) intent(c Call, p prepared, d *policy.Decision) Intent {
	in := Intent{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID, CallID: c.CallID,
		IdempotencyKey: c.Key(), Tool: c.Tool, Access: p.tool.Access, PayloadSHA256: p.hash,
		SchemaSHA256: p.schema.sha256, Mode: b.modeLabel(), Revision: p.revision, Policy: d}
	if p.canonical != nil {
		in.Arguments = b.redactor.JSON(p.canonical)
	}
	return in
}

func (b *Boundary) modeLabel() Mode {
	if b.mode == Live {
		return ""
	}
	return b.mode
}

func (b *Boundary) outcomeFor(c Call, p prepared) Outcome {
	return Outcome{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID, CallID: c.CallID,
		IdempotencyKey: c.Key(), Tool: c.Tool, Mode: b.modeLabel(), Revision: p.revision}
}

// setOutcome stores rec's latest outcome.
func (b *Boundary) setOutcome(rec *callRecord, out Outcome) {
	b.mu.Lock()
	rec.outcome = out
	b.mu.Unlock()
}

// refuse records a call that stops before dispatch: an intent that says so, and a failed outcome.
func (b *Boundary) refuse(ctx context.Context, rec *callRecord, p prepared, d *policy.Decision, reason error) (Outcome, error) {
	c := rec.call
	in := b.intent(c, p, d)
	out := b.outcomeFor(c, p)
	out.State, out.Error, out.Source = StateFailed, b.redactor.String("refused before dispatch: "+reason.Error()), "refusal"
	b.setOutcome(rec, out)
	if err := b.journal.Intent(ctx, in); err != nil {
		return out, fmt.Errorf("record refused intent %s: %w", c.Key(), err)
	}
	if err := b.journal.Outcome(context.WithoutCancel(ctx), out); err != nil {
		return out, fmt.Errorf("record outcome %s: %w", c.Key(), err)
	}
	return out, nil
}

// askApproval records the pending question and returns StateAwaitingApproval.
func (b *Boundary) askApproval(ctx context.Context, rec *callRecord, p prepared, d policy.Decision) (Outcome, error) {
	c := rec.call
	key := c.Key()
	if _, exists := b.ledger.Get(key); !exists {
		if aerr := b.ledger.Add(key, effect.AwaitingApproval); aerr != nil {
			return b.refuse(ctx, rec, p, &d, aerr)
		}
	}
	b.approvals.Request(b.binding(c, p, d), d.Reason)
	b.mu.Lock()
	rec.prep, rec.decision = p, d
	b.mu.Unlock()
	out := b.outcomeFor(c, p)
	out.State, out.Source = StateAwaitingApproval, "approval"
	out.Error = b.redactor.String(fmt.Sprintf("awaiting approval (policy %s%s: %s)", d.Policy, ruleOf(d), d.Reason))
	b.setOutcome(rec, out)
	if err := b.journal.Intent(ctx, b.intent(c, p, &d)); err != nil {
		return out, fmt.Errorf("record intent %s: %w", key, err)
	}
	if err := b.journal.Outcome(context.WithoutCancel(ctx), out); err != nil {
		return out, fmt.Errorf("record outcome %s: %w", key, err)
	}
	return out, nil
}

func ruleOf(d policy.Decision) string {
	if d.Rule == "" {
		return ""
	}
	return " rule " + d.Rule
}

// dispatch runs the hooks, re-decides policy over the final arguments, checks the approval against
// them (when approved is non-nil), reserves budget, honours a pause, records the intent and
// dispatches. The effect is pending in the ledger on entry.
func (b *Boundary) dispatch(ctx context.Context, rec *callRecord, p prepared, d policy.Decision, approved *policy.Approval) (Outcome, error) {
	c := rec.call
	key := c.Key()
	cancelLedger := func() { _, _ = b.ledger.Apply(key, effect.Event{Kind: effect.Cancel}) }

	// Hooks see the validated arguments; what they return is validated and decided again.
	final := p
	if len(b.hooks) > 0 {
		args := slices.Clone(p.canonical)
		for i, h := range b.hooks {
			hc := c
			hc.Allowed = slices.Clone(c.Allowed)
			next, err := h(ctx, hc, slices.Clone(args))
			if err != nil {
				cancelLedger()
				return b.refuse(ctx, rec, p, &d, fmt.Errorf("hook %d failed: %w", i+1, err))
			}
			args = next
		}
		if !bytes.Equal(args, p.canonical) {
			np, err := b.prepare(c, string(args), p.revision)
			if err != nil {
				cancelLedger()
				return b.refuse(ctx, rec, np, &d, fmt.Errorf("arguments after hooks: %w", err))
			}
			final = np
			d = b.decide(ctx, c, final)
			if d.Effect == policy.Deny {
				cancelLedger()
				return b.refuse(ctx, rec, final, &d, &policy.DeniedError{Decision: d})
			}
		}
	}
	// The approval is checked against the final arguments, the current session and the current
	// policy scope (rule 5), and consumed: single use.
	var ref *ApprovalRef
	needsApproval := d.Effect == policy.Ask && b.mode != Observe
	if approved != nil || needsApproval {
		ap, err := b.approvals.Consume(b.binding(c, final, d))
		if err != nil {
			// The action changed since it was approved: the grant authorises nothing any more.
			b.approvals.Revoke(key)
			cancelLedger()
			return b.refuse(ctx, rec, final, &d, err)
		}
		ref = &ApprovalRef{Approver: ap.Approver, Source: ap.Source, ExpiresAt: ap.ExpiresAt}
		d.Disclose = ap.Disclose
	}

	b.mu.Lock()
	rec.prep, rec.decision = final, d
	b.mu.Unlock()
	out := b.outcomeFor(c, final)
	if d.Effect == policy.Ask && b.mode == Observe {
		out.PolicyNotEnforced = string(policy.Ask)
	}
	in := b.intent(c, final, &d)
	in.Approval, in.Dispatched, in.Attempt = ref, true, 1

	var reservation *policy.Reservation
	release := func() { reservation.Release() }
	var result string
	var runErr error
	for attempt := 1; ; attempt++ {
		// Rule 6: after every await, re-check that the action is still allowed.
		if err := b.waitIfPaused(ctx); err != nil {
			if attempt > 1 {
				break // the last attempt's outcome stands
			}
			cancelLedger()
			return b.refuse(ctx, rec, final, &d, fmt.Errorf("not dispatched: %w", err))
		}
		if b.budget != nil {
			purpose := "dispatch"
			if attempt > 1 {
				purpose = "retry"
			}
			r, err := b.budget.Reserve(c.MemberID, 1, 0, purpose)
			if err != nil {
				if attempt > 1 {
					break // the retry is not affordable: the last attempt's outcome stands
				}
				cancelLedger()
				return b.refuse(ctx, rec, final, &d, err)
			}
			reservation = r
		}
		in.Attempt = attempt
		if err := b.journal.Intent(ctx, in); err != nil {
			// Fail closed: no durable intent, no dispatch.
			release()
			if attempt > 1 {
				break
			}
			cancelLedger()
			return Outcome{}, fmt.Errorf("record intent %s: %w", key, err)
		}
		if attempt == 1 {
			// The intent is durable; a pause or cancellation that arrived meanwhile still stops
			// the dispatch.
			if err := b.gateDispatch(ctx, key); err != nil {
				release()
				out.State, out.Source = StateCancelled, "invocation"
				out.Error = "not dispatched: " + err.Error()
				return b.finish(ctx, rec, out)
			}
		}
		result, runErr = b.run(ctx, c, final)
		if runErr == nil && final.tool.Access != ReadOnly && b.mode != DryRun {
			out.Files = observeFiles(c.Root, final.paths)
		}
		reservation.Commit(new(int64)) // a tool dispatch spends no provider tokens
		out.Attempts = attempt
		if runErr != nil && final.tool.Access == ReadOnly && errors.Is(runErr, ErrTransient) && attempt <= b.retries && ctx.Err() == nil {
			continue
		}
		break
	}
	b.classify(&out, final.tool, result, runErr, ctx)

	ev := effect.Event{Kind: effect.Respond, To: effect.State(out.State)}
	if out.State != StateSucceeded {
		ev.Kind = effect.Raise
	}
	if st, err := b.ledger.Apply(key, ev); errors.Is(err, effect.ErrLate) {
		// An observation or reconciliation settled the effect while the invocation was awaiting:
		// the late response is evidence, not the outcome (rule 7).
		late := out.State
		if out.Error != "" {
			late += ": " + out.Error
		}
		out = b.current(rec)
		out.Note = b.redactor.String("late invocation response ignored (" + late + ")")
		out.Attempts = max(out.Attempts, 1)
		if string(st) != out.State {
			out.State = string(st)
		}
		return b.finish(ctx, rec, out)
	} else if err != nil {
		return out, fmt.Errorf("effect %s: %w", key, err)
	}
	if out.State == StateSucceeded {
		out.Disclosed = d.Disclose
		if !d.Disclose {
			sum := sha256.Sum256([]byte(out.Result))
			out.ResultSHA256 = hex.EncodeToString(sum[:])
			out.Result = "[result withheld: disclosure was not approved]"
		}
	}
	return b.finish(ctx, rec, out)
}

// run dispatches the tool once (or simulates it in dry_run).
func (b *Boundary) run(ctx context.Context, c Call, p prepared) (string, error) {
	if b.mode == DryRun && p.tool.Access != ReadOnly {
		return "", errSimulated
	}
	root, err := os.OpenRoot(c.Root)
	if err != nil {
		return "", fmt.Errorf("member directory %s: %w", c.Root, err)
	}
	defer root.Close()
	return p.tool.Run(context.WithValue(ctx, idempotencyKeyCtx{}, c.Key()), root, p.canonical)
}

// observeFiles returns the SHA-256 hex of each path's regular file under dir, "" for a path that is
// not a regular file (or cannot be read; a FIFO is not waited on); nil without paths. Paths are
// member-relative and rooted (os.Root), so nothing outside dir is read.
func observeFiles(dir string, paths []string) map[string]string {
	if len(paths) == 0 {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		out[p], _ = digest.FileIn(root, p)
	}
	return out
}

type idempotencyKeyCtx struct{}

// IdempotencyKey returns the idempotency key of the call a tool's Run is executing,
// "{run_id}:{member_id}:{call_id}", or "" outside a dispatch. A tool that sends an effect to a
// backend sends this key with it, so the backend's receipt can be found by reconciliation.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKeyCtx{}).(string)
	return k
}

var errSimulated = errors.New("simulated")

// classify turns a dispatch's result into an outcome (rule 8).
func (b *Boundary) classify(out *Outcome, t Tool, result string, runErr error, ctx context.Context) {
	out.Source = "invocation"
	switch {
	case errors.Is(runErr, errSimulated):
		out.State, out.Simulated = StateSucceeded, true
		out.Result = fmt.Sprintf("dry_run: %s (%s) was validated and recorded but not executed", t.Name, t.Access)
	case runErr == nil:
		out.State, out.Result = StateSucceeded, b.redactor.String(result)
	case t.Access != ReadOnly && (ctx.Err() != nil || errors.Is(runErr, ErrIndeterminate) || errors.Is(runErr, context.DeadlineExceeded)):
		// Dispatched and the response is lost or late: it may have committed. Never retried;
		// only reconciliation resolves it.
		out.State, out.Error, out.ReconciliationRequired = StateUnknown, b.redactor.String(runErr.Error()), true
	case ctx.Err() != nil:
		out.State, out.Error = StateCancelled, b.redactor.String(runErr.Error())
	default:
		out.State, out.Error = StateFailed, b.redactor.String(runErr.Error())
		out.Retryable = t.Access == ReadOnly
	}
}

// finish stores and records an outcome; evidence outlives the caller's context.
func (b *Boundary) finish(ctx context.Context, rec *callRecord, out Outcome) (Outcome, error) {
	b.setOutcome(rec, out)
	if err := b.journal.Outcome(context.WithoutCancel(ctx), out); err != nil {
		return out, fmt.Errorf("record outcome %s: %w", out.IdempotencyKey, err)
	}
	return out, nil
}

// Pause stops every call that has not yet been dispatched at its next checkpoint; calls already
// dispatched finish. It is idempotent.
func (b *Boundary) Pause() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.paused {
		b.paused = true
		b.resumed = make(chan struct{})
	}
}

// Resume lets paused calls continue: each re-checks and dispatches exactly once.
func (b *Boundary) Resume() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused {
		b.paused = false
		close(b.resumed)
	}
}

// Paused reports whether the boundary is paused and how many calls are parked at the pause.
func (b *Boundary) Paused() (paused bool, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused, b.waiting
}

// waitIfPaused parks the caller while the boundary is paused; ctx ending while parked is an error
// (the call is then not dispatched).
func (b *Boundary) waitIfPaused(ctx context.Context) error {
	for {
		b.mu.Lock()
		if !b.paused {
			b.mu.Unlock()
			return nil
		}
		ch := b.resumed
		b.waiting++
		b.mu.Unlock()
		select {
		case <-ch:
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		case <-ctx.Done():
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
			return fmt.Errorf("paused, and the caller stopped waiting: %w", ctx.Err())
		}
	}
}

// gateDispatch is the last checkpoint: under the boundary's lock, not paused, then the ledger's
// pending -> running transition (which fails for an effect cancelled meanwhile).
func (b *Boundary) gateDispatch(ctx context.Context, key string) error {
	for {
		if err := b.waitIfPaused(ctx); err != nil {
			_, _ = b.ledger.Apply(key, effect.Event{Kind: effect.Cancel})
			return err
		}
		b.mu.Lock()
		if b.paused {
			b.mu.Unlock()
			continue
		}
		_, err := b.ledger.Apply(key, effect.Event{Kind: effect.Dispatch})
		b.mu.Unlock()
		return err
	}
}

// canonicalArguments returns the RFC 8785 canonical form of a JSON object text.
func canonicalArguments(args string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace([]byte(args))
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: arguments are not a JSON object", ErrInvalidArguments)
	}
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("%w: arguments are not valid JSON", ErrInvalidArguments)
	}
	c, err := jcs.Transform(trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: canonicalize arguments: %v", ErrInvalidArguments, err)
	}
	return c, nil
}
