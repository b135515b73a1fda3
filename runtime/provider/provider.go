// Package provider defines how assay talks to a language-model provider: the
// Provider interface the runtime codes against, and Client, an
// OpenAI-compatible chat-completions client built on the standard library.
//
// The wire format is the OpenAI Chat Completions API
// (https://platform.openai.com/docs/api-reference/chat): POST
// {BaseURL}/chat/completions with a JSON body, answered either by one JSON
// object or, when streaming, by a server-sent event stream
// (https://html.spec.whatwg.org/multipage/server-sent-events.html) of
// chat.completion.chunk objects ended by "data: [DONE]".
//
// Evidence comes first. Every Response carries the exact request bytes sent,
// their SHA-256, and the exact response bytes received, so a caller can keep
// them as evidence and a replay can serve them back. Usage a response did not
// report is nil ("unknown"), never zero, and UsageTotal keeps unknown
// responses apart from counted ones. When a response was received but is
// unusable (an HTTP error status, a malformed body, a broken stream) Complete
// returns the Response alongside the error so its bytes are not lost.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Message is one chat-completions message (OpenAI shape). On the wire,
// content is JSON null when it is empty and ToolCalls is non-empty, else a
// string.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the message text; "" for an assistant message that only
	// carries tool calls.
	Content string
	// ToolCalls are the calls an assistant message asks for (assistant only).
	ToolCalls []ToolCall
	// ToolCallID names the call a tool message answers (tool only).
	ToolCallID string
}

// ToolCall is one function call an assistant message asks for.
type ToolCall struct {
	// ID is the provider's call id, echoed in the answering tool message.
	ID string
	// Type is "function" (the only type the Chat Completions API defines).
	Type string
	// Function names the function and carries its arguments.
	Function FunctionCall
}

// FunctionCall is the function part of a ToolCall.
type FunctionCall struct {
	// Name is the function (tool) name.
	Name string
	// Arguments is JSON text exactly as received. When a server sent the
	// arguments as a JSON object instead of a string, it is that object's
	// compact JSON text (insignificant whitespace removed, key order kept).
	Arguments string
}

// ToolDef declares one function tool offered to the model.
type ToolDef struct {
	// Name is the function name the model may call.
	Name string
	// Description tells the model what the tool does; omitted when empty.
	Description string
	// Parameters is the JSON Schema of the arguments object; omitted when
	// empty. It must be valid JSON.
	Parameters json.RawMessage
}

// Usage is what one response reported, in tokens.
type Usage struct {
	// PromptTokens, CompletionTokens and TotalTokens are the response's
	// prompt_tokens, completion_tokens and total_tokens. A response that
	// reports usage must report all three; see ErrMalformedResponse.
	PromptTokens, CompletionTokens, TotalTokens int64
	// CachedTokens is prompt_tokens_details.cached_tokens; nil when absent
	// or null.
	CachedTokens *int64
	// ReasoningTokens is completion_tokens_details.reasoning_tokens; nil
	// when absent or null.
	ReasoningTokens *int64
}

// Request is one chat-completion request.
type Request struct {
	// SessionID is the member's session id, sent in the session header on
	// the request. Required: Complete returns ErrInvalidRequest when empty.
	SessionID string
	// Seq is the member's request sequence number (0-based). It is not sent;
	// it only labels errors and evidence.
	Seq int
	// Model is the model id asked for. Required.
	Model string
	// Messages is the conversation so far. Required (at least one).
	Messages []Message
	// Tools are the function tools offered; none when empty.
	Tools []ToolDef
	// Stream asks for a server-sent event stream with
	// stream_options.include_usage=true.
	Stream bool
}

// Response is one completed chat request.
type Response struct {
	// Message is the assistant message: content and tool calls, with
	// streamed fragments joined.
	Message Message
	// FinishReason is the choice's finish_reason; "" when the server sent
	// none.
	FinishReason string
	// Usage is the usage the response reported; nil when it reported none:
	// unknown, never zero.
	Usage *Usage
	// Model is the model the server said it used ("" when it said nothing).
	Model string
	// Status is the HTTP status of the last attempt.
	Status int
	// Attempts is how many HTTP requests were sent for this Request (1 plus
	// the retries made on 429/5xx).
	Attempts int
	// RequestBody is the exact bytes sent (identical on every attempt).
	RequestBody []byte
	// RequestSHA256 is the hex SHA-256 of RequestBody (64 chars).
	RequestSHA256 string
	// Raw is the exact response body bytes received on the last attempt (the
	// SSE byte stream when streaming, read to its end; see DrainGrace),
	// except that any occurrence of the client's API key is replaced by
	// "[REDACTED]" (then RawRedacted is true).
	Raw []byte
	// RawRedacted reports that Raw differs from the received bytes because
	// the API key occurred in them and was redacted.
	RawRedacted bool
	// Latency is the wall time of the last attempt, from sending the request
	// to the end of reading the body. It is a volatile field: it differs
	// between otherwise identical exchanges.
	Latency time.Duration
}

