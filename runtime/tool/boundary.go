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

	"github.com/gowebpki/jcs"
)

// Outcome states of an effect (DESIGN.md vocabulary). Terminal states never regress.
const (
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateUnknown   = "unknown"
	StateCancelled = "cancelled"
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
	// Root is the member's directory; every path argument is resolved inside it.
	Root string
	// Allowed is the member's allowed tool names; a tool not in it is refused.
	Allowed []string
}

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
	// Arguments is the RFC 8785 canonical form of the arguments (empty when they were not valid JSON).
	Arguments json.RawMessage `json:"arguments"`
	// PayloadSHA256 is the SHA-256 hex (64 chars) of Arguments.
	PayloadSHA256 string `json:"payload_sha256"`
	// Dispatched is false when the call was refused before dispatch (unknown tool, not allowed,
	// invalid arguments): the intent is still recorded so the refusal is evidence.
	Dispatched bool `json:"dispatched"`
}

// Outcome is the record written after the call ends.
type Outcome struct {
	RunID          string `json:"run_id"`
	MemberID       string `json:"member_id"`
	SessionID      string `json:"session_id"`
	CallID         string `json:"call_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Tool           string `json:"tool"`
	// State is succeeded, failed, unknown or cancelled.
	State string `json:"state"`
	// Result is what the tool returned (the text the model sees on success).
	Result string `json:"result"`
	// Error is the failure text, "" on success.
	Error string `json:"error"`
	// ReconciliationRequired is true for unknown outcomes: the effect may have committed.
	ReconciliationRequired bool `json:"reconciliation_required"`
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

// Boundary is the one entry point every tool call passes. It is safe for concurrent use by the
// members of one team.
type Boundary struct {
	tools   map[string]Tool
	journal Journal

	mu    sync.Mutex
	calls map[string]*callRecord // by idempotency key
}

type callRecord struct {
	payload string
	done    chan struct{}
	outcome Outcome
}

// NewBoundary returns a boundary over the given tools (by name) that records through journal.
func NewBoundary(tools map[string]Tool, journal Journal) *Boundary {
	return &Boundary{tools: tools, journal: journal, calls: map[string]*callRecord{}}
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

// Invoke runs one call through the boundary: it snapshots the call, refuses what is not allowed or
// not valid (recording the refusal), records the intent, dispatches, and records the outcome. The
// returned Outcome is the recorded one. A repeated call id with identical content returns the
// original outcome (concurrent duplicates share one execution); with different content it returns
// ErrDuplicateCall and nothing executes. An error is returned only when the journal failed or the
// call conflicts; the call then did not dispatch unless the Outcome says otherwise.
func (b *Boundary) Invoke(ctx context.Context, c Call) (Outcome, error) {
	// Rule 1: snapshot before any await; nothing the caller still holds changes what executes.
	c.Allowed = slices.Clone(c.Allowed)
	key := c.RunID + ":" + c.MemberID + ":" + c.CallID
	identity := c.Tool + "\x00" + c.Arguments + "\x00" + c.Root

	b.mu.Lock()
	if prev, ok := b.calls[key]; ok {
		b.mu.Unlock()
		if prev.payload != identity {
			return Outcome{}, fmt.Errorf("%w: call %s of member %s", ErrDuplicateCall, c.CallID, c.MemberID)
		}
		select {
		case <-prev.done:
			return prev.outcome, nil
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
	rec := &callRecord{payload: identity, done: make(chan struct{})}
	b.calls[key] = rec
	b.mu.Unlock()

	out, err := b.invoke(ctx, c, key)
	rec.outcome = out
	close(rec.done)
	return out, err
}

func (b *Boundary) invoke(ctx context.Context, c Call, key string) (Outcome, error) {
	in := Intent{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID, CallID: c.CallID,
		IdempotencyKey: key, Tool: c.Tool}
	out := Outcome{RunID: c.RunID, MemberID: c.MemberID, SessionID: c.SessionID, CallID: c.CallID,
		IdempotencyKey: key, Tool: c.Tool}

	refuse := func(reason error) (Outcome, error) {
		if err := b.journal.Intent(ctx, in); err != nil {
			return Outcome{}, fmt.Errorf("record refused intent %s: %w", key, err)
		}
		out.State, out.Error = StateFailed, "refused before dispatch: "+reason.Error()
		if err := b.journal.Outcome(ctx, out); err != nil {
			return out, fmt.Errorf("record outcome %s: %w", key, err)
		}
		return out, nil
	}

	if c.CallID == "" {
		return refuse(fmt.Errorf("%w: call id is empty", ErrInvalidArguments))
	}
	canonical, err := canonicalArguments(c.Arguments)
	if err == nil {
		in.Arguments = canonical
		sum := sha256.Sum256(canonical)
		in.PayloadSHA256 = hex.EncodeToString(sum[:])
	}
	t, known := b.tools[c.Tool]
	switch {
	case !known:
		return refuse(fmt.Errorf("unknown tool %q", c.Tool))
	case !slices.Contains(c.Allowed, c.Tool):
		in.Access = t.Access
		return refuse(fmt.Errorf("tool %q is not in the member's allowed tools", c.Tool))
	case err != nil:
		in.Access = t.Access
		return refuse(err)
	}
	in.Access = t.Access

	root, err := os.OpenRoot(c.Root)
	if err != nil {
		return refuse(fmt.Errorf("member directory %s: %w", c.Root, err))
	}
	defer root.Close()

	in.Dispatched = true
	if err := b.journal.Intent(ctx, in); err != nil {
		// Fail closed: no durable intent, no dispatch.
		return Outcome{}, fmt.Errorf("record intent %s: %w", key, err)
	}
	result, runErr := t.Run(ctx, root, canonical)
	switch {
	case runErr == nil:
		out.State, out.Result = StateSucceeded, result
	case ctx.Err() != nil && t.Access != ReadOnly:
		// The call was dispatched and the context ended: it may have committed (rule 8).
		out.State, out.Error, out.ReconciliationRequired = StateUnknown, runErr.Error(), true
	case ctx.Err() != nil:
		out.State, out.Error = StateCancelled, runErr.Error()
	default:
		out.State, out.Error = StateFailed, runErr.Error()
	}
	// The outcome is recorded even when ctx has ended: evidence of what happened outlives the caller.
	if err := b.journal.Outcome(context.WithoutCancel(ctx), out); err != nil {
		return out, fmt.Errorf("record outcome %s: %w", key, err)
	}
	return out, nil
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
