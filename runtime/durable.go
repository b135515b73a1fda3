package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/assay-audit/assay/runtime/provider"
)

// Durable execution (SAFETY.md rule 14, FORMATIONS.md "Durable").
//
// A durable team run checkpoints every member invocation ("turn") at its boundaries: after each
// provider response that asks for tool calls (before any of them is dispatched), when the member
// pauses, and when the turn ends. The checkpoint state (DurableState) holds, per turn, either its
// final MemberResult or the exact conversation so far with the tool calls still to answer.
//
// Resuming is deterministic replay of the formation over that state: the formation runs again from
// the start, and each turn it asks for is looked up by (member id, invocation number) and checked
// against the SHA-256 of its input (the messages it starts from and the tools it is offered):
//
//   - a turn that ended (succeeded or failed) is restored from its recorded result, without a
//     provider request or a tool call (a member_restored event says so);
//   - a turn that paused or was in flight continues from its recorded conversation: its pending
//     tool calls are delivered to the boundary again under their original call ids, so a call the
//     boundary already decided returns its recorded outcome and is never dispatched twice, a call
//     awaiting approval runs only if an approval now covers it exactly, and an unknown effect stays
//     unknown until reconciled;
//   - a turn with no record runs normally;
//   - a turn whose input differs from the recorded one is refused (ErrResumeDiverged): the run
//     is not the one that was checkpointed, and nothing is asked of the model.
//
// A pause (a call awaiting approval, or an effect left unknown) stops the run from starting any new
// turn: members already running finish or pause at their own next call, and every later turn
// returns at once as not started (MemberResult.Paused).

// DurableStateVersion is the version of DurableState's JSON form.
const DurableStateVersion = 1

// DurableState is the checkpoint state of a durable team run, stored as JSON (snake_case keys) in
// the evidence store's checkpoints. It is complete: resuming needs nothing but it, the run's
// recorded tool events and the team as configured.
type DurableState struct {
	Version int `json:"version"`
	// RunID is the team's run id: the identity its session ids and idempotency keys are built
	// from. A resumed run keeps it, so its sessions and keys continue those of the first run.
	RunID     string `json:"run_id"`
	Formation string `json:"formation"`
	// Turns are the recorded turns in the order they were first recorded.
	Turns []TurnState `json:"turns"`
	// Seqs is each session's next provider request sequence number.
	Seqs map[string]int `json:"seqs"`
	// Paused is set once any turn paused; Pauses says why, one line per pause.
	Paused bool     `json:"paused"`
	Pauses []string `json:"pauses,omitempty"`
}

// Turn statuses in DurableState.
const (
	TurnCompleted = "completed" // ended, succeeded or failed; Result is final
	TurnInFlight  = "in_flight" // a response asked for tool calls; Pending are not all answered
	TurnPaused    = "paused"    // stopped at Pending[0] (awaiting approval or reconciliation, or not dispatched because the run paused), or before a provider request because the run paused
)

// TurnState is one member invocation in a checkpoint.
type TurnState struct {
	MemberID   string `json:"member_id"`
	SessionID  string `json:"session_id"`
	Invocation int    `json:"invocation"` // 1-based, per session
	// InputSHA256 is SHA-256 hex over the turn's first messages and offered tool names (turnInput).
	InputSHA256 string `json:"input_sha256"`
	Status      string `json:"status"`
	// Result is the final result (completed) or the counters so far (in flight, paused).
	Result MemberResult `json:"result"`
	// Requests is how many provider requests the turn has made.
	Requests int `json:"requests"`
	// Messages is the conversation so far (in flight, paused), ending with the assistant message
	// whose Pending calls are not yet answered.
	Messages []CheckpointMessage `json:"messages,omitempty"`
	// Pending are the tool calls of the last assistant message not yet answered, in order.
	Pending []PendingCall `json:"pending,omitempty"`
	// PauseReason says why the turn paused ("" otherwise).
	PauseReason string `json:"pause_reason,omitempty"`
}

// CheckpointMessage is a provider.Message in checkpoint form.
type CheckpointMessage struct {
	Role       string                  `json:"role"`
	Content    string                  `json:"content"`
	ToolCalls  []CheckpointToolCallMsg `json:"tool_calls,omitempty"`
	ToolCallID string                  `json:"tool_call_id,omitempty"`
}

