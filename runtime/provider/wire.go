package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The OpenAI Chat Completions wire shapes. They are kept apart from the
// exported types so that the exported types stay plain values and the wire
// rules (content null next to tool calls, arguments as string or object)
// live in one place.

type wireRequest struct {
	Model         string             `json:"model"`
	Messages      []wireMessage      `json:"messages"`
	Tools         []wireTool         `json:"tools,omitempty"`
	Stream        bool               `json:"stream,omitempty"`
	StreamOptions *wireStreamOptions `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string          `json:"type"`
	Function wireFunctionDef `json:"function"`
}

type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// wireResponse is a non-streaming chat.completion object.
type wireResponse struct {
	Model   string          `json:"model"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index        *int            `json:"index"`
	Message      wireRespMessage `json:"message"`
	FinishReason *string         `json:"finish_reason"`
}

type wireRespMessage struct {
	Role      string             `json:"role"`
	Content   *string            `json:"content"`
	ToolCalls []wireRespToolCall `json:"tool_calls"`
}

type wireRespToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireRespFunction `json:"function"`
}

type wireRespFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// wireChunk is one chat.completion.chunk of a stream.
type wireChunk struct {
	Model   string            `json:"model"`
	Choices []wireChunkChoice `json:"choices"`
	Usage   *wireUsage        `json:"usage"`
	Error   json.RawMessage   `json:"error"`
}

