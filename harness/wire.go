package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// The harness's own reading of a recorded provider response: the raw bytes the runtime received,
// stored as the provider_exchange's response artifact, parsed here by a path that shares no code
// with the runtime's client (runtime/provider) or the gateway's usage extraction (harness/gateway).
// It is what the checks re-derive from (DESIGN.md, "Checks re-derive"): the members' replies, the
// formations' decisions, the answered model and the "wire" usage source.

// wireReply is one response as the recorded bytes say, choice 0 only.
type wireReply struct {
	// Model is the response's "model" (for a stream, the first non-empty chunk model); "" when absent.
	Model string
	// Content is the assistant message's text (a stream's content fragments joined).
	Content string
	// ToolCalls are the tool calls of the message, in index order.
	ToolCalls []wireToolCall
	// FinishReason is choice 0's finish_reason ("" when absent).
	FinishReason string
	// Usage is the usage object, nil when the response reported none (unknown, never zero).
	Usage *wireUsage
	// Stream is true for a text/event-stream body; Done is true when it ended with "data: [DONE]".
	Stream, Done bool
}

type wireToolCall struct {
	ID, Name, Arguments string
}

// wireUsage is a usage object's counts (OpenAI chat completions: prompt_tokens, completion_tokens,
// total_tokens, prompt_tokens_details.cached_tokens, completion_tokens_details.reasoning_tokens),
// each nil when the object did not carry it.
type wireUsage struct {
	Prompt, Completion, Total, Cached, Reasoning *int64
}

// errWireBroken marks a recorded stream that did not end with [DONE]: its usage and content are
// not a complete reading.
var errWireBroken = errors.New("the recorded stream ended without data: [DONE]")

// parseWire parses recorded response bytes: a JSON chat.completion object, or an SSE stream of
// chat.completion.chunk objects when the body starts with an SSE field or comment. An error
// response ({"error":...}), malformed JSON, or a stream that ended without [DONE] is an error; the
// caller reports what it could not read as unknown.
func parseWire(raw []byte) (wireReply, error) {
	body := bytes.TrimPrefix(raw, []byte("\xEF\xBB\xBF"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return parseWireJSON(trimmed)
	}
	return parseWireSSE(body)
}

type wireObject struct {
	Model   string          `json:"model"`
	Error   json.RawMessage `json:"error"`
	Usage   json.RawMessage `json:"usage"`
	Choices []struct {
		Index int `json:"index"`
		// Message is a chat.completion's message, Delta a chunk's: the same fields.
		Message      wireMessage `json:"message"`
		Delta        wireMessage `json:"delta"`
		FinishReason *string     `json:"finish_reason"`
	} `json:"choices"`
}

type wireMessage struct {
	Content   *string `json:"content"`
	ToolCalls []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func parseWireJSON(body []byte) (wireReply, error) {
	var o wireObject
	if err := json.Unmarshal(body, &o); err != nil {
		return wireReply{}, fmt.Errorf("response is not a chat.completion object: %v", err)
	}
	if len(o.Error) > 0 && string(o.Error) != "null" {
		return wireReply{}, fmt.Errorf("response is an error object: %s", truncateText(string(o.Error), 200))
	}
	r := wireReply{Model: o.Model}
	u, err := readWireUsage(o.Usage)
	if err != nil {
		return wireReply{}, err
	}
	r.Usage = u
	for _, c := range o.Choices {
		if c.Index != 0 {
			continue
		}
		if c.Message.Content != nil {
			r.Content = *c.Message.Content
		}
		for _, tc := range c.Message.ToolCalls {
			args, err := argumentText(tc.Function.Arguments)
			if err != nil {
				return wireReply{}, err
			}
			r.ToolCalls = append(r.ToolCalls, wireToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
		if c.FinishReason != nil {
			r.FinishReason = *c.FinishReason
		}
	}
	return r, nil
}

// parseWireSSE reads an event stream (WHATWG HTML, "Interpreting an event stream": lines end in
// CRLF, LF or CR; ':' starts a comment; data lines of one event join with LF; a blank line ends
// the event; an unfinished event at the end is discarded).
func parseWireSSE(body []byte) (wireReply, error) {
	text := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	var events []string
	var data []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			if len(data) > 0 {
				events = append(events, strings.Join(data, "\n"))
				data = nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	r := wireReply{Stream: true}
	type call struct {
		id, name string
		args     strings.Builder
	}
	calls := map[int]*call{}
	var content strings.Builder
	for i, ev := range events {
		if ev == "[DONE]" {
			if i != len(events)-1 {
				return wireReply{}, errors.New("the recorded stream has events after data: [DONE]")
			}
			r.Done = true
			break
		}
		var o wireObject
		if err := json.Unmarshal([]byte(ev), &o); err != nil {
			return wireReply{}, fmt.Errorf("stream event %d is not a chat.completion.chunk: %v", i+1, err)
		}
		if len(o.Error) > 0 && string(o.Error) != "null" {
			return wireReply{}, fmt.Errorf("stream event %d is an error object: %s", i+1, truncateText(string(o.Error), 200))
		}
		if r.Model == "" {
			r.Model = o.Model
		}
		if len(o.Usage) > 0 && string(o.Usage) != "null" {
			u, err := readWireUsage(o.Usage)
			if err != nil {
				return wireReply{}, err
			}
			r.Usage = u // the last usage object of a stream is its total
		}
		for _, c := range o.Choices {
			if c.Index != 0 {
				continue
			}
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				idx := len(calls)
				if tc.Index != nil {
					idx = *tc.Index
				}
				cl, ok := calls[idx]
				if !ok {
					cl = &call{}
					calls[idx] = cl
				}
				if cl.id == "" {
					cl.id = tc.ID
				}
				if cl.name == "" {
					cl.name = tc.Function.Name
				}
				args, err := argumentText(tc.Function.Arguments)
				if err != nil {
					return wireReply{}, err
				}
				cl.args.WriteString(args)
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				r.FinishReason = *c.FinishReason
			}
		}
	}
	r.Content = content.String()
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		r.ToolCalls = append(r.ToolCalls, wireToolCall{ID: calls[i].id, Name: calls[i].name, Arguments: calls[i].args.String()})
	}
	if !r.Done {
		return r, errWireBroken
	}
	return r, nil
}

// argumentText is a tool call's arguments as text: a JSON string unquoted, an object as sent, null
// or absent as "".
func argumentText(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "", nil
	}
	if t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return "", fmt.Errorf("tool call arguments: %v", err)
		}
		return s, nil
	}
	return string(t), nil
}

