package provider_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/runtime/provider"
)

// Byte fixtures in the shapes real OpenAI-compatible servers send, served by
// a small server on 127.0.0.1 in small flushed pieces so the client's
// parser must buffer across reads.

func ev(data string) string { return "data: " + data + "\n\n" }

// delta is a chunk with one choice carrying the delta JSON; finish "" is null.
func delta(d, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m-1","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, d, f)
}

func usageJSON(p, c, t int64) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, p, c, t)
}

// usageOnly is a final chunk with empty choices and usage.
func usageOnly(u string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m-1","choices":[],"usage":` + u + `}`
}

func withUsage(chunk, u string) string {
	return strings.TrimSuffix(chunk, "}") + `,"usage":` + u + `}`
}

const done = "data: [DONE]\n\n"

func usage(p, c, t int64) *provider.Usage {
	return &provider.Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: t}
}

func int64p(v int64) *int64 { return &v }

// serveBytes answers every request with status and body written in pieces of
// size bytes, flushed one by one.
func serveBytes(t *testing.T, status int, contentType, body string, size int) (url string, hits *atomic.Int32) {
	t.Helper()
	hits = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		rc := http.NewResponseController(w)
		for i := 0; i < len(body); i += size {
			_, _ = w.Write([]byte(body[i:min(i+size, len(body))]))
			_ = rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", hits
}

func simpleRequest(stream bool) provider.Request {
	return provider.Request{SessionID: "run-f-m", Model: "m-1", Messages: []provider.Message{{Role: "user", Content: "hi"}}, Stream: stream}
}

func TestClientStreamFixtures(t *testing.T) {
	openaiShape := ": OPENROUTER PROCESSING\n\n" +
		ev(delta(`{"role":"assistant","content":""}`, "")) +
		ev(delta(`{"content":"Hel"}`, "")) +
		ev(delta(`{"content":"lo"}`, "")) +
		ev(delta(`{}`, "stop")) +
		ev(usageOnly(`{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":null}}`)) +
		done
	hello := provider.Message{Role: "assistant", Content: "Hello"}
	call := func(id, name, args string) provider.ToolCall {
		return provider.ToolCall{ID: id, Type: "function", Function: provider.FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name       string
		stream     string
		wantMsg    provider.Message
		wantFinish string
		wantUsage  *provider.Usage
		wantErr    error
	}{
		{
			name: "openai shape: comment, usage in a final empty-choices chunk", stream: openaiShape,
			wantMsg: hello, wantFinish: "stop",
			wantUsage: &provider.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11, CachedTokens: int64p(3)},
		},
		{
			name: "CRLF line endings", stream: strings.ReplaceAll(openaiShape, "\n", "\r\n"),
			wantMsg: hello, wantFinish: "stop",
			wantUsage: &provider.Usage{PromptTokens: 9, CompletionTokens: 2, TotalTokens: 11, CachedTokens: int64p(3)},
		},
		{
			name: "multi-line data joined with LF",
			stream: "data: " + strings.Replace(delta(`{"content":"Hello"}`, "stop"), `"choices":`, "\ndata: \"choices\":", 1) + "\n\n" +
				"event: message\nid: 2\ndata: " + usageOnly(usageJSON(1, 1, 2)) + "\n\n" + done,
			wantMsg: hello, wantFinish: "stop", wantUsage: usage(1, 1, 2),
		},
		{
			name:    "usage on the chunk with choices",
			stream:  ev(delta(`{"role":"assistant","content":"Hello"}`, "")) + ev(withUsage(delta(`{}`, "stop"), usageJSON(5, 1, 6))) + done,
			wantMsg: hello, wantFinish: "stop", wantUsage: usage(5, 1, 6),
		},
		{
			name: "running totals: the last usage is taken, never summed",
			stream: ev(withUsage(delta(`{"content":"Hel"}`, ""), usageJSON(5, 1, 6))) +
				ev(withUsage(delta(`{"content":"lo"}`, ""), usageJSON(5, 2, 7))) +
				ev(withUsage(delta(`{}`, "stop"), usageJSON(5, 3, 8))) + done,
			wantMsg: hello, wantFinish: "stop", wantUsage: usage(5, 3, 8),
		},
		{
			name: "null usage on chunks is not usage",
			stream: ev(withUsage(delta(`{"content":"Hello"}`, ""), "null")) +
				ev(withUsage(delta(`{}`, "stop"), "null")) + done,
			wantMsg: hello, wantFinish: "stop",
		},
		{
			name: "decreasing running usage is malformed",
			stream: ev(withUsage(delta(`{"content":"Hel"}`, ""), usageJSON(5, 3, 8))) +
				ev(withUsage(delta(`{}`, "stop"), usageJSON(5, 2, 7))) + done,
			wantErr: provider.ErrMalformedResponse,
		},
		{
			name:    "no usage anywhere is nil",
			stream:  ev(delta(`{"content":"Hello"}`, "")) + ev(delta(`{}`, "stop")) + done,
			wantMsg: hello, wantFinish: "stop",
		},
		{
			name: "interleaved tool calls joined by index, first id wins",
			stream: ev(delta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write_file","arguments":""}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"index":1,"function":{"arguments":"\"b\"}"}},{"index":0,"id":"call_z","function":{"arguments":"\"a\"}"}}]}`, "")) +
				ev(delta(`{}`, "tool_calls")) + done,
			wantMsg:    provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call("call_a", "write_file", `{"path":"a"}`), call("call_b", "read_file", `{"path":"b"}`)}},
			wantFinish: "tool_calls",
		},
		{
			name:       "a fragment may hold complete arguments",
			stream:     ev(delta(`{"tool_calls":[{"index":0,"id":"c9","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]}`, "tool_calls")) + done,
			wantMsg:    provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call("c9", "f", `{"x":1}`)}},
			wantFinish: "tool_calls",
		},
		{
			name:       "arguments sent as a JSON object are re-marshalled to a string",
			stream:     ev(delta(`{"tool_calls":[{"index":0,"id":"c9","type":"function","function":{"name":"f","arguments":{ "x" : 1, "y":"<&>" }}}]}`, "tool_calls")) + done,
			wantMsg:    provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call("c9", "f", `{"x":1,"y":"<&>"}`)}},
			wantFinish: "tool_calls",
		},
		{
			name: "fragments without index continue the call with their id or the last one",
			stream: ev(delta(`{"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"function":{"arguments":":1}"}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "tool_calls")) + done,
			wantMsg:    provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call("c1", "f", `{"x":1}`), call("c2", "g", `{}`)}},
			wantFinish: "tool_calls",
		},
		{
			name: "finish_reason missing: the joined call is kept and the finish reason stays empty, not guessed",
			stream: ev(delta(`{"tool_calls":[{"index":0,"id":"c9","type":"function","function":{"name":"f","arguments":"{\"x\""}}]}`, "")) +
				ev(delta(`{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}`, "")) + done,
			wantMsg:    provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{call("c9", "f", `{"x":1}`)}},
			wantFinish: "",
		},
		{
			name:    "stream cut without [DONE]",
			stream:  ev(delta(`{"content":"Hel"}`, "")) + `data: {"id":"c1","choi`,
			wantErr: provider.ErrBrokenStream,
		},
		{
			name:    "stream ends after the last chunk without [DONE]",
			stream:  ev(delta(`{"content":"Hello"}`, "stop")) + ev(usageOnly(usageJSON(1, 1, 2))),
			wantErr: provider.ErrBrokenStream,
		},
		{
			name:    "[DONE] without its blank line is not dispatched",
			stream:  ev(delta(`{"content":"Hello"}`, "stop")) + "data: [DONE]\n",
			wantErr: provider.ErrBrokenStream,
		},
		{
			name:    "non-JSON data line",
			stream:  ev(delta(`{"content":"Hel"}`, "")) + ev("this is not json") + done,
			wantErr: provider.ErrBrokenStream,
		},
		{
			name:    "error object mid-stream",
			stream:  ev(delta(`{"content":"Hel"}`, "")) + ev(`{"error":{"message":"overloaded","type":"server_error"}}`) + done,
			wantErr: provider.ErrBrokenStream,
		},
		{
			name:    "usage without total_tokens is malformed, not guessed",
			stream:  ev(delta(`{"content":"Hello"}`, "stop")) + ev(usageOnly(`{"prompt_tokens":1,"completion_tokens":1}`)) + done,
			wantErr: provider.ErrMalformedResponse,
		},
		{
			name:    "chunks disagreeing on the model",
			stream:  ev(delta(`{"content":"Hel"}`, "")) + ev(strings.Replace(delta(`{"content":"lo"}`, "stop"), `"m-1"`, `"m-2"`, 1)) + done,
			wantErr: provider.ErrMalformedResponse,
		},
		{
			name:    "a second choice index",
			stream:  ev(strings.Replace(delta(`{"content":"x"}`, ""), `"index":0`, `"index":1`, 1)) + done,
			wantErr: provider.ErrMalformedResponse,
		},
		{
			name:    "nothing after [DONE] is parsed, but it is kept in Raw",
			stream:  ev(delta(`{"content":"Hello"}`, "stop")) + done + ev("garbage after done"),
			wantMsg: hello, wantFinish: "stop",
		},
	}
	for _, tc := range tests {
		for _, piece := range []int{1, 7, 1 << 16} {
			t.Run(fmt.Sprintf("%s/pieces=%d", tc.name, piece), func(t *testing.T) {
				url, _ := serveBytes(t, 200, "text/event-stream", tc.stream, piece)
				client := newClient(t, provider.ClientConfig{BaseURL: url})
				resp, err := client.Complete(t.Context(), simpleRequest(true))
				if resp == nil {
					t.Fatalf("no Response returned (err %v)", err)
				}
				if string(resp.Raw) != tc.stream {
					t.Errorf("Raw is not the exact stream:\n got %q\nwant %q", resp.Raw, tc.stream)
				}
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("err %v, want %v", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if diff := cmp.Diff(tc.wantMsg, resp.Message); diff != "" {
					t.Errorf("message (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantUsage, resp.Usage); diff != "" {
					t.Errorf("usage (-want +got):\n%s", diff)
				}
				if resp.FinishReason != tc.wantFinish || resp.Model != "m-1" {
					t.Errorf("finish %q model %q", resp.FinishReason, resp.Model)
				}
			})
		}
	}
}

func TestClientPlainFixtures(t *testing.T) {
	body := func(message, extra string) string {
		return `{"id":"x","object":"chat.completion","created":1,"model":"m-1","choices":[{"index":0,"message":` + message + `,"finish_reason":"stop"}]` + extra + `}`
	}
	text := `{"role":"assistant","content":"hi"}`
	tests := []struct {
		name      string
		body      string
		wantMsg   provider.Message
		wantUsage *provider.Usage
		wantErr   error
	}{
		{name: "usage absent is nil", body: body(text, ""), wantMsg: provider.Message{Role: "assistant", Content: "hi"}},
		{name: "usage null is nil", body: body(text, `,"usage":null`), wantMsg: provider.Message{Role: "assistant", Content: "hi"}},
		{name: "details null stay nil", body: body(text, `,"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":null}}`), wantMsg: provider.Message{Role: "assistant", Content: "hi"}, wantUsage: usage(3, 1, 4)},
		{name: "details present", body: body(text, `,"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":7}}`), wantMsg: provider.Message{Role: "assistant", Content: "hi"}, wantUsage: &provider.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4, CachedTokens: int64p(0), ReasoningTokens: int64p(7)}},
		{
			name:    "content null next to tool calls, arguments as object",
			body:    body(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{"a": [1, 2]}}}]}`, ""),
			wantMsg: provider.Message{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Type: "function", Function: provider.FunctionCall{Name: "f", Arguments: `{"a":[1,2]}`}}}},
		},
		{name: "usage missing prompt_tokens", body: body(text, `,"usage":{"completion_tokens":1,"total_tokens":4}`), wantErr: provider.ErrMalformedResponse},
		{name: "negative usage", body: body(text, `,"usage":{"prompt_tokens":-1,"completion_tokens":1,"total_tokens":0}`), wantErr: provider.ErrMalformedResponse},
		{name: "no choices", body: `{"id":"x","model":"m-1","choices":[]}`, wantErr: provider.ErrMalformedResponse},
		{name: "not JSON", body: `<html>gateway says hi</html>`, wantErr: provider.ErrMalformedResponse},
		{name: "error object with status 200", body: `{"error":{"message":"quota"}}`, wantErr: provider.ErrMalformedResponse},
		{name: "arguments neither string nor object", body: body(`{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":42}}]}`, ""), wantErr: provider.ErrMalformedResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := serveBytes(t, 200, "application/json", tc.body, 5)
			resp, err := newClient(t, provider.ClientConfig{BaseURL: url}).Complete(t.Context(), simpleRequest(false))
			if resp == nil || string(resp.Raw) != tc.body {
				t.Fatalf("Raw not kept (resp %v, err %v)", resp, err)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantMsg, resp.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUsage, resp.Usage); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClientHTTPErrors(t *testing.T) {
	tests := []struct {
		name         string
		status       int
		body         string
		wantAttempts int
		wantRedacted bool
	}{
		{"401 echoing the key is redacted", 401, `{"error":{"message":"bad key ` + testAPIKey + `"}}`, 1, true},
		{"bearer tokens and sk- keys are redacted", 403, `{"error":"Authorization: Bearer abc.DEF-123 rejected; try sk-proj-abcdefghijklmnop"}`, 1, false},
		{"400 is not retried", 400, `{"error":{"message":"bad request"}}`, 1, false},
		{"429 is retried", 429, `{"error":{"message":"slow down"}}`, 3, false},
		{"503 is retried", 503, strings.Repeat("x", 3*provider.MaxErrorBodyBytes), 3, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, hits := serveBytes(t, tc.status, "application/json", tc.body, 1<<16)
			resp, err := newClient(t, provider.ClientConfig{BaseURL: url, APIKey: testAPIKey}).Complete(t.Context(), simpleRequest(false))
			var httpErr *provider.HTTPError
			if !errors.As(err, &httpErr) || httpErr.Status != tc.status {
				t.Fatalf("err %v, want *HTTPError %d", err, tc.status)
			}
			if int(hits.Load()) != tc.wantAttempts || resp.Attempts != tc.wantAttempts {
				t.Errorf("server hit %d times, Attempts %d, want %d", hits.Load(), resp.Attempts, tc.wantAttempts)
			}
			for _, secret := range []string{testAPIKey, "abc.DEF-123", "sk-proj-abcdefghijklmnop"} {
				if strings.Contains(err.Error(), secret) || strings.Contains(httpErr.Body, secret) {
					t.Errorf("error leaks %q: %v", secret, err)
				}
			}
			if len(httpErr.Body) > provider.MaxErrorBodyBytes+len("...(truncated)") {
				t.Errorf("error body is %d bytes, want at most %d", len(httpErr.Body), provider.MaxErrorBodyBytes)
			}
			if resp.RawRedacted != tc.wantRedacted || bytes.Contains(resp.Raw, []byte(testAPIKey)) {
				t.Errorf("RawRedacted %v (want %v), raw %s", resp.RawRedacted, tc.wantRedacted, resp.Raw)
			}
			if !tc.wantRedacted && string(resp.Raw) != tc.body {
				t.Errorf("Raw changed although it held no key")
			}
		})
	}
}

func TestClientRetryThenSuccess(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, `{"error":{"message":"rate limited"}}`, http.StatusTooManyRequests)
			return
		}
		_, _ = w.Write([]byte(`{"model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer srv.Close()
	resp, err := newClient(t, provider.ClientConfig{BaseURL: srv.URL}).Complete(t.Context(), simpleRequest(false))
	if err != nil || resp.Attempts != 2 || resp.Status != 200 || resp.Message.Content != "ok" || hits.Load() != 2 {
		t.Fatalf("resp %+v err %v hits %d", resp, err, hits.Load())
	}
}

func TestClientRejectsInvalidRequests(t *testing.T) {
	url, hits := serveBytes(t, 200, "application/json", `{}`, 1<<16)
	client := newClient(t, provider.ClientConfig{BaseURL: url})
	tests := []struct {
		name   string
		mutate func(*provider.Request)
	}{
		{"empty session id", func(r *provider.Request) { r.SessionID = "" }},
		{"empty model", func(r *provider.Request) { r.Model = "" }},
		{"no messages", func(r *provider.Request) { r.Messages = nil }},
		{"message without role", func(r *provider.Request) { r.Messages = []provider.Message{{Content: "x"}} }},
		{"tool without name", func(r *provider.Request) { r.Tools = []provider.ToolDef{{}} }},
		{"tool parameters not JSON", func(r *provider.Request) {
			r.Tools = []provider.ToolDef{{Name: "f", Parameters: []byte(`{"type":`)}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := simpleRequest(false)
			tc.mutate(&req)
			resp, err := client.Complete(t.Context(), req)
			if !errors.Is(err, provider.ErrInvalidRequest) || resp != nil {
				t.Errorf("resp %v err %v, want nil and ErrInvalidRequest", resp, err)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("invalid requests reached the server %d times", hits.Load())
	}
}

func TestNewClientValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  provider.ClientConfig
	}{
		{"empty base URL", provider.ClientConfig{}},
		{"no scheme", provider.ClientConfig{BaseURL: "127.0.0.1:8080/v1"}},
		{"ftp scheme", provider.ClientConfig{BaseURL: "ftp://127.0.0.1/v1"}},
		{"no host", provider.ClientConfig{BaseURL: "http:///v1"}},
		{"query", provider.ClientConfig{BaseURL: "http://127.0.0.1/v1?key=x"}},
		{"unparsable URL with a password", provider.ClientConfig{BaseURL: "http://user:hunter2@127.0.0.1:port/v1"}},
		{"bad session header", provider.ClientConfig{BaseURL: "http://127.0.0.1/v1", SessionHeader: "X Session"}},
		{"negative timeout", provider.ClientConfig{BaseURL: "http://127.0.0.1/v1", Timeout: -time.Second}},
		{"negative retry delay", provider.ClientConfig{BaseURL: "http://127.0.0.1/v1", RetryBaseDelay: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provider.NewClient(tc.cfg)
			if !errors.Is(err, provider.ErrInvalidRequest) {
				t.Fatalf("err %v, want ErrInvalidRequest", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks the URL password: %v", err)
			}
		})
	}
}

func TestClientRequestEncoding(t *testing.T) {
	var got []byte
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r.Body)
		got, header = buf.Bytes(), r.Header.Clone()
		_, _ = w.Write([]byte(`{"model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`))
	}))
	defer srv.Close()
	client := newClient(t, provider.ClientConfig{BaseURL: srv.URL + "/v1/", SessionHeader: "X-Member-Session"})
	req := provider.Request{
		SessionID: "run-e-m",
		Model:     "m-1",
		Messages: []provider.Message{
			{Role: "system", Content: "<b>&</b>"},
			{Role: "user", Content: ""},
			{Role: "assistant", ToolCalls: []provider.ToolCall{{ID: "c1", Function: provider.FunctionCall{Name: "f", Arguments: `{"x":1}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: "done"},
		},
		Tools: []provider.ToolDef{
			{Name: "f", Description: "does f", Parameters: []byte(`{ "type": "object" }`)},
			{Name: "g"},
		},
	}
	if _, err := client.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	const want = `{"model":"m-1","messages":[` +
		`{"role":"system","content":"<b>&</b>"},` +
		`{"role":"user","content":""},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},` +
		`{"role":"tool","content":"done","tool_call_id":"c1"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"g"}}]}`
	if string(got) != want {
		t.Errorf("request body\n got %s\nwant %s", got, want)
	}
	if header.Get("X-Member-Session") != "run-e-m" || header.Get("Authorization") != "" || header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", header)
	}
}

// cancelAtEOF cancels a context once the response body it wraps has been
// read to its end, i.e. exactly when the client moves on to its backoff.
type cancelAtEOF struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.cancel()
	}
	return n, err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClientCancelDuringBackoff(t *testing.T) {
	url, hits := serveBytes(t, http.StatusServiceUnavailable, "text/plain", "busy", 1<<16)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	transport := http.DefaultTransport
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := transport.RoundTrip(r)
		if err == nil {
			resp.Body = cancelAtEOF{ReadCloser: resp.Body, cancel: cancel}
		}
		return resp, err
	})}
	client := newClient(t, provider.ClientConfig{BaseURL: url, HTTPClient: hc, RetryBaseDelay: time.Hour})
	resp, err := client.Complete(ctx, simpleRequest(false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if resp == nil || resp.Attempts != 1 || resp.Status != 503 || string(resp.Raw) != "busy" || hits.Load() != 1 {
		t.Errorf("resp %+v hits %d, want the 503 of the one attempt and no retry", resp, hits.Load())
	}
}

func TestClientTimeoutMidStreamKeepsPartialRaw(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	first := ev(delta(`{"content":"Hel"}`, ""))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(first))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	client := newClient(t, provider.ClientConfig{BaseURL: srv.URL, Timeout: 100 * time.Millisecond})
	resp, err := client.Complete(t.Context(), simpleRequest(true))
	if !errors.Is(err, provider.ErrBrokenStream) {
		t.Fatalf("err %v, want ErrBrokenStream", err)
	}
	if resp == nil || string(resp.Raw) != first {
		t.Errorf("partial Raw %q, want %q", resp.Raw, first)
	}
}

func TestClientServerHoldingStreamOpenAfterDone(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stream := ev(delta(`{"content":"Hello"}`, "stop")) + done
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(stream))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	resp, err := newClient(t, provider.ClientConfig{BaseURL: srv.URL}).Complete(t.Context(), simpleRequest(true))
	if err != nil {
		t.Fatalf("a complete stream whose connection stays open must still succeed: %v", err)
	}
	if resp.Message.Content != "Hello" || string(resp.Raw) != stream {
		t.Errorf("content %q raw %q", resp.Message.Content, resp.Raw)
	}
}

func TestUsageTotal(t *testing.T) {
	tests := []struct {
		name      string
		add       []*provider.Usage
		want      provider.UsageTotal
		wantKnown bool
	}{
		{"nothing added is not known", nil, provider.UsageTotal{}, false},
		{"one unknown", []*provider.Usage{nil}, provider.UsageTotal{Requests: 1, Unknown: 1}, false},
		{"all known are summed", []*provider.Usage{usage(3, 1, 4), usage(5, 2, 7)}, provider.UsageTotal{Requests: 2, PromptTokens: 8, CompletionTokens: 3, TotalTokens: 11}, true},
		{"unknown is never zero", []*provider.Usage{usage(3, 1, 4), nil}, provider.UsageTotal{Requests: 2, Unknown: 1, PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var total provider.UsageTotal
			for _, u := range tc.add {
				total.Add(u)
			}
			if diff := cmp.Diff(tc.want, total); diff != "" {
				t.Errorf("total (-want +got):\n%s", diff)
			}
			if total.Known() != tc.wantKnown {
				t.Errorf("Known %v, want %v", total.Known(), tc.wantKnown)
			}
		})
	}
}
