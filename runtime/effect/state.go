// Package effect is the effect ledger: the states an effect passes through, the one monotonic
// transition function every state change goes through, and reconciliation of effects whose outcome
// is unknown through a backend's receipt lookup (../shared/SAFETY.md rules 6-10).
//
// The outcome lifecycle is DESIGN.md's:
//
//	awaiting_approval -> pending -> running -> succeeded | failed | unknown | cancelled
//	unknown -> succeeded | failed        (only through reconciliation)
//
// awaiting_approval is the state of a proposed effect that policy sent to an approver; it can be
// revised (a new revision, which revokes its approvals) or cancelled, and leaves only through an
// approval. Invocation responses, exceptions, observations, reconciliation results and crash
// recovery are all events of Transition: there is no second path that sets a state, so a late
// acknowledgement cannot overwrite a terminal outcome.
package effect

import (
	"errors"
	"fmt"
)

// State is the lifecycle state of one effect.
type State string

// The effect states (DESIGN.md vocabulary, plus awaiting_approval before pending).
const (
	AwaitingApproval State = "awaiting_approval"
	Pending          State = "pending"
	Running          State = "running"
	Succeeded        State = "succeeded"
	Failed           State = "failed"
	Unknown          State = "unknown"
	Cancelled        State = "cancelled"
)

// States returns every effect state in lifecycle order: awaiting_approval, pending, running,
// succeeded, failed, unknown, cancelled. The slice is new on every call.
func States() []State {
	return []State{AwaitingApproval, Pending, Running, Succeeded, Failed, Unknown, Cancelled}
}

// Terminal reports whether s is final: succeeded, failed and cancelled never change again. Unknown
// is not terminal but leaves only through reconciliation.
func (s State) Terminal() bool {
	return s == Succeeded || s == Failed || s == Cancelled
}

// Valid reports whether s is one of the states above.
func (s State) Valid() bool {
	switch s {
	case AwaitingApproval, Pending, Running, Succeeded, Failed, Unknown, Cancelled:
		return true
	}
	return false
}

// EventKind names what happened to an effect.
type EventKind string

// The events Transition accepts.
const (
	// Approve: an exact approval was granted (awaiting_approval -> pending).
	Approve EventKind = "approve"
	// Revise: the proposed payload changed (awaiting_approval -> awaiting_approval, new revision).
	Revise EventKind = "revise"
	// Cancel: the effect will not be dispatched (awaiting_approval | pending -> cancelled). A
	// dispatched effect cannot be cancelled, only observed.
	Cancel EventKind = "cancel"
	// Dispatch: the effect was handed to its executor (pending -> running). The intent must be
	// durable before this event (rule 9).
	Dispatch EventKind = "dispatch"
	// Respond: the invocation returned (running -> To).
	Respond EventKind = "respond"
	// Raise: the invocation raised or timed out (running -> To, which is failed, unknown or
	// cancelled as the tool's access mode dictates).
	Raise EventKind = "exception"
	// Observe: an observation of the world reported a state (running -> To).
	Observe EventKind = "observe"
	// Reconcile: a receipt lookup or an operator decision resolved an unknown effect
	// (unknown -> succeeded | failed). To == unknown means the lookup found nothing: no change.
	Reconcile EventKind = "reconcile"
	// Recover: after a crash, an intent was found without an outcome (pending | running -> unknown):
	// it may have been dispatched, so it is never treated as not started.
	Recover EventKind = "recover"
)

// Event is one input to Transition.
type Event struct {
	Kind EventKind
	// To is the state the event reports, for Respond, Raise, Observe and Reconcile.
	To State
}

// ErrIllegalTransition is returned (wrapped in *TransitionError) when an event is not allowed in
// the current state: confirming a cancelled or running effect, dispatching twice, reconciling a
// running effect. The state does not change.
var ErrIllegalTransition = errors.New("illegal effect transition")

// ErrLate is returned (wrapped in *TransitionError) when an event arrives after the effect already
// reached an outcome it cannot change (a held response of "running" after "succeeded", a second
// reconciliation after the first resolved). The state does not change; the event is evidence only.
var ErrLate = errors.New("late effect event ignored")

// TransitionError describes a refused transition. It matches ErrIllegalTransition or ErrLate with
// errors.Is.
type TransitionError struct {
	From  State
	Event Event
	// Late is true for ErrLate, false for ErrIllegalTransition.
	Late bool
}

func (e *TransitionError) Error() string {
	what := "illegal"
	if e.Late {
		what = "late"
	}
	if e.Event.To != "" {
		return fmt.Sprintf("%s effect event %s(%s) in state %s", what, e.Event.Kind, e.Event.To, e.From)
	}
	return fmt.Sprintf("%s effect event %s in state %s", what, e.Event.Kind, e.From)
}

// Is makes errors.Is(err, ErrIllegalTransition) and errors.Is(err, ErrLate) work.
func (e *TransitionError) Is(target error) bool {
	return (target == ErrLate && e.Late) || (target == ErrIllegalTransition && !e.Late)
}

// Transition is the one transition function of the effect lifecycle. It returns the next state, or
// from unchanged with a *TransitionError when the event is illegal or late. It is pure and safe for
// concurrent use; callers serialise the read-modify-write of one effect (Ledger does).
func Transition(from State, ev Event) (State, error) {
	illegal := func() (State, error) { return from, &TransitionError{From: from, Event: ev} }
	late := func() (State, error) { return from, &TransitionError{From: from, Event: ev, Late: true} }
	if !from.Valid() {
		return illegal()
	}
	switch ev.Kind {
	case Approve:
		if from == AwaitingApproval {
			return Pending, nil
		}
	case Revise:
		if from == AwaitingApproval {
			return AwaitingApproval, nil
		}
	case Cancel:
		if from == AwaitingApproval || from == Pending {
			return Cancelled, nil
		}
	case Dispatch:
		if from == Pending {
			return Running, nil
		}
	case Respond, Raise, Observe:
		if !outcomeTarget(ev.Kind, ev.To) {
			return illegal()
		}
		switch {
		case from == Running:
			return ev.To, nil
		case from.Terminal() || from == Unknown:
			// A late acknowledgement never overwrites an outcome; an unknown effect is resolved only
			// by reconciliation, never by a response that may itself be stale.
			return late()
		}
	case Reconcile:
		if ev.To != Succeeded && ev.To != Failed && ev.To != Unknown {
			return illegal()
		}
		switch {
		case from == Unknown:
			return ev.To, nil
		case from.Terminal():
			return late()
		}
	case Recover:
		switch {
		case from == Pending || from == Running:
			return Unknown, nil
		case from == Unknown:
			return Unknown, nil
		case from.Terminal():
			return late()
		}
	}
	return illegal()
}

// outcomeTarget reports which states an invocation event may report.
func outcomeTarget(k EventKind, to State) bool {
	switch k {
	case Raise:
		return to == Failed || to == Unknown || to == Cancelled
	default:
		return to == Running || to == Succeeded || to == Failed || to == Unknown || to == Cancelled
	}
}
