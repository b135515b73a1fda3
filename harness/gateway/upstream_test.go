package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeUpstream is a small OpenAI-compatible chat-completions server. The
// "model" field of the request picks the behaviour; usage is deterministic:
// prompt_tokens = byte length of the first message's content, completion_tokens
// = completionTokens, cached 2, reasoning 1.
type fakeUpstream struct {
	srv *httptest.Server

	mu   sync.Mutex
	seen []seenRequest

	// slow-stream: firstSent is closed after the first chunk is flushed;
	// the handler then waits for release (or the request to end).
	firstSent chan struct{}
	release   chan struct{}
}

const completionTokens = 7

type seenRequest struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{firstSent: make(chan struct{}), release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// requests returns a copy of the requests received so far.
func (u *fakeUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// requestOfSession returns the one request received with the given session
// header, failing the test if there is not exactly one.
func (u *fakeUpstream) requestOfSession(t *testing.T, session string) seenRequest {
	t.Helper()
	var found []seenRequest
	for _, r := range u.requests() {
		if r.Header.Get(DefaultSessionHeader) == session {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("upstream saw %d requests of session %q, want 1", len(found), session)
	}
	return found[0]
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func promptTokensOf(req chatRequest) int {
	if len(req.Messages) == 0 {
		return 0
	}
	var s string
	if json.Unmarshal(req.Messages[0].Content, &s) != nil {
		return 1
	}
	return len(s)
}

func usageJSON(prompt int, details bool) string {
	if !details {
		return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, completionTokens, prompt+completionTokens)
	}
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}`,
		prompt, completionTokens, prompt+completionTokens)
}

func completionJSON(model, usage string) string {
	s := `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"` + model +
		`","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}"
}

func chunk(model, content string, usage string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"` + model +
		`","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}],"usage":` + usage + "}\n\n"
}

func usageChunk(model, usage string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"` + model +
		`","choices":[],"usage":` + usage + "}\n\n"
}

func (u *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.seen = append(u.seen, seenRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	u.mu.Unlock()

	if r.URL.Path == "/v1/models" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-1","object":"model"}]}`)
		return
	}
	var req chatRequest
	_ = json.Unmarshal(body, &req)
	prompt := promptTokensOf(req)
	m := req.Model
	flusher := w.(http.Flusher)
	sse := func(parts ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
			flusher.Flush()
		}
	}
	switch m {
	case "json-usage", "gpt-test":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, usageJSON(prompt, true)))
	case "json-usage-nodetails":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, usageJSON(prompt, false)))
	case "json-nousage":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, ""))
	case "json-usage-null":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, "null"))
	case "json-usage-zero":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`))
	case "gzip-usage":
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = io.WriteString(zw, completionJSON(m, usageJSON(prompt, true)))
		_ = zw.Close()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(buf.Bytes())
	case "answers-other":
		// Answers with a model other than the one asked for (a provider rerouting the request).
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON("other-model-2", usageJSON(prompt, true)))
	case "sse-answers-other":
		sse(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]}`+"\n\n",
			chunk("other-model-3", "do", "null"), usageChunk("other-model-3", usageJSON(prompt, true)), "data: [DONE]\n\n")
	case "error-500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"boom"},"usage":`+usageJSON(prompt, true)+`}`)
	case "sse-usage":
		sse(chunk(m, "do", "null"), chunk(m, "ne", "null"), usageChunk(m, usageJSON(prompt, true)), "data: [DONE]\n\n")
	case "sse-nousage":
		sse(chunk(m, "do", "null"), chunk(m, "ne", "null"), "data: [DONE]\n\n")
	case "sse-usage-then-meta":
		sse(chunk(m, "do", "null"), usageChunk(m, usageJSON(prompt, true)),
			usageChunk(m, "null"),
			`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","system_fingerprint":"fp_1","choices":[]}`+"\n\n",
			usageChunk(m, "{}"),
			"data: [DONE]\n\n")
	case "sse-two-usages":
		sse(chunk(m, "do", usageJSON(1, false)), usageChunk(m, usageJSON(prompt, false)), "data: [DONE]\n\n")
	case "sse-cut-clean":
		// The stream ends (a complete HTTP response) after its usage chunk, without "data: [DONE]".
		sse(chunk(m, "do", "null"), usageChunk(m, usageJSON(prompt, true)))
	case "sse-cut-abort":
		// The upstream drops the connection mid-body after its usage chunk.
		sse(chunk(m, "do", "null"), usageChunk(m, usageJSON(prompt, true)))
		panic(http.ErrAbortHandler)
	case "json-usage-zero-prompt":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completionJSON(m, `{"prompt_tokens":0,"completion_tokens":3,"total_tokens":3}`))
	case "slow-stream":
		sse(chunk(m, "first", "null"))
		close(u.firstSent)
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
		sse(chunk(m, "second", "null"), usageChunk(m, usageJSON(prompt, true)), "data: [DONE]\n\n")
	default:
		http.Error(w, "unknown model "+m, http.StatusNotFound)
	}
}

// chatBody builds a chat-completions request body whose prompt has n bytes.
func chatBody(model string, stream bool, content string) string {
	s := `{"model":"` + model + `","messages":[{"role":"user","content":"` + content + `"}]`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return s + "}"
}

// rawClient does not decompress, so tests see the exact bytes relayed.
func rawClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true}}
}

func post(t *testing.T, g *Gateway, session, body string, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL()+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(DefaultSessionHeader, session)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatalf("POST through gateway: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	return resp.StatusCode, got
}
