package provider_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// exchange is one HTTP request/response pair seen by a recorder.
type exchange struct {
	header   http.Header
	body     []byte
	response []byte
}

// recorder wraps a handler and keeps every exchange byte for byte.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	tw := &teeWriter{ResponseWriter: w}
	r.next.ServeHTTP(tw, req)
	r.mu.Lock()
	r.seen = append(r.seen, exchange{header: req.Header.Clone(), body: body, response: tw.buf.Bytes()})
	r.mu.Unlock()
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer to flush.
func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type referenceFixture struct {
	ref *reference.Server
	rec *recorder
	url string
}

// startRecordedReference serves the reference provider behind a recorder on
// 127.0.0.1:0.
func startRecordedReference(t *testing.T, cfg reference.Config) referenceFixture {
	t.Helper()
	ref, err := reference.New(cfg)
	if err != nil {
		t.Fatalf("reference.New: %v", err)
	}
	rec := &recorder{next: ref.Handler()}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return referenceFixture{ref: ref, rec: rec, url: srv.URL + "/v1"}
}

func newClient(t *testing.T, cfg provider.ClientConfig) *provider.Client {
	t.Helper()
	if cfg.RetryBaseDelay == 0 {
		cfg.RetryBaseDelay = time.Millisecond
	}
	c, err := provider.NewClient(cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

const testAPIKey = "test-key-5f1c9e"

func writeFileDef() provider.ToolDef {
	return provider.ToolDef{
		Name:        "write_file",
		Description: "Write a file in the member's directory.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`),
	}
}

func assignmentRequest(session string, stream bool) provider.Request {
	a := reference.Assignment{Task: "double", Language: "go", Package: "double", Files: []string{"double.go", "double_test.go"}}
	return provider.Request{
		SessionID: session,
		Model:     reference.ModelID,
		Messages: []provider.Message{
			{Role: "system", Content: "You are the executor."},
			{Role: "user", Content: "Carry out:\n" + reference.FormatAssignment(a)},
		},
		Tools:  []provider.ToolDef{writeFileDef()},
		Stream: stream,
	}
}

func ceil4(n int) int64 { return int64(n+3) / 4 }

// ruleUsage recomputes the reference provider's documented usage rule from
// what the client sent and got.
func ruleUsage(sent []provider.Message, reply provider.Message) provider.Usage {
	var prompt int64
	for _, m := range sent {
		n := len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.Function.Name) + len(c.Function.Arguments)
		}
		prompt += 4 + ceil4(n)
	}
	m := len(reply.Content)
	for _, c := range reply.ToolCalls {
		m += len(c.Function.Name) + len(c.Function.Arguments)
	}
	completion := max(ceil4(m), 1)
	zero := int64(0)
	return provider.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion, CachedTokens: &zero, ReasoningTokens: &zero}
}

