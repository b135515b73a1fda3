package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

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
	maxTurns int
	budget   int
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
	// MaxTurns bounds the provider requests per member (default 8).
	MaxTurns int
	// ToolBudget is the default maximum tool calls per member (default 16).
	ToolBudget int
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
	e := &Engine{provider: cfg.Provider, model: cfg.Model, stream: cfg.Stream, sink: cfg.Sink,
		maxTurns: cfg.MaxTurns, budget: cfg.ToolBudget}
	e.boundary = tool.NewBoundary(cfg.Tools, sinkJournal{sink: cfg.Sink})
	return e, nil
}

// Emit sends an event through the engine's sink.
func (e *Engine) Emit(ctx context.Context, typ, memberID, sessionID string, payload any) error {
	ev, err := NewEvent(typ, memberID, sessionID, payload)
	if err != nil {
		return err
	}
	return e.sink.Emit(ctx, ev)
}

// CompletionReply is the structured reply that ends an executor member's work. It is exactly
// {"status":"done","files":["..."]} or {"status":"failed","error":"..."}.
type CompletionReply struct {
	Status string   `json:"status"`
	Files  []string `json:"files,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// CompletionContract is the example included in every executor prompt (FORMATIONS.md: every
// structured prompt includes an example of the contract it expects).
const CompletionContract = `When every file is written, reply with exactly one JSON object and nothing else: ` +
	`{"status":"done","files":["<path>", "..."]} — or, if you cannot complete the task, ` +
	`{"status":"failed","error":"<why>"}. No prose, no markdown fences.`

// ErrMalformedReply is returned when a structured reply breaks its contract: prose around the JSON,
// fences, extra or missing keys, malformed JSON. There is no fallback parsing.
var ErrMalformedReply = errors.New("malformed structured reply")

// ParseCompletion parses a completion reply strictly.
func ParseCompletion(text string) (CompletionReply, error) {
	var r CompletionReply
	if err := DecodeExact([]byte(text), &r); err != nil {
		return r, err
	}
	switch r.Status {
	case "done":
		if r.Error != "" {
			return r, fmt.Errorf("%w: status done with an error field", ErrMalformedReply)
		}
	case "failed":
		if r.Error == "" || len(r.Files) > 0 {
			return r, fmt.Errorf("%w: status failed needs exactly an error field", ErrMalformedReply)
		}
	default:
		return r, fmt.Errorf("%w: status %q is neither done nor failed", ErrMalformedReply, r.Status)
	}
	return r, nil
}

// DecodeExact decodes data as exactly one JSON object into v: unknown keys, trailing text and
// anything before the object are ErrMalformedReply.
func DecodeExact(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object: %q", ErrMalformedReply, truncate(string(trimmed), 80))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedReply, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: text after the JSON object", ErrMalformedReply)
	}
	return nil
}

// exchangePayload is the provider_exchange event: what replay verification needs to serve the
// recorded response for this member request (DESIGN.md, "Replay verification").
type exchangePayload struct {
	Seq              int             `json:"seq"`
	Model            string          `json:"model"`
	Stream           bool            `json:"stream"`
	Status           int             `json:"status"`
	RequestSHA256    string          `json:"request_sha256"`
	RequestArtifact  string          `json:"request_artifact"`
	ResponseSHA256   string          `json:"response_sha256"`
	ResponseArtifact string          `json:"response_artifact"`
	FinishReason     string          `json:"finish_reason"`
	Usage            *provider.Usage `json:"usage"` // null when the response reported none
	ToolCalls        int             `json:"tool_calls"`
	LatencyMS        float64         `json:"latency_ms"` // volatile
	Error            string          `json:"error,omitempty"`
}

type memberPayload struct {
	Formation     string `json:"formation"`
	DomainRole    string `json:"domain_role"`
	FormationRole string `json:"formation_role,omitempty"`
	Dir           string `json:"dir,omitempty"`
	Output        string `json:"output,omitempty"`
	Error         string `json:"error,omitempty"`
	ToolCalls     int    `json:"tool_calls"`
	Requests      int    `json:"requests"`
	UsageUnknown  int    `json:"usage_unknown_responses"`
}

// RunMember runs one member to completion: member_started, then provider requests and tool calls
// until the member replies with its completion contract, then member_completed or member_failed.
// context holds prior outputs given to the member (sequential formation); nil for none. The result
// is never nil-valued: a failure is a MemberResult with Success=false and Error set.
func (e *Engine) RunMember(ctx context.Context, team Team, m MemberSpec, context []string) MemberResult {
	start := time.Now()
	session := team.SessionID(m)
	res := MemberResult{MemberID: m.ID, SessionID: session}
	fail := func(err error) MemberResult {
		res.Success, res.Error, res.Duration = false, err.Error(), time.Since(start)
		_ = e.Emit(ctx, "member_failed", m.ID, session, memberPayload{Formation: team.Formation,
			DomainRole: m.DomainRole, FormationRole: m.FormationRole, Error: res.Error, ToolCalls: res.ToolCalls,
			Requests: res.Usage.Requests, UsageUnknown: res.Usage.Unknown})
		return res
	}
	if err := e.Emit(ctx, "member_started", m.ID, session, memberPayload{Formation: team.Formation,
		DomainRole: m.DomainRole, FormationRole: m.FormationRole, Dir: m.Dir}); err != nil {
		return fail(fmt.Errorf("record member_started: %w", err))
	}

	task := m.Task
	if len(context) > 0 {
		task += "\n\nOutputs of the members before you, in order:\n" + strings.Join(context, "\n")
	}
	messages := []provider.Message{
		{Role: "system", Content: m.Goal + "\n\n" + CompletionContract},
		{Role: "user", Content: task},
	}
	var defs []provider.ToolDef
	for _, t := range e.boundary.Definitions(m.AllowedTools) {
		defs = append(defs, provider.ToolDef{Name: t.Name, Description: t.Doc, Parameters: t.Parameters})
	}
	budget := m.ToolBudget
	if budget <= 0 {
		budget = e.budget
	}

	for turn := 0; turn < e.maxTurns; turn++ {
		if err := ctx.Err(); err != nil {
			return fail(fmt.Errorf("cancelled before request %d: %w", turn, err))
		}
		resp, err := e.provider.Complete(ctx, provider.Request{SessionID: session, Seq: turn, Model: e.model,
			Messages: messages, Tools: defs, Stream: e.stream})
		if resp != nil {
			res.Usage.Add(resp.Usage)
		}
		if rerr := e.recordExchange(ctx, m.ID, session, turn, resp, err); rerr != nil {
			return fail(rerr)
		}
		if err != nil {
			return fail(fmt.Errorf("provider request %d: %w", turn, err))
		}
		msg := resp.Message
		if len(msg.ToolCalls) == 0 {
			reply, perr := ParseCompletion(msg.Content)
			res.Output = msg.Content
			if perr != nil {
				_ = e.Emit(ctx, "warning", m.ID, session, map[string]string{"warning": perr.Error(), "reply": truncate(msg.Content, 2048)})
				return fail(perr)
			}
			if reply.Status != "done" {
				return fail(fmt.Errorf("member reported failure: %s", reply.Error))
			}
			res.Success, res.Duration = true, time.Since(start)
			if err := e.Emit(ctx, "member_completed", m.ID, session, memberPayload{Formation: team.Formation,
				DomainRole: m.DomainRole, FormationRole: m.FormationRole, Output: res.Output, ToolCalls: res.ToolCalls,
				Requests: res.Usage.Requests, UsageUnknown: res.Usage.Unknown}); err != nil {
				return fail(fmt.Errorf("record member_completed: %w", err))
			}
			return res
		}
		messages = append(messages, provider.Message{Role: "assistant", Content: msg.Content, ToolCalls: msg.ToolCalls})
		for _, tc := range msg.ToolCalls {
			if res.ToolCalls >= budget {
				return fail(fmt.Errorf("tool budget of %d calls exhausted", budget))
			}
			res.ToolCalls++
			out, err := e.boundary.Invoke(ctx, tool.Call{RunID: team.RunID, MemberID: m.ID, SessionID: session,
				CallID: fmt.Sprintf("r%d-%s", turn, tc.ID), Tool: tc.Function.Name, Arguments: tc.Function.Arguments,
				Root: m.Dir, Allowed: m.AllowedTools})
			if err != nil {
				return fail(fmt.Errorf("tool call %s: %w", tc.ID, err))
			}
			if out.State == tool.StateUnknown {
				return fail(fmt.Errorf("tool call %s (%s) ended unknown: reconciliation required", tc.ID, tc.Function.Name))
			}
			content := out.Result
			if out.State != tool.StateSucceeded {
				content = "error: " + out.Error
			}
			messages = append(messages, provider.Message{Role: "tool", ToolCallID: tc.ID, Content: content})
		}
	}
	return fail(fmt.Errorf("no completion reply within %d provider requests", e.maxTurns))
}

// recordExchange stores the request and raw response bytes as artifacts and emits provider_exchange.
func (e *Engine) recordExchange(ctx context.Context, memberID, session string, seq int, resp *provider.Response, callErr error) error {
	p := exchangePayload{Seq: seq, Model: e.model, Stream: e.stream}
	if callErr != nil {
		p.Error = callErr.Error()
	}
	if resp != nil {
		p.Status, p.RequestSHA256, p.FinishReason, p.Usage = resp.Status, resp.RequestSHA256, resp.FinishReason, resp.Usage
		p.ToolCalls = len(resp.Message.ToolCalls)
		p.LatencyMS = float64(resp.Latency.Microseconds()) / 1000
		if resp.Model != "" {
			p.Model = resp.Model
		}
		if len(resp.RequestBody) > 0 {
			d, err := e.sink.PutArtifact(ctx, fmt.Sprintf("provider/%s/%d/request.json", session, seq), "application/json", resp.RequestBody)
			if err != nil {
				return fmt.Errorf("store request %d artifact: %w", seq, err)
			}
			p.RequestArtifact = d
		}
		mediaType := "application/json"
		if e.stream {
			mediaType = "text/event-stream"
		}
		d, err := e.sink.PutArtifact(ctx, fmt.Sprintf("provider/%s/%d/response", session, seq), mediaType, resp.Raw)
		if err != nil {
			return fmt.Errorf("store response %d artifact: %w", seq, err)
		}
		p.ResponseArtifact, p.ResponseSHA256 = d, d
	}
	if err := e.Emit(ctx, "provider_exchange", memberID, session, p); err != nil {
		return fmt.Errorf("record provider_exchange %d: %w", seq, err)
	}
	return nil
}

// sinkJournal records the boundary's intents and outcomes as tool_call and tool_result events.
type sinkJournal struct{ sink Sink }

func (j sinkJournal) Intent(ctx context.Context, in tool.Intent) error {
	ev, err := NewEvent("tool_call", in.MemberID, in.SessionID, in)
	if err != nil {
		return err
	}
	return j.sink.Emit(ctx, ev)
}

func (j sinkJournal) Outcome(ctx context.Context, out tool.Outcome) error {
	ev, err := NewEvent("tool_result", out.MemberID, out.SessionID, out)
	if err != nil {
		return err
	}
	return j.sink.Emit(ctx, ev)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
