package tool

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/assay-audit/assay/internal/digest"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

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
				return b.stopBeforeDispatch(ctx, rec, p, &d, fmt.Errorf("hook %d failed: %w", i+1, err))
			}
			args = next
		}
		if !bytes.Equal(args, p.canonical) {
			np, err := b.prepare(c, string(args), p.revision)
			if err != nil {
				return b.stopBeforeDispatch(ctx, rec, np, &d, fmt.Errorf("arguments after hooks: %w", err))
			}
			final = np
			d = b.decide(ctx, c, final)
			if d.Effect == policy.Deny {
				return b.stopBeforeDispatch(ctx, rec, final, &d, &policy.DeniedError{Decision: d})
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
			return b.stopBeforeDispatch(ctx, rec, final, &d, err)
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
			return b.stopBeforeDispatch(ctx, rec, final, &d, fmt.Errorf("not dispatched: %w", err))
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
				return b.stopBeforeDispatch(ctx, rec, final, &d, err)
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

// stopBeforeDispatch ends a call that will not be dispatched: its pending effect is cancelled in the
// ledger and the refusal recorded as failed. When a Cancel got there first (a cancel during
// confirmation, which also revoked the grant the dispatch then missed), the cancellation is the one
// outcome, in the ledger as in the journal: it is recorded as cancelled, never as a refusal's failed.
func (b *Boundary) stopBeforeDispatch(ctx context.Context, rec *callRecord, p prepared, d *policy.Decision, reason error) (Outcome, error) {
	b.mu.Lock()
	c := rec.call
	b.mu.Unlock()
	if _, err := b.ledger.Apply(c.Key(), effect.Event{Kind: effect.Cancel}); err != nil {
		if r, ok := b.ledger.Get(c.Key()); ok && r.State == effect.Cancelled {
			out := b.outcomeFor(c, p)
			out.State, out.Source = StateCancelled, "approval"
			out.Error = b.redactor.String("not dispatched: cancelled before dispatch (then " + reason.Error() + ")")
			return b.finish(ctx, rec, out)
		}
	}
	return b.refuse(ctx, rec, p, d, reason)
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