// Provider completes one chat request. Implementations must be safe for
// concurrent use.
type Provider interface {
	// Complete sends req and returns the assistant's reply. When a response
	// was received but is unusable, implementations return it alongside the
	// error so its bytes can be kept as evidence.
	Complete(ctx context.Context, req Request) (*Response, error)
}

// ErrInvalidRequest is returned, wrapped, before anything is sent when a
// Request or ClientConfig is unusable (empty session id, model or messages,
// invalid tool parameters JSON, bad base URL).
var ErrInvalidRequest = errors.New("provider: invalid request")

// ErrBrokenStream is returned, wrapped, when a streamed response ended
// without "data: [DONE]" or carried a data payload that is not JSON or that
// reports an error. The Response returned alongside it holds Raw: every byte
// of the body that could be read, so the broken stream is kept as evidence.
var ErrBrokenStream = errors.New("provider: broken stream")

// ErrMalformedResponse is returned, wrapped, when a 2xx response cannot be
// trusted: a body that is not the chat-completion shape, no choice, a choice
// index other than 0, usage missing a required field or negative, running
// usage totals that decrease, chunks that disagree on the model, or a body
// over MaxResponseBytes. The Response returned alongside it holds Raw.
var ErrMalformedResponse = errors.New("provider: malformed response")

// ErrSessionMismatch is returned, wrapped, when a response echoes the session header with a value
// other than the session id sent: the answer may belong to another member and is not used. The
// Response returned alongside it holds Raw. (A server that does not echo the header is fine.)
var ErrSessionMismatch = errors.New("provider: response echoes another session")

// HTTPError is a non-2xx HTTP answer to a chat request, after any retries.
// It is returned wrapped; use errors.As.
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// Body is the response body truncated to MaxErrorBodyBytes, with the API
	// key and bearer tokens replaced by "[REDACTED]".
	Body string
}

// Error reports the status and the redacted body.
func (e *HTTPError) Error() string {
	return fmt.Sprintf("provider: HTTP %d: %s", e.Status, e.Body)
}

// UsageTotal accumulates usage over a member's responses. Unknown usage is
// never counted as zero: a nil Usage increments Unknown and adds nothing to
// the sums. The zero value is ready to use. It is not safe for concurrent
// use; guard it when several goroutines add.
type UsageTotal struct {
	// Requests is the number of responses added.
	Requests int
	// Unknown is the number of responses whose usage was nil.
	Unknown int
	// PromptTokens, CompletionTokens and TotalTokens are sums over the
	// responses that reported usage, in tokens.
	PromptTokens, CompletionTokens, TotalTokens int64
}

// Add counts one response's usage; u == nil counts it as unknown.
func (t *UsageTotal) Add(u *Usage) {
	t.Requests++
	if u == nil {
		t.Unknown++
		return
	}
	t.PromptTokens += u.PromptTokens
	t.CompletionTokens += u.CompletionTokens
	t.TotalTokens += u.TotalTokens
}

// Merge adds another total's counts to t (a member invoked several times).
func (t *UsageTotal) Merge(o UsageTotal) {
	t.Requests += o.Requests
	t.Unknown += o.Unknown
	t.PromptTokens += o.PromptTokens
	t.CompletionTokens += o.CompletionTokens
	t.TotalTokens += o.TotalTokens
}

// Known reports whether the sums are the whole usage: at least one response
// was added and every added response reported usage.
func (t UsageTotal) Known() bool {
	return t.Requests > 0 && t.Unknown == 0
}

// CapacityReporter is implemented by providers that can report how many requests they serve in
// parallel for a model (capacity-aware admission, FORMATIONS.md). Implementations must be safe for
// concurrent use.
type CapacityReporter interface {
	// ParallelCapacity returns the declared number of parallel requests for model, or an error when
	// the provider declares none.
	ParallelCapacity(ctx context.Context, model string) (int, error)
}
