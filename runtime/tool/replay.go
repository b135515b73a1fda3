package tool

import (
	"errors"
	"fmt"
	"slices"

	"github.com/assay-audit/assay/runtime/effect"
)

// Record is one journal record as stored: exactly one of Intent and Outcome is set. The evidence
// store holds them as tool_call and tool_result events.
type Record struct {
	Intent  *Intent
	Outcome *Outcome
}

// Effect is one call's effect as its recorded evidence establishes it.
type Effect struct {
	IdempotencyKey string     `json:"idempotency_key"`
	RunID          string     `json:"run_id"`
	MemberID       string     `json:"member_id"`
	SessionID      string     `json:"session_id"`
	CallID         string     `json:"call_id"`
	Tool           string     `json:"tool"`
	Access         AccessMode `json:"access"`
	PayloadSHA256  string     `json:"payload_sha256"`
	// State is the effect state after every record went through effect.Transition: awaiting_approval,
	// pending, running, succeeded, failed, unknown or cancelled.
	State effect.State `json:"state"`
	// Dispatched is true when an intent recorded a dispatch; a refused or never-approved call is not.
	Dispatched bool `json:"dispatched"`
	// ReconciliationRequired is true while the effect is unknown.
	ReconciliationRequired bool `json:"reconciliation_required"`
	// Source is what produced the deciding outcome (invocation, reconciliation, operator, ...).
	Source string `json:"source"`
	// Error is the deciding outcome's error text (redacted when recorded).
	Error   string          `json:"error,omitempty"`
	Receipt *effect.Receipt `json:"receipt,omitempty"`
	Note    string          `json:"note,omitempty"`
	Mode    Mode            `json:"mode,omitempty"`
	// Ignored lists records that the transition guard refused (late acknowledgements), as evidence.
	Ignored []string `json:"ignored,omitempty"`
	// Intent is the last intent recorded for the call (its canonical, redacted arguments, its policy
	// decision and approval), for operators who must see the exact action.
	Intent Intent `json:"intent"`
	// ProposedIn is the run whose events first recorded the call (the team run's first run, or a
	// run that resumed it), and DispatchedIn the run that recorded its dispatch (nil: never
	// dispatched). RunID is the team run's id, which every run of it keeps in its keys. Set by
	// readers that know which run recorded what (harness.Effects); Replay alone leaves them empty.
	ProposedIn   string  `json:"proposed_in_run"`
	DispatchedIn *string `json:"dispatched_in_run"`
}

// Replay folds a run's journal records, in recorded order, through the one transition function and
// returns each call's effect, ordered by first appearance. A dispatched intent with no outcome is
// running when inFlight (the run is still executing) and unknown otherwise: the process stopped
// between intent and outcome, so the effect may have committed (rule 9). Records the guard refuses
// are kept in Ignored; they never change the state. An outcome for a call with no intent is an
// error: evidence for an unrelated target is not filled in.
func Replay(records []Record, inFlight bool) ([]Effect, error) {
	byKey := map[string]*Effect{}
	var order []string
	apply := func(e *Effect, ev effect.Event, what string) {
		next, err := effect.Transition(e.State, ev)
		if err != nil {
			e.Ignored = append(e.Ignored, what+": "+err.Error())
			return
		}
		e.State = next
	}
	for i, r := range records {
		switch {
		case r.Intent != nil:
			in := *r.Intent
			e, ok := byKey[in.IdempotencyKey]
			if !ok {
				e = &Effect{IdempotencyKey: in.IdempotencyKey, RunID: in.RunID, MemberID: in.MemberID, SessionID: in.SessionID,
					CallID: in.CallID, Tool: in.Tool, Access: in.Access, Mode: in.Mode}
				byKey[in.IdempotencyKey] = e
				order = append(order, in.IdempotencyKey)
			}
			e.Intent, e.PayloadSHA256 = in, in.PayloadSHA256
			if !in.Dispatched || in.Attempt > 1 {
				continue
			}
			e.Dispatched = true
			switch e.State {
			case "":
				e.State = effect.Pending
			case effect.AwaitingApproval:
				apply(e, effect.Event{Kind: effect.Approve}, "approval")
			}
			apply(e, effect.Event{Kind: effect.Dispatch}, fmt.Sprintf("record %d intent", i+1))
		case r.Outcome != nil:
			o := *r.Outcome
			e, ok := byKey[o.IdempotencyKey]
			if !ok {
				return nil, fmt.Errorf("record %d: %w: outcome for %s has no intent", i+1, ErrNoSuchTransaction, o.IdempotencyKey)
			}
			what := fmt.Sprintf("record %d %s %s", i+1, o.Source, o.State)
			before := e.State
			to := effect.State(o.State)
			switch {
			case o.Source == "refusal" || (o.Source == "" && !e.Dispatched && o.State == StateFailed):
				// Refused before dispatch: nothing ran. A refusal of an approved call cancels it.
				switch e.State {
				case "":
					e.State = effect.Failed
				case effect.AwaitingApproval, effect.Pending:
					apply(e, effect.Event{Kind: effect.Cancel}, what)
				default:
					e.Ignored = append(e.Ignored, what+": refusal after dispatch")
				}
			case o.State == StateAwaitingApproval:
				if e.State == "" {
					e.State = effect.AwaitingApproval
				} else {
					apply(e, effect.Event{Kind: effect.Revise}, what)
				}
			case o.Source == "approval" || (o.State == StateCancelled && !e.Dispatched):
				apply(e, effect.Event{Kind: effect.Cancel}, what)
			case o.Source == "reconciliation" || o.Source == "operator":
				apply(e, effect.Event{Kind: effect.Reconcile, To: to}, what)
			case o.Source == "observation":
				apply(e, effect.Event{Kind: effect.Observe, To: to}, what)
			case o.Source == "recovery":
				apply(e, effect.Event{Kind: effect.Recover}, what)
			default:
				kind := effect.Respond
				if to != effect.Succeeded {
					kind = effect.Raise
				}
				apply(e, effect.Event{Kind: kind, To: to}, what)
			}
			if e.State != before || (o.State == string(e.State) && e.Source == "") {
				e.Source, e.Error, e.Note = o.Source, o.Error, o.Note
				if o.Receipt != nil {
					rc := *o.Receipt
					e.Receipt = &rc
				}
			}
		default:
			return nil, fmt.Errorf("record %d: %w", i+1, errEmptyRecord)
		}
	}
	out := make([]Effect, 0, len(order))
	for _, k := range order {
		e := byKey[k]
		if !inFlight && (e.State == effect.Running || e.State == effect.Pending) && e.Dispatched {
			e.State = effect.Unknown
			e.Source = "recovery"
			e.Error = "intent recorded without an outcome: the effect may have committed"
		}
		e.ReconciliationRequired = e.State == effect.Unknown
		e.Ignored = slices.Clip(e.Ignored)
		out = append(out, *e)
	}
	return out, nil
}

var errEmptyRecord = errors.New("journal record has neither an intent nor an outcome")