func TestClientAgainstReference(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			fx := startRecordedReference(t, reference.Config{})
			client := newClient(t, provider.ClientConfig{BaseURL: fx.url, APIKey: testAPIKey})
			const session = "run-1-executor"
			req := assignmentRequest(session, stream)

			resp, err := client.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Status != 200 || resp.Attempts != 1 || resp.Model != reference.ModelID || resp.FinishReason != "tool_calls" {
				t.Errorf("status %d attempts %d model %q finish %q", resp.Status, resp.Attempts, resp.Model, resp.FinishReason)
			}
			calls := resp.Message.ToolCalls
			if resp.Message.Role != "assistant" || resp.Message.Content != "" || len(calls) != 2 {
				t.Fatalf("message %+v, want assistant with two tool calls and no content", resp.Message)
			}
			for i, want := range []string{"double.go", "double_test.go"} {
				var args struct{ Path, Content string }
				if err := json.Unmarshal([]byte(calls[i].Function.Arguments), &args); err != nil {
					t.Fatalf("call %d arguments %q: %v", i, calls[i].Function.Arguments, err)
				}
				if calls[i].Function.Name != "write_file" || calls[i].Type != "function" || args.Path != want || !strings.HasPrefix(calls[i].ID, "call_") {
					t.Errorf("call %d: %+v path %q", i, calls[i], args.Path)
				}
				if i == 0 && args.Content != "package double\n\n// Double returns 2*x.\nfunc Double[T int | float64](x T) T { return 2 * x }\n" {
					t.Errorf("double.go content %q", args.Content)
				}
			}
			if diff := cmp.Diff(ruleUsage(req.Messages, resp.Message), *resp.Usage); diff != "" {
				t.Errorf("usage (-rule +got):\n%s", diff)
			}

			// Evidence: what was sent and received, byte for byte.
			ex := fx.rec.exchanges()
			if len(ex) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(ex))
			}
			if got := ex[0].header.Get("X-Session-Id"); got != session {
				t.Errorf("session header %q, want %q", got, session)
			}
			if got := ex[0].header.Get("Authorization"); got != "Bearer "+testAPIKey {
				t.Errorf("authorization header %q", got)
			}
			if !bytes.Equal(ex[0].body, resp.RequestBody) {
				t.Errorf("RequestBody differs from the bytes the server received:\n%s\n%s", resp.RequestBody, ex[0].body)
			}
			sum := sha256.Sum256(ex[0].body)
			if resp.RequestSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("RequestSHA256 %s does not hash the sent bytes", resp.RequestSHA256)
			}
			if !bytes.Equal(ex[0].response, resp.Raw) || resp.RawRedacted {
				t.Errorf("Raw differs from the bytes the server sent (redacted %v)", resp.RawRedacted)
			}
			streamKeys := bytes.Contains(resp.RequestBody, []byte(`"stream":true,"stream_options":{"include_usage":true}`))
			if streamKeys != stream || (!stream && bytes.Contains(resp.RequestBody, []byte(`"stream"`))) {
				t.Errorf("stream keys in body %s, want stream=%v", resp.RequestBody, stream)
			}
			if got := fx.ref.Turns(session); got != 1 {
				t.Errorf("reference counted %d turns for %s, want 1", got, session)
			}

			// Second turn: the tool results go back; the reply reports done.
			next := req
			next.Seq = 1
			next.Messages = append(append([]provider.Message(nil), req.Messages...), resp.Message)
			for _, c := range calls {
				next.Messages = append(next.Messages, provider.Message{Role: "tool", ToolCallID: c.ID, Content: "ok"})
			}
			done, err := client.Complete(t.Context(), next)
			if err != nil {
				t.Fatalf("second Complete: %v", err)
			}
			if want := `{"status":"done","files":["double.go","double_test.go"]}`; done.Message.Content != want || done.FinishReason != "stop" {
				t.Errorf("second reply %q finish %q", done.Message.Content, done.FinishReason)
			}
			if diff := cmp.Diff(ruleUsage(next.Messages, done.Message), *done.Usage); diff != "" {
				t.Errorf("second usage (-rule +got):\n%s", diff)
			}
			var sent struct {
				Messages []map[string]json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(fx.rec.exchanges()[1].body, &sent); err != nil {
				t.Fatal(err)
			}
			if got := string(sent.Messages[2]["content"]); got != "null" {
				t.Errorf("assistant message with tool calls sent content %s, want null", got)
			}
			if got := string(sent.Messages[3]["tool_call_id"]); got != `"`+calls[0].ID+`"` {
				t.Errorf("tool message sent tool_call_id %s", got)
			}

			var total provider.UsageTotal
			total.Add(resp.Usage)
			total.Add(done.Usage)
			if !total.Known() || total.Requests != 2 || total.TotalTokens != resp.Usage.TotalTokens+done.Usage.TotalTokens {
				t.Errorf("usage total %+v", total)
			}
		})
	}
}

func TestClientStreamAndPlainAgree(t *testing.T) {
	plain := startRecordedReference(t, reference.Config{})
	streamed := startRecordedReference(t, reference.Config{})
	a, err := newClient(t, provider.ClientConfig{BaseURL: plain.url}).Complete(t.Context(), assignmentRequest("run-2-m", false))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newClient(t, provider.ClientConfig{BaseURL: streamed.url}).Complete(t.Context(), assignmentRequest("run-2-m", true))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Message, b.Message); diff != "" {
		t.Errorf("message (-plain +streamed):\n%s", diff)
	}
	if diff := cmp.Diff(a.Usage, b.Usage); diff != "" {
		t.Errorf("usage (-plain +streamed):\n%s", diff)
	}
	if a.FinishReason != b.FinishReason || a.Model != b.Model {
		t.Errorf("finish %q/%q model %q/%q", a.FinishReason, b.FinishReason, a.Model, b.Model)
	}
}

