package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/tool"
)

// ErrPausedForApproval is returned (wrapped, naming the call and its idempotency key) when policy
// sent a member's tool call to an approver and no approval covered it: nothing was dispatched, and
// the member fails explicitly instead of showing the model an error. The pending question stays in
// the boundary's approval store and in the run's evidence. In a durable run (EngineConfig.Durable)
// the turn is checkpointed as paused at that call and the run starts no new turn; resuming it
// (DurableConfig.Restore) delivers the call again, and it dispatches only if an approval now covers
// it exactly. Without durability the invocation ends here.
var ErrPausedForApproval = errors.New("paused for approval")

// ErrReconciliationRequired is returned (wrapped, naming the call and its idempotency key) when a
// member's tool call ended unknown: the effect may have committed, so the member cannot go on
// (it would either repeat the effect or act on a guess) until the effect is reconciled.
var ErrReconciliationRequired = errors.New("reconciliation required")

// ErrMalformedReply is returned when a structured reply breaks its contract: prose around the JSON,
// fences, extra or missing keys, malformed JSON, values outside the contract. There is no fallback
// parsing and no silent retry.
var ErrMalformedReply = errors.New("malformed structured reply")

// ErrInvalidToolArguments is returned (wrapped) when a model's tool call carries arguments that are
// not a JSON object after the reply ended. The member fails explicitly; the raw text is kept in a
// warning event and in the response artifact, never repaired.
var ErrInvalidToolArguments = errors.New("tool call arguments are not a JSON object")

// Turn is one invocation of a member by a formation: what it is shown besides its task, and the
// structured reply that ends it.
type Turn struct {
	// Context holds earlier outputs shown to the member, one entry each, after ContextHeading.
	Context []string
	// ContextHeading introduces Context; default "Outputs of the members before you, in order:".
	ContextHeading string
	// Instruction is the formation's request for this invocation, appended after the context.
	Instruction string
	// Contract is the structured reply that ends the invocation; nil is the completion contract.
	Contract *Contract
}

// RunMember runs one member with the completion contract; context holds prior outputs given to
// the member (sequential formation), nil for none. See RunTurn.
func (e *Engine) RunMember(ctx context.Context, team Team, m MemberSpec, context []string) MemberResult {
	return e.RunTurn(ctx, team, m, Turn{Context: context})
}

