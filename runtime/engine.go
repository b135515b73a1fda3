package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/tool"
)

// Engine runs members: the chat loop against the provider with tool calls through the one
// boundary. It is safe for concurrent use by the members of one team.
type Engine struct {
	provider provider.Provider
	model    string
	stream   bool
	sink     Sink
	boundary *tool.Boundary
	tools    map[string]tool.Tool
	maxTurns int
	budget   int

	mu sync.Mutex
	// seqs is each session's next request sequence number, so a member invoked several times
	// (iterations, rounds, speaking turns, retries) never reuses a number: artifacts, call ids and
	// replay are keyed by it.
	seqs map[string]int
	// invocations counts each session's invocations (1-based in events).
	invocations map[string]int
	// durable is set for a durable team run (EngineConfig.Durable).
	durable *durableRun
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	Provider provider.Provider
	Model    string
	// Stream asks for SSE streaming responses.
	Stream bool
	Sink   Sink
	// Tools are the tools the boundary knows (default tool.Builtins()).
	Tools map[string]tool.Tool
	// MaxTurns bounds the provider requests per member invocation (default 8).
	MaxTurns int
	// ToolBudget is the default maximum tool calls per member invocation (default 16).
	ToolBudget int
	// BoundaryOptions configure the one tool boundary every call of every member passes
	// (tool.WithPolicy, tool.WithApprovals, tool.WithMode, tool.WithBudget, tool.WithRedactor, ...).
	// Without any, the boundary allows every call within a member's allowed tools, in live mode,
	// with no budget beyond ToolBudget and no redaction of secret values.
	BoundaryOptions []tool.Option
	// Durable turns durable execution on: every turn is checkpointed at its boundaries, a pause
	// stops new turns, and Restore resumes a checkpointed run (see DurableState). nil for none.
	Durable *DurableConfig
}

// NewEngine returns an Engine. Provider, Model and Sink are required.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.Provider == nil || cfg.Sink == nil || cfg.Model == "" {
		return nil, errors.New("runtime: engine needs a provider, a model and a sink")
	}
	if cfg.Tools == nil {
		cfg.Tools = tool.Builtins()
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 8
	}
	if cfg.ToolBudget <= 0 {
		cfg.ToolBudget = 16
	}
	e := &Engine{provider: cfg.Provider, model: cfg.Model, stream: cfg.Stream, sink: cfg.Sink, tools: cfg.Tools,
		maxTurns: cfg.MaxTurns, budget: cfg.ToolBudget, seqs: map[string]int{}, invocations: map[string]int{}}
	e.boundary = tool.NewBoundary(cfg.Tools, sinkJournal{sink: cfg.Sink}, cfg.BoundaryOptions...)
	if d := cfg.Durable; d != nil {
		if d.Checkpoint == nil {
			return nil, errors.New("runtime: a durable engine needs a checkpoint function")
		}
		if d.Restore != nil {
			if err := ValidateDurableState(d.Restore); err != nil {
				return nil, fmt.Errorf("runtime: restore: %w", err)
			}
			for s, n := range d.Restore.Seqs {
				e.seqs[s] = n
			}
			// What the earlier processes consumed still counts against the budgets (rule 11).
			if d.Consumed != nil {
				for member, c := range d.Consumed {
					e.boundary.Budget().Restore(member, c.ToolCalls, c.Tokens)
				}
			} else {
				for _, t := range d.Restore.Turns {
					e.boundary.Budget().Restore(t.MemberID, int64(t.Result.ToolCalls), knownTokens(t.Result.Usage))
				}
			}
		}
		e.durable = newDurableRun(d)
		if d.Restore != nil {
			e.durable.state.RunID, e.durable.state.Formation = d.Restore.RunID, d.Restore.Formation
		}
	}
	return e, nil
}

// Boundary returns the engine's tool boundary (its approval store, effect ledger and policy digest).
func (e *Engine) Boundary() *tool.Boundary { return e.boundary }

// MemberTools returns the tool names a member may call and whether it is restricted to read-only
// tools: its AllowedTools, or tool.DefaultAllowedTools for its roles when it lists none; reviewers
// (tool.IsReviewer: reviewer, critic, judge by domain or formation role) are read-only whatever
// their spec lists.
func (e *Engine) MemberTools(m MemberSpec) (allowed []string, readOnly bool) {
	allowed = m.AllowedTools
	if len(allowed) == 0 {
		allowed = tool.DefaultAllowedTools(e.tools, m.DomainRole, m.FormationRole)
	}
	return slices.Clone(allowed), tool.IsReviewer(m.DomainRole, m.FormationRole)
}

// Model is the model id the engine asks the provider for.
func (e *Engine) Model() string { return e.model }

// ToolAccess returns the declared access mode of a tool the engine knows, false when it knows none
// by that name. Formations use it to refuse write-capable tools for members that do not implement.
func (e *Engine) ToolAccess(name string) (tool.AccessMode, bool) {
	t, ok := e.tools[name]
	return t.Access, ok
}

// ErrCapacityUnavailable is returned (wrapped) when capacity-aware admission is asked for and the
// provider declares no usable parallel capacity for the model.
var ErrCapacityUnavailable = errors.New("provider parallel capacity unavailable")

// ParallelCapacity asks the provider for its declared parallel capacity for the engine's model.
// It returns ErrCapacityUnavailable (wrapped) when the provider does not implement
// provider.CapacityReporter, reports an error, or declares a value below 1.
func (e *Engine) ParallelCapacity(ctx context.Context) (int, error) {
	r, ok := e.provider.(provider.CapacityReporter)
	if !ok {
		return 0, fmt.Errorf("%w: the provider client cannot report capacity", ErrCapacityUnavailable)
	}
	n, err := r.ParallelCapacity(ctx, e.model)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrCapacityUnavailable, err)
	}
	if n < 1 {
		return 0, fmt.Errorf("%w: declared capacity %d for model %s is not a positive integer", ErrCapacityUnavailable, n, e.model)
	}
	return n, nil
}

// nextSeq reserves the session's next request sequence number.
func (e *Engine) nextSeq(session string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.seqs[session]
	e.seqs[session] = n + 1
	return n
}

func (e *Engine) nextInvocation(session string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.invocations[session]++
	return e.invocations[session]
}

// Emit records payload p as an event of member memberID (session sessionID; both "" for a team
// event) through the engine's sink. Errors are the sink's: evidence that cannot be recorded.
func (e *Engine) Emit(ctx context.Context, memberID, sessionID string, p event.Payload) error {
	ev, err := NewEvent(memberID, sessionID, p)
	if err != nil {
		return err
	}
	return e.sink.Emit(ctx, ev)
}

// sinkJournal records the boundary's intents and outcomes as tool_call and tool_result events.
type sinkJournal struct{ sink Sink }

func (j sinkJournal) Intent(ctx context.Context, in tool.Intent) error {
	ev, err := NewEvent(in.MemberID, in.SessionID, event.ToolCall{Intent: in})
	if err != nil {
		return err
	}
	return j.sink.Emit(ctx, ev)
}

func (j sinkJournal) Outcome(ctx context.Context, out tool.Outcome) error {
	ev, err := NewEvent(out.MemberID, out.SessionID, event.ToolResult{Outcome: out})
	if err != nil {
		return err
	}
	return j.sink.Emit(ctx, ev)
}