func TestClientDropUsageIsUnknown(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			fx := startRecordedReference(t, reference.Config{Faults: []reference.Fault{{Member: "critic", Turn: 1, Kind: reference.FaultDropUsage}}})
			client := newClient(t, provider.ClientConfig{BaseURL: fx.url})
			var total provider.UsageTotal
			for seq := range 3 {
				req := assignmentRequest("run-3-critic", stream)
				req.Seq = seq
				resp, err := client.Complete(t.Context(), req)
				if err != nil {
					t.Fatalf("seq %d: %v", seq, err)
				}
				if (resp.Usage == nil) != (seq == 1) {
					t.Errorf("seq %d usage %+v; want nil exactly at the faulted turn 1", seq, resp.Usage)
				}
				total.Add(resp.Usage)
			}
			if total.Known() || total.Unknown != 1 || total.Requests != 3 {
				t.Errorf("total %+v: want Known false with 1 unknown of 3", total)
			}
		})
	}
}

func TestClientRetriesHTTP500(t *testing.T) {
	tests := []struct {
		name         string
		faultTurn    int
		maxRetries   int
		wantAttempts int
		wantErr      bool
	}{
		{"every turn, default retries", -1, 0, 3, true},
		{"every turn, one retry", -1, 1, 2, true},
		{"every turn, retries off", -1, -1, 1, true},
		{"first turn only, retry succeeds", 0, 0, 2, false},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				fx := startRecordedReference(t, reference.Config{Faults: []reference.Fault{{Member: "executor", Turn: tc.faultTurn, Kind: reference.FaultHTTP500}}})
				client := newClient(t, provider.ClientConfig{BaseURL: fx.url, MaxRetries: tc.maxRetries})
				resp, err := client.Complete(t.Context(), assignmentRequest("run-4-executor", stream))
				if resp == nil {
					t.Fatalf("no Response returned (err %v)", err)
				}
				if resp.Attempts != tc.wantAttempts || fx.ref.Turns("run-4-executor") != tc.wantAttempts {
					t.Errorf("attempts %d, server saw %d, want %d", resp.Attempts, fx.ref.Turns("run-4-executor"), tc.wantAttempts)
				}
				for _, ex := range fx.rec.exchanges() {
					if !bytes.Equal(ex.body, resp.RequestBody) {
						t.Errorf("a retry sent different bytes")
					}
				}
				if !tc.wantErr {
					if err != nil || resp.Usage == nil || resp.Status != 200 {
						t.Fatalf("err %v status %d usage %v, want success after retry", err, resp.Status, resp.Usage)
					}
					return
				}
				var httpErr *provider.HTTPError
				if !errors.As(err, &httpErr) || httpErr.Status != 500 || !strings.Contains(httpErr.Body, "reference_fault_http_500") {
					t.Fatalf("err %v, want *HTTPError 500 with the fault body", err)
				}
				if resp.Status != 500 || !bytes.Contains(resp.Raw, []byte("reference_fault_http_500")) || resp.Usage != nil {
					t.Errorf("response status %d raw %s usage %v", resp.Status, resp.Raw, resp.Usage)
				}
				if !strings.Contains(err.Error(), "run-4-executor") {
					t.Errorf("error %q does not name the session", err)
				}
			})
		}
	}
}

func TestClientConcurrentMembers(t *testing.T) {
	fx := startRecordedReference(t, reference.Config{})
	client := newClient(t, provider.ClientConfig{BaseURL: fx.url, APIKey: testAPIKey})
	const members, perMember = 8, 3
	var wg sync.WaitGroup
	errs := make(chan error, members*perMember)
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range perMember {
				req := assignmentRequest(fmt.Sprintf("run-5-m%d", m), (m+seq)%2 == 0)
				req.Seq = seq
				resp, err := client.Complete(t.Context(), req)
				switch {
				case err != nil:
					errs <- err
				case resp.Usage == nil || len(resp.Message.ToolCalls) != 2:
					errs <- fmt.Errorf("member %d seq %d: incomplete response %+v", m, seq, resp.Message)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for m := range members {
		session := fmt.Sprintf("run-5-m%d", m)
		if got := fx.ref.Turns(session); got != perMember {
			t.Errorf("%s: %d turns, want %d", session, got, perMember)
		}
	}
}