// RunTurn invokes a member once: member_started, then provider requests and tool calls until the
// member replies with the turn's contract, then member_completed or member_failed. The reply must
// satisfy the contract exactly; a violation fails the invocation with a warning event carrying the
// reply, and is never retried. The result is never nil-valued: a failure is a MemberResult with
// Success=false and Error set; Turns is 1. Safe for concurrent use with other members; invoking the
// same member concurrently is a formation bug (its sequence numbers stay unique, its history not).
func (e *Engine) RunTurn(ctx context.Context, team Team, m MemberSpec, turn Turn) MemberResult {
	start := time.Now()
	session := team.SessionID(m)
	contract := turn.Contract
	if contract == nil {
		c := Completion(team.Formation, m.ID, false)
		contract = &c
	}
	invocation := e.nextInvocation(session)
	res := MemberResult{MemberID: m.ID, SessionID: session, Turns: 1}
	payload := func() event.MemberTurn {
		return event.MemberTurn{Formation: team.Formation, DomainRole: m.DomainRole, FormationRole: m.FormationRole,
			Contract: contract.Line.Contract, Invocation: invocation, ToolCalls: res.ToolCalls,
			Requests: res.Usage.Requests, UsageUnknown: res.Usage.Unknown}
	}
	var prior time.Duration // time spent in this turn before a resume
	// recordDone checkpoints the turn as ended (durable runs); nil once the turn must not be.
	var recordDone func(MemberResult) error
	fail := func(err error) MemberResult {
		res.Success, res.Error, res.Duration = false, err.Error(), prior+time.Since(start)
		p := payload()
		p.Error, p.Paused = res.Error, res.Paused
		_ = e.Emit(ctx, m.ID, session, event.MemberFailed{MemberTurn: p})
		if recordDone != nil {
			if rerr := recordDone(res); rerr != nil {
				res.Error += "; " + rerr.Error()
			}
		}
		return res
	}
	var user strings.Builder
	user.WriteString(m.Task)
	if len(turn.Context) > 0 {
		heading := turn.ContextHeading
		if heading == "" {
			heading = "Outputs of the members before you, in order:"
		}
		user.WriteString("\n\n" + heading + "\n" + strings.Join(turn.Context, "\n"))
	}
	if turn.Instruction != "" {
		user.WriteString("\n\n" + turn.Instruction)
	}
	user.WriteString("\n\n" + contract.Prompt())
	messages := []provider.Message{
		{Role: "system", Content: m.Goal},
		{Role: "user", Content: user.String()},
	}
	allowed, readOnly := e.MemberTools(m)
	var defs []provider.ToolDef
	for _, t := range e.boundary.DefinitionsFor(allowed, readOnly) {
		defs = append(defs, provider.ToolDef{Name: t.Name, Description: t.Doc, Parameters: t.Parameters})
	}
	budget := m.ToolBudget
	if budget <= 0 {
		budget = e.budget
	}

	// Durable runs: restore or continue a checkpointed turn, or refuse to start one after a pause.
	requests := 0
	var pending []PendingCall
	input := turnInput(messages, defs)
	turnState := func(status string) TurnState {
		r := res
		r.Duration = prior + time.Since(start)
		return TurnState{MemberID: m.ID, SessionID: session, Invocation: invocation, InputSHA256: input, Status: status,
			Result: r, Requests: requests, Messages: toCheckpoint(messages), Pending: slices.Clone(pending)}
	}
	recordDone = func(r MemberResult) error {
		if e.durable == nil || ctx.Err() != nil {
			return nil // a cancelled turn stays resumable from its last checkpoint
		}
		t := turnState(TurnCompleted)
		t.Result, t.Messages, t.Pending = r, nil, nil
		return e.durable.record(ctx, e, t)
	}
	resumed := false
	if d := e.durable; d != nil {
		rt, ok := d.take(turnKey{m.ID, invocation})
		runID := d.bind(team)
		switch {
		case runID != team.RunID:
			recordDone = nil
			return fail(fmt.Errorf("%w: the checkpoint is of team run %s, this team is run %s", ErrResumeDiverged, runID, team.RunID))
		case ok && rt.SessionID != session:
			// The checkpointed turn is another session's: restoring it would hand this member's
			// identity someone else's conversation and usage (FORMATIONS.md, "Session ids").
			recordDone = nil
			return fail(fmt.Errorf("%w: member %s invocation %d was recorded under session %s, and is bound now to session %s; nothing was asked of the model",
				ErrResumeDiverged, m.ID, invocation, rt.SessionID, session))
		case ok && rt.InputSHA256 != input:
			recordDone = nil
			return fail(fmt.Errorf("%w: member %s invocation %d was recorded with input %s, asked now with %s; nothing was asked of the model",
				ErrResumeDiverged, m.ID, invocation, rt.InputSHA256, input))
		case ok && rt.Status == TurnCompleted:
			r := rt.Result
			if err := e.Emit(ctx, m.ID, session, event.MemberRestored{Invocation: invocation, Success: r.Success,
				Output: r.Output, Error: r.Error, ToolCalls: r.ToolCalls, Requests: r.Usage.Requests,
				InputSHA256: input}); err != nil {
				return fail(fmt.Errorf("record member_restored: %w", err))
			}
			if err := d.record(ctx, e, rt); err != nil {
				return fail(err)
			}
			return r
		case ok:
			res = rt.Result
			res.MemberID, res.SessionID, res.Turns, res.Paused = m.ID, session, 1, false
			prior, requests, messages, pending, resumed = rt.Result.Duration, rt.Requests, fromCheckpoint(rt.Messages), rt.Pending, true
		case d.paused():
			recordDone = nil
			res.Paused = true
			reason := "the run paused before this member started"
			_ = e.Emit(ctx, m.ID, session, event.MemberDeferred{Invocation: invocation, Reason: reason})
			return fail(fmt.Errorf("%w (%s); it runs when the run is resumed", ErrRunPaused, reason))
		}
	}
	startPayload := payload()
	startPayload.Dir = m.Dir
	startPayload.Resumed = resumed
	if err := e.Emit(ctx, m.ID, session, event.MemberStarted{MemberTurn: startPayload}); err != nil {
		return fail(fmt.Errorf("record member_started: %w", err))
	}

	// runPaused stops the turn where it stands when its durable run paused (another member's call
	// awaits authority): nothing more is dispatched or asked of the model; the checkpoint keeps the
	// turn with its pending calls and messages, and a resume continues it from there. pc is the
	// call that would have been dispatched next, nil before a provider request.
	runPaused := func(pc *PendingCall) (MemberResult, bool) {
		if e.durable == nil || !e.durable.paused() {
			return MemberResult{}, false
		}
		stop := fmt.Errorf("%w while this turn was under way; it continues when the run is resumed", ErrRunPaused)
		res.Paused = true
		t := turnState(TurnPaused)
		t.PauseReason = stop.Error()
		p := event.MemberPaused{Invocation: invocation, State: "deferred", Reason: stop.Error()}
		if pc != nil {
			p.CallID, p.Tool = pc.CallID, pc.Tool
		}
		if err := e.Emit(ctx, m.ID, session, p); err != nil {
			return fail(fmt.Errorf("record member_paused: %w", err)), true
		}
		if err := e.durable.record(ctx, e, t); err != nil {
			return fail(err), true
		}
		recordDone = nil
		return fail(stop), true
	}

	// answer delivers the pending tool calls to the boundary in order. It returns stop=true with the
	// member's result when the member cannot go on (a failure, or a pause).
	answer := func() (MemberResult, bool) {
		for len(pending) > 0 {
			pc := pending[0]
			// SAFETY.md rule 6: after every await, re-check the action is still allowed before
			// the next effect starts.
			if r, stop := runPaused(&pc); stop {
				return r, true
			}
			if res.ToolCalls >= budget {
				return fail(fmt.Errorf("tool budget of %d calls exhausted", budget)), true
			}
			out, err := e.boundary.Invoke(ctx, tool.Call{RunID: team.RunID, MemberID: m.ID, SessionID: session,
				CallID: pc.CallID, Tool: pc.Tool, Arguments: pc.Arguments, Root: m.Dir, Allowed: allowed, ReadOnly: readOnly})
			if err != nil {
				return fail(fmt.Errorf("tool call %s: %w", pc.ToolCallID, err)), true
			}
			var stop error
			switch out.State {
			case tool.StateAwaitingApproval:
				stop = fmt.Errorf("%w: tool call %s (%s, key %s) needs an approval; nothing was dispatched (grant it with an approval file: assay approve)",
					ErrPausedForApproval, pc.CallID, pc.Tool, out.IdempotencyKey)
			case tool.StateUnknown:
				stop = fmt.Errorf("%w: tool call %s (%s, key %s) ended unknown: reconciliation required",
					ErrReconciliationRequired, pc.CallID, pc.Tool, out.IdempotencyKey)
			}
			if stop != nil {
				// Paused on any engine: the member did not fail on its own, and nothing may retry it
				// (a durable engine also checkpoints the exact pending call for a resume).
				res.Paused = true
				if e.durable != nil && out.State == tool.StateAwaitingApproval {
					// The calls proposed after it in this turn are asked too, so that one approval
					// round covers the whole turn; none is dispatched, and on resume each runs in
					// order, when its member reaches it (tool.Boundary.AskAhead).
					for _, later := range pending[1:] {
						if _, err := e.boundary.AskAhead(ctx, tool.Call{RunID: team.RunID, MemberID: m.ID, SessionID: session,
							CallID: later.CallID, Tool: later.Tool, Arguments: later.Arguments, Root: m.Dir, Allowed: allowed, ReadOnly: readOnly}); err != nil {
							return fail(fmt.Errorf("tool call %s: %w", later.ToolCallID, err)), true
						}
					}
				}
				if e.durable != nil {
					t := turnState(TurnPaused)
					t.PauseReason = stop.Error()
					if err := e.Emit(ctx, m.ID, session, event.MemberPaused{Invocation: invocation, CallID: pc.CallID,
						IdempotencyKey: out.IdempotencyKey, Tool: pc.Tool, State: string(out.State), Reason: stop.Error()}); err != nil {
						return fail(fmt.Errorf("record member_paused: %w", err)), true
					}
					if err := e.durable.record(ctx, e, t); err != nil {
						return fail(err), true
					}
					recordDone = nil
				}
				res.ToolCalls++ // it went through the boundary; the checkpoint counts it when it is answered
				if !slices.Contains(res.ToolsUsed, pc.Tool) {
					res.ToolsUsed = append(res.ToolsUsed, pc.Tool)
				}
				return fail(stop), true
			}
			res.ToolCalls++
			if !slices.Contains(res.ToolsUsed, pc.Tool) {
				res.ToolsUsed = append(res.ToolsUsed, pc.Tool)
			}
			content := out.Result
			if out.State != tool.StateSucceeded {
				content = "error: " + out.Error
			}
			messages = append(messages, provider.Message{Role: "tool", ToolCallID: pc.ToolCallID, Content: content})
			pending = pending[1:]
		}
		return MemberResult{}, false
	}
	if r, stop := answer(); stop {
		return r
	}

	for ; requests < e.maxTurns; requests++ {
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("cancelled before request %d: %w", requests, err))
		}
		if r, stop := runPaused(nil); stop {
			return r
		}
		// Rule 11: tokens are reserved on the boundary's budget before the request goes out and
		// charged with what the response reported (unknown stays unknown).
		tokens, err := e.boundary.Budget().ReserveRequest(m.ID)
		if err != nil {
			bg := e.boundary.Budget()
			_ = e.Emit(ctx, m.ID, session, event.BudgetRefused{Request: "provider", Error: err.Error(),
				MemberUsage: bg.Member(m.ID), TeamUsage: bg.Team()})
			return fail(fmt.Errorf("provider request refused by the token budget: %w", err))
		}
		seq := e.nextSeq(session)
		resp, err := e.provider.Complete(ctx, provider.Request{SessionID: session, Seq: seq, Model: e.model,
			Messages: messages, Tools: defs, Stream: e.stream})
		tokens.Commit(reportedTokens(resp))
		if resp != nil {
			res.Usage.Add(resp.Usage)
			res.HTTPAttempts += resp.Attempts
		}
		if rerr := e.recordExchange(ctx, m.ID, session, seq, resp, err); rerr != nil {
			return fail(rerr)
		}
		if err != nil {
			return fail(fmt.Errorf("provider request %d: %w", seq, err))
		}
		msg := resp.Message
		if len(msg.ToolCalls) == 0 {
			res.Output = msg.Content
			if cerr := checkReply(*contract, msg.Content); cerr != nil {
				if errors.Is(cerr, ErrMalformedReply) {
					res.ContractViolation = contract.Line.Contract
					_ = e.Emit(ctx, m.ID, session, event.Warning{Warning: cerr.Error(),
						Contract: contract.Line.Contract, Reply: truncate(msg.Content, 2048)})
				}
				return fail(cerr)
			}
			res.Success, res.Duration = true, prior+time.Since(start)
			p := payload()
			p.Output = res.Output
			if err := e.Emit(ctx, m.ID, session, event.MemberCompleted{MemberTurn: p}); err != nil {
				return fail(fmt.Errorf("record member_completed: %w", err))
			}
			if recordDone != nil {
				if err := recordDone(res); err != nil {
					recordDone = nil
					return fail(err)
				}
			}
			return res
		}
		for _, tc := range msg.ToolCalls {
			if a := strings.TrimSpace(tc.Function.Arguments); !json.Valid([]byte(a)) || !strings.HasPrefix(a, "{") {
				err := fmt.Errorf("%w: call %s (%s) at request %d: %q", ErrInvalidToolArguments, tc.ID, tc.Function.Name, seq,
					truncate(tc.Function.Arguments, 200))
				_ = e.Emit(ctx, m.ID, session, event.Warning{Warning: err.Error(), CallID: tc.ID,
					Tool: tc.Function.Name, RawArguments: tc.Function.Arguments, FinishReason: resp.FinishReason})
				return fail(err)
			}
		}
		messages = append(messages, provider.Message{Role: "assistant", Content: msg.Content, ToolCalls: msg.ToolCalls})
		for _, tc := range msg.ToolCalls {
			pending = append(pending, PendingCall{ToolCallID: tc.ID, CallID: fmt.Sprintf("r%d-%s", seq, tc.ID),
				Tool: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if e.durable != nil {
			// Before anything is dispatched: a crash from here on resumes with these calls pending.
			t := turnState(TurnInFlight)
			t.Requests = requests + 1
			if err := e.durable.record(ctx, e, t); err != nil {
				return fail(err)
			}
		}
		if r, stop := answer(); stop {
			return r
		}
	}
	return fail(fmt.Errorf("no %s reply within %d provider requests", contract.Line.Contract, e.maxTurns))
}

// checkReply applies the contract's check, or the bare JSON-object rule when it has none.
func checkReply(c Contract, reply string) error {
	if c.Check != nil {
		return c.Check(reply)
	}
	var obj map[string]json.RawMessage
	return DecodeExact([]byte(reply), &obj)
}

// reportedTokens is what a provider request is charged to the token budget: the total tokens its
// response reported, or nil (unknown, never zero) when there was no response, the response
// reported no usage, or the client retried (the failed attempts reported none).
func reportedTokens(resp *provider.Response) *int64 {
	if resp == nil || resp.Usage == nil || resp.Attempts > 1 {
		return nil
	}
	t := resp.Usage.TotalTokens
	return &t
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
