package gateway

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
)

// requestMeta is what the gateway reads from a request body: nothing else of
// it is kept.
type requestMeta struct {
	model  string
	stream bool
	// messages is the length of a "messages" array, -1 when the body has none
	// (or it is not an array).
	messages int
}

// parseRequestMeta reads "model" (a string) and "stream" (a boolean) from a
// JSON object body. Anything else (not JSON, other types) leaves the zero
// value: the gateway records what it saw, it does not guess.
func parseRequestMeta(body []byte) requestMeta {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return requestMeta{messages: -1}
	}
	m := requestMeta{messages: -1}
	if raw, ok := fields["messages"]; ok {
		var msgs []json.RawMessage
		if json.Unmarshal(raw, &msgs) == nil && msgs != nil {
			m.messages = len(msgs)
		}
	}
	if raw, ok := fields["model"]; ok {
		_ = json.Unmarshal(raw, &m.model) // a non-string model stays ""
	}
	if raw, ok := fields["stream"]; ok {
		_ = json.Unmarshal(raw, &m.stream) // a non-boolean stream stays false
	}
	return m
}

// usage is the usage extracted from one response.
type usage struct {
	state                                        string
	prompt, completion, total, cached, reasoning *int64
}

func unknownUsage() usage { return usage{state: UsageUnknown} }

// responseBody is a completely relayed response body as the record rules read it: its
// Content-Encoding undone and, when it is read as an event stream, split into events, each once.
type responseBody struct {
	status    int
	mediaType string // of Content-Type, lower case; "" when absent or unparsable
	identity  bool   // no Content-Encoding (or identity): decoded is the relayed bytes themselves
	decoded   []byte // the body with its Content-Encoding undone, when decodedOK
	decodedOK bool   // false for an unknown encoding, a corrupt one, or output above maxUsageBodyBytes
	// sse: the body is read as an event stream (Content-Type text/event-stream, or a streaming
	// request answered with anything but JSON).
	sse    bool
	events [][]byte // sseData(decoded), for a 2xx sse body that decoded
}

// readBody decodes body (the bytes relayed with header h and status) and, for a 2xx event
// stream, splits it into events.
func readBody(status int, h http.Header, streamRequested bool, body []byte) *responseBody {
	rb := &responseBody{status: status}
	rb.mediaType, _, _ = mime.ParseMediaType(h.Get("Content-Type"))
	encoding := h.Get("Content-Encoding")
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		rb.identity = true
	}
	rb.decoded, rb.decodedOK = decodeContent(encoding, body)
	rb.sse = rb.mediaType == "text/event-stream" || (streamRequested && rb.mediaType != "application/json")
	if rb.ok() && rb.sse {
		rb.events = sseData(rb.decoded)
	}
	return rb
}

func (rb *responseBody) ok() bool { return rb.status >= 200 && rb.status <= 299 && rb.decodedOK }

// usage reads the usage a complete response reported.
//
// A JSON body's top-level "usage" object counts. An SSE body (Content-Type text/event-stream, or
// a streaming request answered with anything but JSON) is parsed per the WHATWG Server-Sent
// Events event-stream format: the usage is that of the last event whose JSON data carries a
// usable usage object, so a later chunk with "usage": null, {} or no usage at all (metadata only)
// neither creates a zero nor replaces an earlier figure. Non-2xx responses, undecodable content
// encodings and bodies without usage give UsageUnknown. A reported prompt_tokens of 0 on a
// request that is not known to have no messages gives UsageSuspectZero (the counts are kept as
// reported).
func (rb *responseBody) usage(meta requestMeta) usage {
	u := rb.reportedUsage()
	if u.state == UsageReported && u.prompt != nil && *u.prompt == 0 && meta.messages != 0 {
		u.state = UsageSuspectZero
	}
	return u
}

// streamUnterminated reports whether a 2xx response to a streaming chat
// completions or completions request (path ending in /chat/completions or
// /completions) is an event stream whose last event is not "data: [DONE]"
// (after undoing a gzip or deflate Content-Encoding). Other endpoints (the
// Responses API ends its streams with a response.completed event) are not
// judged by this rule.
func (rb *responseBody) streamUnterminated(path string, streamRequested bool) bool {
	if !streamRequested || rb.status < 200 || rb.status > 299 || !strings.HasSuffix(path, "/completions") {
		return false
	}
	if rb.mediaType != "text/event-stream" {
		return false
	}
	if !rb.decodedOK {
		return true // its end cannot be read, so it is not shown to have ended
	}
	return len(rb.events) == 0 || string(rb.events[len(rb.events)-1]) != "[DONE]"
}

// reportedUsage is extractUsage before the suspect-zero rule, for a body not read yet.
func reportedUsage(status int, h http.Header, streamRequested bool, body []byte) usage {
	return readBody(status, h, streamRequested, body).reportedUsage()
}