// CheckpointToolCallMsg is a provider.ToolCall in checkpoint form.
type CheckpointToolCallMsg struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// PendingCall is a tool call asked for and not yet answered: the provider's call id, the boundary
// call id it was (or will be) delivered under, and what it asks.
type PendingCall struct {
	ToolCallID string `json:"tool_call_id"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Arguments  string `json:"arguments"`
}

// DurableConfig turns durable execution on for an engine's team run.
type DurableConfig struct {
	// Checkpoint stores a state (DurableState as JSON). It is called with the states in order, one
	// at a time; an error fails the member whose boundary it was (evidence that cannot be recorded
	// is not dropped).
	Checkpoint func(ctx context.Context, state json.RawMessage) error
	// Restore is the state of the run being resumed; nil for a first run.
	Restore *DurableState
	// Consumed is what the earlier processes of the run consumed, by member, as the caller's
	// evidence establishes it; it is charged to the budget before anything runs. nil charges what
	// the restored turns' results hold, which misses what a process that crashed did after its
	// last checkpoint: a caller with the run's journal should give it.
	Consumed map[string]Consumption
}

// Consumption is what one member consumed: tool calls dispatched, and provider tokens (nil when
// unknown: a response without usage, or a request that may have been outstanding at a crash).
type Consumption struct {
	ToolCalls int64
	Tokens    *int64
}

// ErrResumeDiverged is returned (wrapped, naming the turn) when a resumed run asks for a turn whose
// input differs from the one recorded under the same member and invocation: the formation did not
// replay what was checkpointed. Nothing is asked of the model.
var ErrResumeDiverged = errors.New("resumed run diverged from its checkpoint")

// ErrRunPaused is the error of a turn not started because the run paused.
var ErrRunPaused = errors.New("not started: the run paused")

// durableRun is an engine's durable state.
type durableRun struct {
	checkpoint func(ctx context.Context, state json.RawMessage) error

	mu       sync.Mutex
	state    DurableState
	index    map[turnKey]int // into state.Turns
	restore  map[turnKey]TurnState
	resuming bool
}

type turnKey struct {
	member     string
	invocation int
}

func newDurableRun(cfg *DurableConfig) *durableRun {
	d := &durableRun{checkpoint: cfg.Checkpoint, index: map[turnKey]int{}, restore: map[turnKey]TurnState{},
		state: DurableState{Version: DurableStateVersion, Seqs: map[string]int{}}}
	if r := cfg.Restore; r != nil {
		d.resuming = true
		for _, t := range r.Turns {
			d.restore[turnKey{t.MemberID, t.Invocation}] = t
		}
	}
	return d
}

// ValidateDurableState checks a restored state's version and shape.
func ValidateDurableState(s *DurableState) error {
	if s.Version != DurableStateVersion {
		return fmt.Errorf("durable state version %d is not %d", s.Version, DurableStateVersion)
	}
	seen := map[turnKey]bool{}
	for _, t := range s.Turns {
		k := turnKey{t.MemberID, t.Invocation}
		switch {
		case t.MemberID == "" || t.Invocation < 1:
			return fmt.Errorf("durable state: turn without member or invocation")
		case seen[k]:
			return fmt.Errorf("durable state: turn %s#%d recorded twice", t.MemberID, t.Invocation)
		case !slices.Contains([]string{TurnCompleted, TurnInFlight, TurnPaused}, t.Status):
			return fmt.Errorf("durable state: turn %s#%d has status %q", t.MemberID, t.Invocation, t.Status)
		case t.Status != TurnCompleted && len(t.Messages) < 2:
			return fmt.Errorf("durable state: %s turn %s#%d has no conversation", t.Status, t.MemberID, t.Invocation)
		case t.Status == TurnInFlight && len(t.Pending) == 0:
			// A paused turn may have none: it stopped before a provider request because the run paused.
			return fmt.Errorf("durable state: in-flight turn %s#%d has no pending call", t.MemberID, t.Invocation)
		}
		seen[k] = true
	}
	return nil
}

// take returns and forgets the restored turn recorded for k.
func (d *durableRun) take(k turnKey) (TurnState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.restore[k]
	delete(d.restore, k)
	return t, ok
}

// bind records the team's run id and formation on the first turn and returns the run id the state
// belongs to (a restored state's).
func (d *durableRun) bind(team Team) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state.RunID == "" {
		d.state.RunID, d.state.Formation = team.RunID, team.Formation
	}
	return d.state.RunID
}

// paused reports whether the run paused.
func (d *durableRun) paused() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state.Paused
}

// record stores turn t (replacing its earlier record) and writes a checkpoint of the whole state.
// seqs is the engine's current sequence map. Checkpoints are written one at a time, in the order
// of the states they hold.
func (d *durableRun) record(ctx context.Context, e *Engine, t TurnState) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := turnKey{t.MemberID, t.Invocation}
	if i, ok := d.index[k]; ok {
		d.state.Turns[i] = t
	} else {
		d.index[k] = len(d.state.Turns)
		d.state.Turns = append(d.state.Turns, t)
	}
	if t.Status == TurnPaused {
		d.state.Paused = true
		d.state.Pauses = append(d.state.Pauses, fmt.Sprintf("%s (invocation %d): %s", t.MemberID, t.Invocation, t.PauseReason))
	}
	e.mu.Lock()
	d.state.Seqs = make(map[string]int, len(e.seqs))
	for s, n := range e.seqs {
		d.state.Seqs[s] = n
	}
	e.mu.Unlock()
	b, err := json.Marshal(d.state)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	if err := d.checkpoint(context.WithoutCancel(ctx), b); err != nil {
		return fmt.Errorf("record checkpoint: %w", err)
	}
	return nil
}

// State returns a copy of the engine's durable state, false when the engine is not durable.
func (e *Engine) State() (DurableState, bool) {
	if e.durable == nil {
		return DurableState{}, false
	}
	e.durable.mu.Lock()
	defer e.durable.mu.Unlock()
	b, _ := json.Marshal(e.durable.state)
	var s DurableState
	_ = json.Unmarshal(b, &s)
	return s, true
}

// Paused reports whether a durable run paused (a call awaits approval or an effect awaits
// reconciliation) and why; false for an engine that is not durable.
func (e *Engine) Paused() (bool, []string) {
	if e.durable == nil {
		return false, nil
	}
	e.durable.mu.Lock()
	defer e.durable.mu.Unlock()
	return e.durable.state.Paused, slices.Clone(e.durable.state.Pauses)
}

// Durable reports whether the engine checkpoints its turns.
func (e *Engine) Durable() bool { return e.durable != nil }

// Resuming reports whether the engine restores a checkpointed run (DurableConfig.Restore).
func (e *Engine) Resuming() bool { return e.durable != nil && e.durable.resuming }

// turnInput is SHA-256 hex over what a turn starts from: its first messages and the names of the
// tools it is offered, in JSON.
func turnInput(messages []provider.Message, defs []provider.ToolDef) string {
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	b, _ := json.Marshal(struct {
		Messages []CheckpointMessage `json:"messages"`
		Tools    []string            `json:"tools"`
	}{toCheckpoint(messages), names})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func toCheckpoint(ms []provider.Message) []CheckpointMessage {
	out := make([]CheckpointMessage, 0, len(ms))
	for _, m := range ms {
		c := CheckpointMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, CheckpointToolCallMsg{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, c)
	}
	return out
}

func fromCheckpoint(cs []CheckpointMessage) []provider.Message {
	out := make([]provider.Message, 0, len(cs))
	for _, c := range cs {
		m := provider.Message{Role: c.Role, Content: c.Content, ToolCallID: c.ToolCallID}
		for _, tc := range c.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, provider.ToolCall{ID: tc.ID, Type: tc.Type, Function: provider.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		out = append(out, m)
	}
	return out
}

// knownTokens is a usage total's tokens, nil when any response reported none (unknown, never 0).
func knownTokens(u provider.UsageTotal) *int64 {
	if u.Unknown > 0 {
		return nil
	}
	t := u.TotalTokens
	return &t
}