// readWireUsage reads a usage object; nil (unknown) for an absent or null one. A count that is not
// a non-negative integer is an error: the harness does not guess a figure.
func readWireUsage(raw json.RawMessage) (*wireUsage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var u struct {
		Prompt     *json.Number `json:"prompt_tokens"`
		Completion *json.Number `json:"completion_tokens"`
		Total      *json.Number `json:"total_tokens"`
		PromptD    *struct {
			Cached *json.Number `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionD *struct {
			Reasoning *json.Number `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&u); err != nil {
		return nil, fmt.Errorf("usage object: %v", err)
	}
	var out wireUsage
	var bad error
	count := func(name string, n *json.Number) *int64 {
		if n == nil {
			return nil
		}
		v, err := n.Int64()
		if err != nil || v < 0 {
			bad = fmt.Errorf("usage %s %s is not a non-negative integer", name, n.String())
			return nil
		}
		return &v
	}
	out.Prompt, out.Completion, out.Total = count("prompt_tokens", u.Prompt), count("completion_tokens", u.Completion), count("total_tokens", u.Total)
	if u.PromptD != nil {
		out.Cached = count("cached_tokens", u.PromptD.Cached)
	}
	if u.CompletionD != nil {
		out.Reasoning = count("reasoning_tokens", u.CompletionD.Reasoning)
	}
	if bad != nil {
		return nil, bad
	}
	if out.Prompt == nil && out.Completion == nil && out.Total == nil {
		return nil, nil
	}
	return &out, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// wireRequest is the part of a recorded request body the checks read.
type wireRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string  `json:"role"`
		Content    *string `json:"content"`
		ToolCallID string  `json:"tool_call_id"`
	} `json:"messages"`
}

// parseWireRequest parses recorded request bytes.
func parseWireRequest(raw []byte) (wireRequest, error) {
	var r wireRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("request is not a chat completions request: %v", err)
	}
	return r, nil
}

// userText joins the request's user messages' content.
func (r wireRequest) userText() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "user" && m.Content != nil {
			parts = append(parts, *m.Content)
		}
	}
	return strings.Join(parts, "\n")
}

// toolResults returns the request's tool messages: tool call id -> the content shown to the model.
func (r wireRequest) toolResults() map[string]string {
	out := map[string]string{}
	for _, m := range r.Messages {
		if m.Role == "tool" && m.Content != nil {
			out[m.ToolCallID] = *m.Content
		}
	}
	return out
}
