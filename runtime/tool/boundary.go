package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

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
	nextSeq uint64                 // the seq the next call record gets (callRecord.seq)
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
	seq      uint64 // the order the boundary learned of the call in (Invoke, AskAhead, Recover)
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
	c = snapshot(c)
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
			out := prev.outcome
			b.mu.Unlock()
			if out.State == StateAwaitingApproval {
				// A call awaiting approval that its member delivers again (a resumed member reaching
				// it in order) runs once an approval covers it exactly; otherwise it still waits.
				if o, ran, err := b.dispatchIfApproved(ctx, key); ran || err != nil {
					return o, err
				}
				b.mu.Lock()
				out = prev.outcome
				b.mu.Unlock()
			}
			return out, nil
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
	rec := &callRecord{identity: identity, done: make(chan struct{}), call: c}
	b.addLocked(key, rec)
	b.mu.Unlock()

	out, err := b.propose(ctx, rec)
	close(rec.done)
	return out, err
}

// snapshot is c as the boundary keeps it (SAFETY.md rule 1: snapshot before any await; nothing
// the caller still holds changes what executes): its allowed tools copied, its payload as text.
func snapshot(c Call) Call {
	c.Allowed = slices.Clone(c.Allowed)
	if c.Arguments == "" && c.Payload != nil {
		c.Arguments = string(c.Payload) // a copy: strings are immutable
	}
	c.Payload = nil
	return c
}

// addLocked registers rec under key, in the order calls became known. b.mu must be held.
func (b *Boundary) addLocked(key string, rec *callRecord) {
	rec.seq = b.nextSeq
	b.nextSeq++
	b.calls[key] = rec
}

// AskAhead records, for a call proposed in the same turn after a call that paused its member for
// approval, the question an approver must answer before it can run, so that every call of the
// turn can be approved before the run is resumed (rather than one per resume). Nothing is
// dispatched and nothing else is recorded: a call the policy allows, denies, or that an approval
// already covers exactly, or that does not validate, is left as it is, to be decided when its
// member reaches it (SAFETY.md rule 6). It reports whether a question was recorded.
//
// On resume the call is asked again under the current policy (Recover), and it runs only when its
// member reaches it in order, re-delivers it and an approval covers it exactly (Invoke); it is
// never dispatched ahead of an earlier call of its member (DispatchApproved).
//
// Errors: the journal's; ErrDuplicateCall for a known call id with other content.
func (b *Boundary) AskAhead(ctx context.Context, c Call) (bool, error) {
	c = snapshot(c)
	key, identity := c.Key(), identityOf(c)
	b.mu.Lock()
	if prev, ok := b.calls[key]; ok {
		b.mu.Unlock()
		if prev.identity != identity {
			return false, fmt.Errorf("%w: call %s of member %s", ErrDuplicateCall, c.CallID, c.MemberID)
		}
		return false, nil
	}
	b.mu.Unlock()
	if b.mode == Observe {
		return false, nil // ask is not enforced
	}
	p, err := b.prepare(c, c.Arguments, 0)
	if err != nil {
		return false, nil // refused when its member reaches it
	}
	d := b.decide(ctx, c, p)
	if d.Effect != policy.Ask {
		return false, nil
	}
	if _, err := b.approvals.Check(b.binding(c, p, d)); err == nil {
		return false, nil // covered already: it dispatches when its member reaches it
	}
	rec := &callRecord{identity: identity, done: make(chan struct{}), call: c}
	b.mu.Lock()
	if _, ok := b.calls[key]; ok {
		b.mu.Unlock()
		return false, nil // delivered meanwhile: Invoke decides it
	}
	b.addLocked(key, rec)
	b.mu.Unlock()
	_, err = b.askApproval(ctx, rec, p, d)
	close(rec.done)
	return err == nil, err
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
