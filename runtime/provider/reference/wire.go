package reference

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"
)

// The server's own reading of the OpenAI Chat Completions wire format. It
// shares no code with package provider's client on purpose: the two are
// tested against each other and against the official OpenAI SDK.

type chatRequest struct {
	Model         string           `json:"model"`
	Messages      []requestMessage `json:"messages"`
	Tools         []requestTool    `json:"tools"`
	Stream        bool             `json:"stream"`
	StreamOptions *streamOptions   `json:"stream_options"`
	N             *int             `json:"n"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type requestMessage struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"`
	ToolCalls  []requestToolCall `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`

	// text is Content as text, filled by decodeChatRequest.
	text string
}

type requestToolCall struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function requestFunction `json:"function"`
}

type requestFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`

	// arguments is Arguments as JSON text, filled by decodeChatRequest.
	arguments string
}

type requestTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (r *chatRequest) offersTool(name string) bool {
	for _, t := range r.Tools {
		if t.Type == "function" && t.Function.Name == name {
			return true
		}
	}
	return false
}

// decodeChatRequest reads and checks a request body. Its errors are
// client errors (400) and say what is wrong.
func decodeChatRequest(body io.Reader) (*chatRequest, error) {
	raw, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("request body exceeds %d bytes", MaxRequestBytes)
		}
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	var req chatRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("request body is not a chat completion request: %w", err)
	}
	if req.Model == "" {
		return nil, errors.New("model is required")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("messages must not be empty")
	}
	if req.N != nil && *req.N != 1 {
		return nil, fmt.Errorf("n=%d is not supported (only 1)", *req.N)
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		m.text = text
		for j := range m.ToolCalls {
			args, err := argumentsText(m.ToolCalls[j].Function.Arguments)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].tool_calls[%d].function.arguments: %w", i, j, err)
			}
			m.ToolCalls[j].Function.arguments = args
		}
	}
	return &req, nil
}

// contentText reads message content: a string, null (""), or an array of
// text parts joined without separator.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var b bytes.Buffer
		for k, p := range parts {
			if p.Type != "text" {
				return "", fmt.Errorf("part %d has type %q; only text parts are supported", k, p.Type)
			}
			b.WriteString(p.Text)
		}
		return b.String(), nil
	default:
		return "", errors.New("must be a string, null or an array of text parts")
	}
}

// argumentsText reads tool-call arguments: a JSON string, or a JSON object
// taken as its compact text; null or absent is "".
func argumentsText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '{':
		var b bytes.Buffer
		err := json.Compact(&b, raw)
		return b.String(), err
	default:
		return "", errors.New("must be a JSON string or object")
	}
}

type usageObject struct {
	PromptTokens            int64               `json:"prompt_tokens"`
	CompletionTokens        int64               `json:"completion_tokens"`
	TotalTokens             int64               `json:"total_tokens"`
	PromptTokensDetails     promptTokensDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails completionDetails   `json:"completion_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// ceilQuarter is ceil(n/4) for n >= 0.
func ceilQuarter(n int) int64 { return int64((n + 3) / 4) }

// computeUsage applies the usage rule of the package documentation.
func computeUsage(req *chatRequest, rep reply) usageObject {
	var prompt int64
	for _, m := range req.Messages {
		n := len(m.text) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.arguments)
		}
		prompt += 4 + ceilQuarter(n)
	}
	m := len(rep.content)
	for _, tc := range rep.toolCalls {
		m += len(tc.name) + len(tc.arguments)
	}
	completion := max(ceilQuarter(m), 1)
	return usageObject{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usageObject       `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type responseMessage struct {
	Role      string             `json:"role"`
	Content   *string            `json:"content"`
	Refusal   *string            `json:"refusal"`
	ToolCalls []responseToolCall `json:"tool_calls,omitempty"`
}

type responseToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function responseFunction `json:"function"`
}

type responseFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// jsonNull is a fresh JSON null (a new slice each call, so no value is shared).
func jsonNull() json.RawMessage { return json.RawMessage("null") }

func completionBody(id string, rep reply, usage *usageObject) completion {
	msg := responseMessage{Role: "assistant"}
	if rep.content != "" || len(rep.toolCalls) == 0 {
		c := rep.content
		msg.Content = &c
	}
	for _, tc := range rep.toolCalls {
		msg.ToolCalls = append(msg.ToolCalls, responseToolCall{ID: tc.id, Type: "function", Function: responseFunction{Name: tc.name, Arguments: tc.arguments}})
	}
	return completion{
		ID: id, Object: "chat.completion", Created: Created, Model: ModelID,
		Choices: []completionChoice{{Index: 0, Message: msg, FinishReason: rep.finish, Logprobs: jsonNull()}},
		Usage:   usage,
	}
}

type chunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int             `json:"index"`
	Delta        delta           `json:"delta"`
	FinishReason *string         `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

type delta struct {
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	ToolCalls []deltaToolCall `json:"tool_calls,omitempty"`
}

type deltaToolCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function deltaFunction `json:"function"`
}

type deltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Pieces a streamed text is split into, so clients must join fragments.
const (
	contentPieces   = 3
	argumentsPieces = 4
)

// splitPieces cuts s into at most n non-empty pieces of about equal byte
// length, never inside a UTF-8 sequence.
func splitPieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > 0 {
		cut := min(size, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// streamChunks builds the chunk sequence for rep: a role chunk, the content
// pieces, for each tool call a header fragment then argument pieces, the
// finish chunk, and (with includeUsage and usage known) the usage chunk with
// empty choices. With includeUsage every other chunk carries "usage": null,
// as OpenAI's do. With split (FaultSplitToolArgs) every call's header
// fragment comes first, then the calls' argument pieces of at most
// SplitArgumentsBytes bytes, interleaved call by call.
func streamChunks(id string, rep reply, usage *usageObject, includeUsage, split bool) []chunk {
	var usageField json.RawMessage
	if includeUsage {
		usageField = jsonNull()
	}
	mk := func(d delta, finish *string) chunk {
		return chunk{ID: id, Object: "chat.completion.chunk", Created: Created, Model: ModelID,
			Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish, Logprobs: jsonNull()}}, Usage: usageField}
	}
	first := delta{Role: "assistant", Content: jsonString("")}
	if len(rep.toolCalls) > 0 && rep.content == "" {
		first.Content = jsonNull()
	}
	out := []chunk{mk(first, nil)}
	for _, p := range splitPieces(rep.content, contentPieces) {
		out = append(out, mk(delta{Content: jsonString(p)}, nil))
	}
	if split {
		pieces := make([][]string, len(rep.toolCalls))
		longest := 0
		for i, tc := range rep.toolCalls {
			out = append(out, mk(delta{ToolCalls: []deltaToolCall{{Index: i, ID: tc.id, Type: "function", Function: deltaFunction{Name: tc.name}}}}, nil))
			pieces[i] = splitPieces(tc.arguments, (len(tc.arguments)+SplitArgumentsBytes-1)/SplitArgumentsBytes)
			longest = max(longest, len(pieces[i]))
		}
		for k := 0; k < longest; k++ {
			for i := range rep.toolCalls {
				if k < len(pieces[i]) {
					out = append(out, mk(delta{ToolCalls: []deltaToolCall{{Index: i, Function: deltaFunction{Arguments: pieces[i][k]}}}}, nil))
				}
			}
		}
	} else {
		for i, tc := range rep.toolCalls {
			out = append(out, mk(delta{ToolCalls: []deltaToolCall{{Index: i, ID: tc.id, Type: "function", Function: deltaFunction{Name: tc.name}}}}, nil))
			for _, p := range splitPieces(tc.arguments, argumentsPieces) {
				out = append(out, mk(delta{ToolCalls: []deltaToolCall{{Index: i, Function: deltaFunction{Arguments: p}}}}, nil))
			}
		}
	}
	finish := rep.finish
	out = append(out, mk(delta{}, &finish))
	if includeUsage && usage != nil {
		u, _ := json.Marshal(usage)
		out = append(out, chunk{ID: id, Object: "chat.completion.chunk", Created: Created, Model: ModelID,
			Choices: []chunkChoice{}, Usage: u})
	}
	return out
}

// writeStream sends rep, answered by model, as a server-sent event stream ended by
// "data: [DONE]", flushing after every event.
func writeStream(w http.ResponseWriter, model, id string, rep reply, usage *usageObject, includeUsage, split bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, c := range streamChunks(id, rep, usage, includeUsage, split) {
		c.Model = model
		if _, err := fmt.Fprintf(w, "data: %s\n\n", compactJSON(c)); err != nil {
			return // the client went away; nothing more can be said to it
		}
		_ = rc.Flush()
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// writeError answers with an OpenAI-style error object; param "" is null.
func writeError(w http.ResponseWriter, status int, typ, param, code, msg string) {
	d := errorDetail{Message: msg, Type: typ, Code: code}
	if param != "" {
		d.Param = &param
	}
	writeJSON(w, status, errorBody{Error: d})
}

func writeJSON[T completion | modelList | modelObject | errorBody](w http.ResponseWriter, status int, v T) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(compactJSON(v))
}
