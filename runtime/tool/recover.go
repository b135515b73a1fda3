package tool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// MemberContext is what the boundary needs, beyond the journal, to dispatch a recovered call of a
// member: its directory and its tools, as the member's spec gives them in the new process.
type MemberContext struct {
	Root     string
	Allowed  []string
	ReadOnly bool
}

// Recover restores a boundary in a new process from a run's journal records (in recorded order),
// folded by Replay through the one transition function:
//
//   - an effect with no outcome after its dispatched intent is unknown (the process stopped after
//     the intent: it may have committed, rule 9); that outcome is recorded with Source "recovery";
//   - every other effect keeps its recorded outcome;
//   - a call awaiting approval is asked again under the current policy (rule 14): its arguments are
//     re-validated against the current schema and decided by the current policy, so an approval
//     given under another policy, schema or revision no longer matches. It is restorable only when
//     members knows the member and the recorded arguments are the ones proposed (their SHA-256 is
//     the recorded payload hash: redaction changed nothing); otherwise it is cancelled, recorded
//     with the reason, and never dispatched.
//
// Every recovered call keeps its identity: a re-delivery of the same call id returns the recorded
// outcome and is never dispatched again; a different payload conflicts. Recover dispatches nothing;
// DispatchApproved runs recovered calls that an approval covers exactly. It returns the outcomes it
// recorded. Keys already known to this boundary are refused (effect.ErrEffectExists).
func (b *Boundary) Recover(ctx context.Context, records []Record, members func(memberID string) (MemberContext, bool)) ([]Outcome, error) {
	effs, err := Replay(records, false)
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	lastOutcome := map[string]Outcome{}
	for _, r := range records {
		if r.Outcome != nil {
			lastOutcome[r.Outcome.IdempotencyKey] = *r.Outcome
		}
	}
	var recorded []Outcome
	for _, e := range effs {
		key := e.IdempotencyKey
		b.mu.Lock()
		_, exists := b.calls[key]
		b.mu.Unlock()
		if exists {
			return recorded, fmt.Errorf("recover %s: %w", key, effect.ErrEffectExists)
		}
		in := e.Intent
		c := Call{RunID: e.RunID, MemberID: e.MemberID, SessionID: e.SessionID, CallID: e.CallID, Tool: e.Tool}
		rec := &callRecord{identity: e.Tool + "\x00" + e.PayloadSHA256, done: make(chan struct{}), call: c,
			prep: prepared{hash: e.PayloadSHA256, revision: in.Revision, tool: b.tools[e.Tool]}}
		close(rec.done)
		register := func(state effect.State, out Outcome) error {
			if state != "" {
				if err := b.ledger.Add(key, state); err != nil {
					return err
				}
			}
			rec.outcome = out
			b.mu.Lock()
			b.addLocked(key, rec)
			b.mu.Unlock()
			return nil
		}
		base := Outcome{RunID: e.RunID, MemberID: e.MemberID, SessionID: e.SessionID, CallID: e.CallID, IdempotencyKey: key,
			Tool: e.Tool, Mode: e.Mode, Revision: in.Revision, Attempts: in.Attempt}
		switch {
		case e.State == effect.AwaitingApproval:
			out, err := b.recoverQuestion(ctx, rec, e, members)
			if err != nil {
				return recorded, err
			}
			recorded = append(recorded, out)
		case e.State == effect.Unknown && e.Source == "recovery":
			o := base
			o.State, o.ReconciliationRequired, o.Source = StateUnknown, true, "recovery"
			o.Error = "intent recorded without an outcome: the process stopped after the intent; the effect may have committed"
			if err := register(effect.Unknown, o); err != nil {
				return recorded, err
			}
			if err := b.journal.Outcome(context.WithoutCancel(ctx), o); err != nil {
				return recorded, fmt.Errorf("record recovered outcome %s: %w", key, err)
			}
			recorded = append(recorded, o)
		default:
			o, ok := lastOutcome[key]
			if !ok {
				o = base
			}
			o.State, o.ReconciliationRequired = string(e.State), e.State == effect.Unknown
			var st effect.State
			if e.Dispatched || e.State == effect.Cancelled {
				st = e.State
			}
			if err := register(st, o); err != nil {
				return recorded, err
			}
		}
	}
	return recorded, nil
}