type wireChunkChoice struct {
	Index        *int      `json:"index"`
	Delta        wireDelta `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

type wireDelta struct {
	Role      string              `json:"role"`
	Content   *string             `json:"content"`
	ToolCalls []wireDeltaToolCall `json:"tool_calls"`
}

type wireDeltaToolCall struct {
	Index    *int             `json:"index"`
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireRespFunction `json:"function"`
}

type wireUsage struct {
	PromptTokens            *int64            `json:"prompt_tokens"`
	CompletionTokens        *int64            `json:"completion_tokens"`
	TotalTokens             *int64            `json:"total_tokens"`
	PromptTokensDetails     *wirePromptDetail `json:"prompt_tokens_details"`
	CompletionTokensDetails *wireCompleDetail `json:"completion_tokens_details"`
}

type wirePromptDetail struct {
	CachedTokens *int64 `json:"cached_tokens"`
}

type wireCompleDetail struct {
	ReasoningTokens *int64 `json:"reasoning_tokens"`
}

// encodeRequest builds the exact request body for req.
func encodeRequest(req Request) ([]byte, error) {
	w := wireRequest{Model: req.Model, Messages: make([]wireMessage, 0, len(req.Messages))}
	for i, m := range req.Messages {
		if m.Role == "" {
			return nil, fmt.Errorf("%w: message %d has no role", ErrInvalidRequest, i)
		}
		wm := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			content := m.Content
			wm.Content = &content
		}
		for _, tc := range m.ToolCalls {
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{
				ID:       tc.ID,
				Type:     typ,
				Function: wireFunction{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			})
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%w: a tool has no name", ErrInvalidRequest)
		}
		if len(t.Parameters) > 0 && !json.Valid(t.Parameters) {
			return nil, fmt.Errorf("%w: tool %q parameters are not valid JSON", ErrInvalidRequest, t.Name)
		}
		w.Tools = append(w.Tools, wireTool{
			Type:     "function",
			Function: wireFunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters},
		})
	}
	if req.Stream {
		w.Stream = true
		w.StreamOptions = &wireStreamOptions{IncludeUsage: true}
	}
	// No HTML escaping: "<", ">" and "&" in prompts travel as themselves.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("%w: encode body: %w", ErrInvalidRequest, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// argumentsText turns the wire "arguments" value into JSON text: a JSON
// string is unquoted, a JSON object (sent by some servers) is compacted, and
// null or absent is "".
func argumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", err
		}
		return buf.String(), nil
	default:
		return "", fmt.Errorf("arguments are neither a JSON string nor an object: %.40s", raw)
	}
}

// decodeUsage converts a wire usage object. A nil object is unknown usage
// (nil). An object missing prompt, completion or total tokens, or with a
// negative count, is malformed: assay will not invent the missing number.
func decodeUsage(w *wireUsage) (*Usage, error) {
	if w == nil {
		return nil, nil
	}
	var missing []string
	if w.PromptTokens == nil {
		missing = append(missing, "prompt_tokens")
	}
	if w.CompletionTokens == nil {
		missing = append(missing, "completion_tokens")
	}
	if w.TotalTokens == nil {
		missing = append(missing, "total_tokens")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: usage lacks %s", ErrMalformedResponse, strings.Join(missing, ", "))
	}
	u := &Usage{PromptTokens: *w.PromptTokens, CompletionTokens: *w.CompletionTokens, TotalTokens: *w.TotalTokens}
	if w.PromptTokensDetails != nil && w.PromptTokensDetails.CachedTokens != nil {
		v := *w.PromptTokensDetails.CachedTokens
		u.CachedTokens = &v
	}
	if w.CompletionTokensDetails != nil && w.CompletionTokensDetails.ReasoningTokens != nil {
		v := *w.CompletionTokensDetails.ReasoningTokens
		u.ReasoningTokens = &v
	}
	if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 ||
		(u.CachedTokens != nil && *u.CachedTokens < 0) || (u.ReasoningTokens != nil && *u.ReasoningTokens < 0) {
		return nil, fmt.Errorf("%w: usage has a negative token count", ErrMalformedResponse)
	}
	return u, nil
}

// usageDecreased reports the first field of next that is lower than in prev,
// or "" when none is. Detail fields are compared only when both report them.
func usageDecreased(prev, next *Usage) string {
	switch {
	case next.PromptTokens < prev.PromptTokens:
		return "prompt_tokens"
	case next.CompletionTokens < prev.CompletionTokens:
		return "completion_tokens"
	case next.TotalTokens < prev.TotalTokens:
		return "total_tokens"
	case prev.CachedTokens != nil && next.CachedTokens != nil && *next.CachedTokens < *prev.CachedTokens:
		return "prompt_tokens_details.cached_tokens"
	case prev.ReasoningTokens != nil && next.ReasoningTokens != nil && *next.ReasoningTokens < *prev.ReasoningTokens:
		return "completion_tokens_details.reasoning_tokens"
	}
	return ""
}

// decodeResponse turns a non-streaming 2xx body into a Response's message,
// finish reason, model and usage.
func decodeResponse(body []byte, resp *Response) error {
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("%w: body is not a chat.completion object: %w", ErrMalformedResponse, err)
	}
	if len(w.Error) > 0 && !bytes.Equal(bytes.TrimSpace(w.Error), []byte("null")) {
		return fmt.Errorf("%w: 2xx body carries an error: %.200s", ErrMalformedResponse, w.Error)
	}
	var choice *wireChoice
	for i := range w.Choices {
		c := &w.Choices[i]
		idx := 0
		if c.Index != nil {
			idx = *c.Index
		}
		if idx != 0 {
			return fmt.Errorf("%w: choice index %d (only one choice, index 0, was asked for)", ErrMalformedResponse, idx)
		}
		if choice != nil {
			return fmt.Errorf("%w: choice index 0 appears twice", ErrMalformedResponse)
		}
		choice = c
	}
	if choice == nil {
		return fmt.Errorf("%w: no choices", ErrMalformedResponse)
	}
	usage, err := decodeUsage(w.Usage)
	if err != nil {
		return err
	}
	msg := Message{Role: choice.Message.Role}
	if msg.Role == "" {
		msg.Role = "assistant"
	}
	if choice.Message.Content != nil {
		msg.Content = *choice.Message.Content
	}
	for i, tc := range choice.Message.ToolCalls {
		args, err := argumentsText(tc.Function.Arguments)
		if err != nil {
			return fmt.Errorf("%w: tool call %d: %w", ErrMalformedResponse, i, err)
		}
		typ := tc.Type
		if typ == "" {
			typ = "function"
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Type: typ, Function: FunctionCall{Name: tc.Function.Name, Arguments: args}})
	}
	resp.Message = msg
	if choice.FinishReason != nil {
		resp.FinishReason = *choice.FinishReason
	}
	resp.Model = w.Model
	resp.Usage = usage
	return nil
}

// streamState joins the chunks of one streamed response.
type streamState struct {
	role         string
	content      strings.Builder
	calls        map[int]*toolCallState
	lastCall     int // index of the most recently touched call, -1 before any
	finishReason string
	model        string
	usage        *Usage
	chunks       int
}

type toolCallState struct {
	id, typ, name string
	args          strings.Builder
}

func newStreamState() *streamState {
	return &streamState{calls: map[int]*toolCallState{}, lastCall: -1}
}

// add applies one chunk's JSON payload.
func (s *streamState) add(data []byte) error {
	if !json.Valid(data) {
		return fmt.Errorf("%w: data payload %d is not JSON: %.80q", ErrBrokenStream, s.chunks, data)
	}
	var c wireChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("%w: chunk %d is not a chat.completion.chunk: %w", ErrMalformedResponse, s.chunks, err)
	}
	if len(c.Error) > 0 && !bytes.Equal(bytes.TrimSpace(c.Error), []byte("null")) {
		return fmt.Errorf("%w: server sent an error in chunk %d: %.200s", ErrBrokenStream, s.chunks, c.Error)
	}
	s.chunks++
	if c.Model != "" {
		if s.model != "" && s.model != c.Model {
			return fmt.Errorf("%w: chunks disagree on the model (%q then %q)", ErrMalformedResponse, s.model, c.Model)
		}
		s.model = c.Model
	}
	if c.Usage != nil {
		u, err := decodeUsage(c.Usage)
		if err != nil {
			return err
		}
		if s.usage != nil {
			if field := usageDecreased(s.usage, u); field != "" {
				return fmt.Errorf("%w: running usage %s decreased between chunks", ErrMalformedResponse, field)
			}
		}
		s.usage = u
	}
	for _, ch := range c.Choices {
		idx := 0
		if ch.Index != nil {
			idx = *ch.Index
		}
		if idx != 0 {
			return fmt.Errorf("%w: choice index %d (only one choice, index 0, was asked for)", ErrMalformedResponse, idx)
		}
		if ch.Delta.Role != "" && s.role == "" {
			s.role = ch.Delta.Role
		}
		if ch.Delta.Content != nil {
			s.content.WriteString(*ch.Delta.Content)
		}
		for _, frag := range ch.Delta.ToolCalls {
			if err := s.addToolFragment(frag); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finishReason = *ch.FinishReason
		}
	}
	return nil
}

// addToolFragment joins one tool-call fragment into the call with its index.
// The first non-empty id, type and name win; arguments are concatenated. A
// fragment without an index (sent by a few servers) starts a new call when it
// carries an id not seen before, joins the call with that id when seen, and
// otherwise continues the most recent call.
func (s *streamState) addToolFragment(f wireDeltaToolCall) error {
	idx := -1
	switch {
	case f.Index != nil:
		idx = *f.Index
		if idx < 0 {
			return fmt.Errorf("%w: tool call index %d is negative", ErrMalformedResponse, idx)
		}
	case f.ID != "":
		for i, c := range s.calls {
			if c.id == f.ID {
				idx = i
			}
		}
		if idx < 0 {
			idx = 0
			for i := range s.calls {
				if i >= idx {
					idx = i + 1
				}
			}
		}
	default:
		if s.lastCall < 0 {
			return fmt.Errorf("%w: tool call fragment without index, id or earlier call", ErrMalformedResponse)
		}
		idx = s.lastCall
	}
	c, ok := s.calls[idx]
	if !ok {
		c = &toolCallState{}
		s.calls[idx] = c
	}
	s.lastCall = idx
	if c.id == "" {
		c.id = f.ID
	}
	if c.typ == "" {
		c.typ = f.Type
	}
	if c.name == "" {
		c.name = f.Function.Name
	}
	args, err := argumentsText(f.Function.Arguments)
	if err != nil {
		return fmt.Errorf("%w: tool call %d: %w", ErrMalformedResponse, idx, err)
	}
	c.args.WriteString(args)
	return nil
}

// finish writes the joined message, finish reason, model and usage into resp.
func (s *streamState) finish(resp *Response) {
	msg := Message{Role: s.role, Content: s.content.String()}
	if msg.Role == "" {
		msg.Role = "assistant"
	}
	idxs := make([]int, 0, len(s.calls))
	for i := range s.calls {
		idxs = append(idxs, i)
	}
	sort.Ints(idxs)
	for _, i := range idxs {
		c := s.calls[i]
		typ := c.typ
		if typ == "" {
			typ = "function"
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: c.id, Type: typ, Function: FunctionCall{Name: c.name, Arguments: c.args.String()}})
	}
	resp.Message = msg
	resp.FinishReason = s.finishReason
	resp.Model = s.model
	resp.Usage = s.usage
}