// reportedUsage is usage before the suspect-zero rule.
func (rb *responseBody) reportedUsage() usage {
	if !rb.ok() {
		return unknownUsage()
	}
	if !rb.sse {
		u, ok := usageOfJSON(rb.decoded)
		if !ok {
			return unknownUsage()
		}
		return u
	}
	// The last usable one counts, so read from the end: a stream's usage is in its last chunk
	// before [DONE], and the chunks before it need not be parsed.
	for i := len(rb.events) - 1; i >= 0; i-- {
		if u, ok := usageOfJSON(rb.events[i]); ok {
			return u
		}
	}
	return unknownUsage()
}

// answeredModel reads the model a complete 2xx response named: a JSON body's top-level "model",
// or the first event-stream chunk that carries a non-empty one. "" when there is none.
func (rb *responseBody) answeredModel() string {
	if !rb.ok() {
		return ""
	}
	model := func(data []byte) string {
		var doc struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(data, &doc) // not JSON, or a model that is not a string: none
		return doc.Model
	}
	if !rb.sse {
		return model(rb.decoded)
	}
	for _, data := range rb.events {
		if m := model(data); m != "" {
			return m
		}
	}
	return ""
}

// sseEndedWithDone reports whether body is an uncompressed event stream whose
// last event is the OpenAI end-of-stream sentinel "[DONE]" (OpenAI API
// reference, chat completions streaming).
func sseEndedWithDone(h http.Header, body []byte) bool {
	mediaType, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mediaType != "text/event-stream" || h.Get("Content-Encoding") != "" {
		return false
	}
	events := sseData(body)
	return len(events) > 0 && string(events[len(events)-1]) == "[DONE]"
}

// decodeContent undoes a gzip or deflate Content-Encoding on the in-memory
// copy (the relayed bytes and their hash are unchanged). Unknown encodings
// and output above maxUsageBodyBytes report !ok.
func decodeContent(encoding string, body []byte) ([]byte, bool) {
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, true
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, false
		}
		r = zr
	case "deflate": // RFC 9110 section 8.4.1.2: zlib-wrapped
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, false
		}
		r = zr
	default:
		return nil, false
	}
	out, err := io.ReadAll(io.LimitReader(r, maxUsageBodyBytes+1))
	if err != nil || len(out) > maxUsageBodyBytes {
		return nil, false
	}
	return out, true
}

// sseData returns the data of each event of an event stream: "data:" field
// lines (one optional space after the colon removed) joined with "\n",
// dispatched at a blank line or at the end of the body. Lines end with CRLF,
// LF or CR. The OpenAI "[DONE]" sentinel is not JSON and is simply skipped by
// the caller.
func sseData(body []byte) [][]byte {
	var (
		events [][]byte
		cur    []byte
		has    bool
	)
	dispatch := func() {
		if has {
			events = append(events, cur)
		}
		cur, has = nil, false
	}
	for len(body) > 0 {
		i := bytes.IndexAny(body, "\r\n")
		var line []byte
		if i < 0 {
			line, body = body, nil
		} else {
			line = body[:i]
			if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
				i++
			}
			body = body[i+1:]
		}
		if len(line) == 0 {
			dispatch()
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			value = nil
		}
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if has {
			cur = append(cur, '\n')
		}
		cur = append(cur, value...)
		has = true
	}
	dispatch()
	return events
}

// usageOfJSON returns the usage of a JSON object with a "usage" object
// carrying at least one of prompt_tokens, completion_tokens and total_tokens
// as a non-negative integer. Counts that are absent, null, negative or not
// integers are nil.
func usageOfJSON(data []byte) (usage, bool) {
	var doc struct {
		Usage *struct {
			PromptTokens        json.RawMessage `json:"prompt_tokens"`
			CompletionTokens    json.RawMessage `json:"completion_tokens"`
			TotalTokens         json.RawMessage `json:"total_tokens"`
			PromptTokensDetails *struct {
				CachedTokens json.RawMessage `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails *struct {
				ReasoningTokens json.RawMessage `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &doc) != nil || doc.Usage == nil {
		return usage{}, false
	}
	u := usage{
		state:      UsageReported,
		prompt:     count(doc.Usage.PromptTokens),
		completion: count(doc.Usage.CompletionTokens),
		total:      count(doc.Usage.TotalTokens),
	}
	if d := doc.Usage.PromptTokensDetails; d != nil {
		u.cached = count(d.CachedTokens)
	}
	if d := doc.Usage.CompletionTokensDetails; d != nil {
		u.reasoning = count(d.ReasoningTokens)
	}
	if u.prompt == nil && u.completion == nil && u.total == nil {
		return usage{}, false
	}
	return u, true
}

// count parses a non-negative JSON integer token count; anything else is nil.
func count(raw json.RawMessage) *int64 {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return nil // absent, null, negative, or a string such as "12"
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return nil
	}
	v, err := n.Int64()
	if err != nil || v < 0 {
		return nil
	}
	return &v
}
