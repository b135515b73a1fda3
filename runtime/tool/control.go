package tool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// Confirmation is an approver's answer to a call awaiting approval, addressed to one explicit
// transaction and carrying the version of the action the approver was shown.
type Confirmation struct {
	// TxID is the transaction: the call's idempotency key "{run_id}:{member_id}:{call_id}".
	TxID string
	// Revision and PayloadSHA256 are the evidence the answer was given on: the proposal revision and
	// the canonical payload hash the approver saw. PayloadSHA256 is required; both must equal the
	// pending action's, or the answer is stale (rule 12).
	Revision      int
	PayloadSHA256 string
	// Interpretation is "approve" or "reject"; anything else is ambiguous. Confidence in [0, 1] is
	// how sure the reading of the answer is (1 for a typed API call; lower when a person's free-text
	// answer was interpreted). Below the boundary's threshold nothing executes.
	Interpretation string
	Confidence     float64
	// Approver and Source identify who answered and how (policy.Grant).
	Approver string
	Source   string
	// ExpiresAt bounds the approval (zero: now + the boundary's approval TTL).
	ExpiresAt time.Time
	// Disclose grants showing the result to the member.
	Disclose bool
}

// lookup returns the explicit transaction, or ErrNoSuchTransaction.
func (b *Boundary) lookup(txID string) (*callRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.calls[txID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSuchTransaction, txID)
	}
	return rec, nil
}

// awaiting returns the record's state and refuses anything but awaiting_approval.
func (b *Boundary) awaiting(txID string) error {
	r, ok := b.ledger.Get(txID)
	if !ok {
		return fmt.Errorf("%w: %s has no pending effect", ErrNotAwaitingApproval, txID)
	}
	if r.State != effect.AwaitingApproval {
		return fmt.Errorf("%w: %s is %s", ErrNotAwaitingApproval, txID, r.State)
	}
	return nil
}

// Confirm answers the call awaiting approval named by cf.TxID. An approval re-runs the current
// policy, grants an exact approval bound to the pending action and dispatches it through the same
// path as Invoke (hooks, re-check of the approval against the final arguments, budget, intent,
// outcome). A rejection cancels it. Errors: ErrNoSuchTransaction for an id the boundary does not
// hold (no other transaction is touched); ErrNotAwaitingApproval for one that is running, done or
// cancelled (no second effect set); ErrStaleEvidence; ErrAmbiguousConfirmation (the question stays
// pending); policy.ErrNotAnApprover and policy.ErrApprovalExpired from the grant.
func (b *Boundary) Confirm(ctx context.Context, cf Confirmation) (Outcome, error) {
	rec, err := b.lookup(cf.TxID)
	if err != nil {
		return Outcome{}, err
	}
	// ctl serialises the answer's state change; the dispatch itself runs after it is released, so
	// a second answer sees the transaction pending or running and is refused, never queued.
	rec.ctl.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			rec.ctl.Unlock()
		}
	}
	defer unlock()
	if err := b.awaiting(cf.TxID); err != nil {
		return Outcome{}, err
	}
	b.mu.Lock()
	c, p, d := rec.call, rec.prep, rec.decision
	b.mu.Unlock()
	switch {
	case cf.PayloadSHA256 == "":
		return Outcome{}, fmt.Errorf("%w: %s: the confirmation names no payload hash", ErrStaleEvidence, cf.TxID)
	case cf.PayloadSHA256 != p.hash || cf.Revision != p.revision:
		return Outcome{}, fmt.Errorf("%w: %s: the answer was given on revision %d payload %.12s, pending is revision %d payload %.12s",
			ErrStaleEvidence, cf.TxID, cf.Revision, cf.PayloadSHA256, p.revision, p.hash)
	case cf.Confidence < b.minConfidence || (cf.Interpretation != "approve" && cf.Interpretation != "reject"):
		return Outcome{}, fmt.Errorf("%w: %s: interpretation %q with confidence %.2f (threshold %.2f); the question stays pending",
			ErrAmbiguousConfirmation, cf.TxID, cf.Interpretation, cf.Confidence, b.minConfidence)
	case cf.Interpretation == "reject":
		return b.cancelLocked(ctx, rec, "rejected by "+cf.Approver)
	}

	expires := cf.ExpiresAt
	if expires.IsZero() {
		expires = b.now().Add(b.approvalTTL)
	}
	ap, err := b.approvals.Grant(policy.Grant{Binding: b.binding(c, p, d), Approver: cf.Approver, Source: cf.Source,
		ExpiresAt: expires, Disclose: cf.Disclose})
	if err != nil {
		return Outcome{}, err
	}
	if _, err := b.ledger.Apply(cf.TxID, effect.Event{Kind: effect.Approve}); err != nil {
		b.approvals.Revoke(cf.TxID)
		return Outcome{}, fmt.Errorf("%w: %w", ErrNotAwaitingApproval, err)
	}
	unlock()
	// Rule 14: the current policy decides again; a changed policy scope no longer matches the grant.
	d2 := b.decide(ctx, c, p)
	if d2.Effect == policy.Deny {
		b.approvals.Revoke(cf.TxID)
		return b.stopBeforeDispatch(ctx, rec, p, &d2, &policy.DeniedError{Decision: d2})
	}
	return b.dispatch(ctx, rec, p, d2, &ap)
}