// recoverQuestion restores a call that was awaiting approval, asking again under the current
// policy, or cancels it when it cannot be restored exactly.
func (b *Boundary) recoverQuestion(ctx context.Context, rec *callRecord, e Effect, members func(string) (MemberContext, bool)) (Outcome, error) {
	key := e.IdempotencyKey
	b.mu.Lock()
	b.addLocked(key, rec)
	b.mu.Unlock()
	if err := b.ledger.Add(key, effect.AwaitingApproval); err != nil {
		return Outcome{}, err
	}
	cancel := func(reason string) (Outcome, error) {
		_, _ = b.ledger.Apply(key, effect.Event{Kind: effect.Cancel})
		out := b.outcomeFor(rec.call, rec.prep)
		out.State, out.Source, out.Error = StateCancelled, "recovery", "not resumable: "+reason
		return b.finish(ctx, rec, out)
	}
	mc, ok := members(e.MemberID)
	if !ok {
		return cancel(fmt.Sprintf("member %s is not part of the resumed team", e.MemberID))
	}
	sum := sha256.Sum256(e.Intent.Arguments)
	if len(bytes.TrimSpace(e.Intent.Arguments)) == 0 || hex.EncodeToString(sum[:]) != e.PayloadSHA256 {
		return cancel("the recorded arguments are not the proposed ones (credentials were redacted); the call must be proposed again")
	}
	c := rec.call
	c.Arguments, c.Root, c.Allowed, c.ReadOnly = string(e.Intent.Arguments), mc.Root, append([]string(nil), mc.Allowed...), mc.ReadOnly
	p, err := b.prepare(c, c.Arguments, e.Intent.Revision)
	b.mu.Lock()
	rec.call, rec.identity = c, identityOf(c)
	b.mu.Unlock()
	if err != nil {
		_, _ = b.ledger.Apply(key, effect.Event{Kind: effect.Cancel})
		return b.refuse(ctx, rec, p, nil, fmt.Errorf("on resume: %w", err))
	}
	d := b.decide(ctx, c, p)
	if d.Effect == policy.Deny {
		_, _ = b.ledger.Apply(key, effect.Event{Kind: effect.Cancel})
		return b.refuse(ctx, rec, p, &d, &policy.DeniedError{Decision: d})
	}
	return b.askApproval(ctx, rec, p, d)
}

// DispatchApproved dispatches, for each member, its first call awaiting approval (in the order the
// boundary learned of them: the journal's) when a granted approval (an approval file preloaded into
// the boundary's store, or a grant through the API) covers it exactly under the current policy,
// once, and returns their outcomes ordered by key. A later call of the same member waits, approved
// or not, until its member reaches it and delivers it again (Invoke): calls proposed in one turn
// run in the order they were proposed, never one ahead of another. Calls without such an approval
// stay pending.
func (b *Boundary) DispatchApproved(ctx context.Context) ([]Outcome, error) {
	type waiting struct {
		key, member string
		seq         uint64
	}
	var ws []waiting
	for _, r := range b.ledger.List(effect.AwaitingApproval) {
		rec, err := b.lookup(r.Key)
		if err != nil {
			continue
		}
		b.mu.Lock()
		ws = append(ws, waiting{key: r.Key, member: rec.call.RunID + "\x00" + rec.call.MemberID, seq: rec.seq})
		b.mu.Unlock()
	}
	slices.SortFunc(ws, func(x, y waiting) int { return cmp.Compare(x.seq, y.seq) })
	first := map[string]bool{}
	var keys []string
	for _, w := range ws {
		if !first[w.member] {
			first[w.member] = true
			keys = append(keys, w.key)
		}
	}
	slices.Sort(keys)
	var outs []Outcome
	for _, key := range keys {
		out, ran, err := b.dispatchIfApproved(ctx, key)
		if err != nil {
			return outs, err
		}
		if ran {
			outs = append(outs, out)
		}
	}
	return outs, nil
}

// Approved reports whether a granted approval covers exactly the call awaiting approval under key,
// under the current policy, without consuming it: such a call runs once its member reaches it.
func (b *Boundary) Approved(key string) bool {
	rec, err := b.lookup(key)
	if err != nil {
		return false
	}
	b.mu.Lock()
	c, p, d := rec.call, rec.prep, rec.decision
	b.mu.Unlock()
	_, err = b.approvals.Check(b.binding(c, p, d))
	return err == nil
}

// dispatchIfApproved dispatches the call awaiting approval under key when a granted approval
// covers it exactly under the current policy, consuming the approval, and reports whether it ran.
func (b *Boundary) dispatchIfApproved(ctx context.Context, key string) (Outcome, bool, error) {
	rec, err := b.lookup(key)
	if err != nil {
		return Outcome{}, false, nil
	}
	rec.ctl.Lock()
	b.mu.Lock()
	c, p, d := rec.call, rec.prep, rec.decision
	b.mu.Unlock()
	ap, err := b.approvals.Check(b.binding(c, p, d))
	if err != nil || b.awaiting(key) != nil {
		rec.ctl.Unlock()
		return Outcome{}, false, nil
	}
	if _, err := b.ledger.Apply(key, effect.Event{Kind: effect.Approve}); err != nil {
		rec.ctl.Unlock()
		return Outcome{}, false, nil
	}
	rec.ctl.Unlock()
	out, err := b.dispatch(ctx, rec, p, d, &ap)
	return out, true, err
}