// Revise replaces the arguments of a call awaiting approval with args: a new revision, which revokes
// every approval of the earlier one and asks again. Refused for a transaction that is not awaiting
// approval (a cancelled one stays cancelled) and for arguments that do not validate.
func (b *Boundary) Revise(ctx context.Context, txID, args string) (Outcome, error) {
	rec, err := b.lookup(txID)
	if err != nil {
		return Outcome{}, err
	}
	rec.ctl.Lock()
	defer rec.ctl.Unlock()
	if err := b.awaiting(txID); err != nil {
		return Outcome{}, err
	}
	b.mu.Lock()
	c, p := rec.call, rec.prep
	b.mu.Unlock()
	np, err := b.prepare(c, args, p.revision+1)
	if err != nil {
		// The revision is refused, but it still says the earlier intent is not what is wanted any
		// more (SAFETY.md rule 6): its pending question and any unused grant are revoked, so only a
		// valid revision, asked and approved anew, can run.
		b.approvals.Revoke(txID)
		return Outcome{}, fmt.Errorf("revise %s: %w (the earlier revision's approval is revoked)", txID, err)
	}
	if _, err := b.ledger.Apply(txID, effect.Event{Kind: effect.Revise}); err != nil {
		return Outcome{}, fmt.Errorf("%w: %w", ErrNotAwaitingApproval, err)
	}
	b.approvals.Revoke(txID)
	c.Arguments = args
	b.mu.Lock()
	rec.call, rec.identity = c, identityOf(c)
	b.mu.Unlock()
	d := b.decide(ctx, c, np)
	if d.Effect == policy.Deny {
		_, _ = b.ledger.Apply(txID, effect.Event{Kind: effect.Cancel})
		return b.refuse(ctx, rec, np, &d, &policy.DeniedError{Decision: d})
	}
	return b.askApproval(ctx, rec, np, d)
}

// Cancel cancels a call awaiting approval (or pending dispatch) and revokes its approvals. A
// dispatched call cannot be cancelled: ErrNotAwaitingApproval.
func (b *Boundary) Cancel(ctx context.Context, txID, reason string) (Outcome, error) {
	rec, err := b.lookup(txID)
	if err != nil {
		return Outcome{}, err
	}
	rec.ctl.Lock()
	defer rec.ctl.Unlock()
	return b.cancelLocked(ctx, rec, reason)
}

func (b *Boundary) cancelLocked(ctx context.Context, rec *callRecord, reason string) (Outcome, error) {
	b.mu.Lock()
	c, p := rec.call, rec.prep
	b.mu.Unlock()
	key := c.Key()
	if _, err := b.ledger.Apply(key, effect.Event{Kind: effect.Cancel}); err != nil {
		if errors.Is(err, effect.ErrNoSuchEffect) {
			return Outcome{}, fmt.Errorf("%w: %s has no pending effect", ErrNotAwaitingApproval, key)
		}
		return Outcome{}, fmt.Errorf("%w: %w", ErrNotAwaitingApproval, err)
	}
	b.approvals.Revoke(key)
	out := b.outcomeFor(c, p)
	out.State, out.Source, out.Error = StateCancelled, "approval", b.redactor.String("cancelled: "+reason)
	return b.finish(ctx, rec, out)
}

// Reconcile resolves an unknown effect through the backend's receipt lookup (concurrent calls share
// one lookup, charged one tool call to the member's budget) and records the result as a new outcome
// with Source "reconciliation". An effect that is not unknown is returned as it is. Errors:
// ErrNoSuchTransaction, effect.ErrNoBackend, the lookup's error.
func (b *Boundary) Reconcile(ctx context.Context, key string) (Outcome, error) {
	rec, err := b.lookup(key)
	if err != nil {
		return Outcome{}, err
	}
	b.mu.Lock()
	c := rec.call
	b.mu.Unlock()
	before, ok := b.ledger.Get(key)
	if !ok {
		return Outcome{}, fmt.Errorf("%w: %s has no effect", ErrNoSuchTransaction, key)
	}
	charge := func() error {
		if b.budget == nil {
			return nil
		}
		r, err := b.budget.Reserve(c.MemberID, 1, 0, "reconciliation")
		if err != nil {
			return err
		}
		r.Commit(new(int64)) // a reconciliation spends no provider tokens
		return nil
	}
	b.mu.Lock()
	payload := rec.prep.hash
	b.mu.Unlock()
	r, err := b.ledger.ReconcilePayload(ctx, key, payload, charge)
	if err != nil {
		return b.current(rec), err
	}
	return b.recordResolution(ctx, rec, before.State, r, "reconciliation", "")
}

// ResolveUnknown records an operator's reconciliation decision for an unknown effect: state is
// succeeded or failed, note says on what evidence. It goes through the same transition guard: an
// effect that is not unknown is refused (effect.ErrLate or effect.ErrIllegalTransition).
func (b *Boundary) ResolveUnknown(ctx context.Context, key, state, note string) (Outcome, error) {
	rec, err := b.lookup(key)
	if err != nil {
		return Outcome{}, err
	}
	before, ok := b.ledger.Get(key)
	if !ok {
		return Outcome{}, fmt.Errorf("%w: %s has no effect", ErrNoSuchTransaction, key)
	}
	if state != StateSucceeded && state != StateFailed {
		return Outcome{}, fmt.Errorf("%w: outcome must be succeeded or failed, got %q", effect.ErrIllegalTransition, state)
	}
	if _, err := b.ledger.Apply(key, effect.Event{Kind: effect.Reconcile, To: effect.State(state)}); err != nil {
		return b.current(rec), err
	}
	r, _ := b.ledger.Get(key)
	return b.recordResolution(ctx, rec, before.State, r, "operator", note)
}

// Observe reports an observation of a dispatched effect's state (a webhook, a poll). It goes
// through the transition guard: it cannot overwrite a terminal outcome nor resolve an unknown one.
// A change is recorded as a new outcome with Source "observation".
func (b *Boundary) Observe(ctx context.Context, key, state string) (Outcome, error) {
	rec, err := b.lookup(key)
	if err != nil {
		return Outcome{}, err
	}
	before, _ := b.ledger.Get(key)
	if _, err := b.ledger.Apply(key, effect.Event{Kind: effect.Observe, To: effect.State(state)}); err != nil {
		return b.current(rec), err
	}
	r, _ := b.ledger.Get(key)
	return b.recordResolution(ctx, rec, before.State, r, "observation", "")
}

func (b *Boundary) current(rec *callRecord) Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	return rec.outcome
}

// recordResolution records a new outcome when the effect's state changed.
func (b *Boundary) recordResolution(ctx context.Context, rec *callRecord, before effect.State, r effect.Record, source, note string) (Outcome, error) {
	out := b.current(rec)
	if r.State == before {
		return out, nil
	}
	if out.IdempotencyKey == "" {
		b.mu.Lock()
		out = b.outcomeFor(rec.call, rec.prep)
		b.mu.Unlock()
	}
	out.Error = ""
	out.State, out.Source, out.Note, out.Receipt = string(r.State), source, b.redactor.String(note), r.Receipt
	out.ReconciliationRequired = r.State == effect.Unknown
	out.Retryable = false
	if r.State == effect.Succeeded {
		if out.Result == "" {
			out.Result = "effect confirmed by " + source
		}
	}
	return b.finish(ctx, rec, out)
}
