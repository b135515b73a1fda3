package reference_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// These tests speak raw HTTP and JSON to the server, so they see the exact
// wire shape (null content, absent usage keys, SSE framing).

const writeFileToolJSON = `{"type":"function","function":{"name":"write_file","parameters":{"type":"object"}}}`

type rawCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type rawCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role      string    `json:"role"`
			Content   *string   `json:"content"`
			ToolCalls []rawCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// post sends body to the chat endpoint with the session header and returns
// status and body.
func post(t *testing.T, run *reference.Running, session, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, run.BaseURL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, raw
}

func decodeCompletion(t *testing.T, raw []byte) rawCompletion {
	t.Helper()
	var c rawCompletion
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("body %s: %v", raw, err)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("body %s: want exactly one choice", raw)
	}
	return c
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func userTurn(text, tools string) string {
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}],"tools":[%s]}`, reference.ModelID, jsonString(text), tools)
}

func TestReplies(t *testing.T) {
	goAssign := reference.FormatAssignment(doubleAssignment())
	single := reference.FormatAssignment(reference.Assignment{Task: "double", Package: "double", Files: []string{"double_test.go"}})
	py := reference.FormatAssignment(reference.Assignment{Task: "double", Language: "python", Files: []string{"double.py", "test_double.py"}})
	older := reference.FormatAssignment(reference.Assignment{Task: "double", Package: "old", Files: []string{"old.go"}})
	// An assistant turn with tool calls, then tool results, after the assignment.
	withResults := func(results ...string) string {
		var msgs []string
		msgs = append(msgs, `{"role":"user","content":`+jsonString(goAssign)+`}`)
		msgs = append(msgs, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"write_file","arguments":"{}"}}]}`)
		for _, r := range results {
			msgs = append(msgs, `{"role":"tool","tool_call_id":"call_a","content":`+jsonString(r)+`}`)
		}
		return fmt.Sprintf(`{"model":%q,"messages":[%s],"tools":[%s]}`, reference.ModelID, strings.Join(msgs, ","), writeFileToolJSON)
	}
	tests := []struct {
		name        string
		body        string
		wantContent string // exact, when wantPrefix is false
		wantPrefix  bool
		wantFinish  string
		wantFiles   []string // paths of write_file calls
	}{
		{name: "no assignment", body: userTurn("write me a poem", writeFileToolJSON), wantContent: reference.NoAssignmentReply, wantFinish: "stop"},
		{name: "two go files", body: userTurn(goAssign, writeFileToolJSON), wantFinish: "tool_calls", wantFiles: []string{"double.go", "double_test.go"}},
		{name: "single file profile", body: userTurn(single, writeFileToolJSON), wantFinish: "tool_calls", wantFiles: []string{"double_test.go"}},
		{name: "python", body: userTurn(py, writeFileToolJSON), wantFinish: "tool_calls", wantFiles: []string{"double.py", "test_double.py"}},
		{name: "no write_file tool", body: userTurn(goAssign, `{"type":"function","function":{"name":"read_file"}}`), wantContent: "assay-reference-1 needs a write_file tool", wantPrefix: true, wantFinish: "stop"},
		{name: "unknown task", body: userTurn(reference.FormatAssignment(reference.Assignment{Task: "triple", Package: "p", Files: []string{"p.go"}}), writeFileToolJSON), wantContent: "assay-reference-1 cannot carry out this assignment: unknown task", wantPrefix: true, wantFinish: "stop"},
		{name: "bad go package", body: userTurn(reference.FormatAssignment(reference.Assignment{Task: "double", Package: "not a name", Files: []string{"p.go"}}), writeFileToolJSON), wantContent: "assay-reference-1 cannot carry out this assignment: package", wantPrefix: true, wantFinish: "stop"},
		{
			name: "last assignment wins",
			body: fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s},{"role":"assistant","content":"ok"},{"role":"user","content":%s}],"tools":[%s]}`,
				reference.ModelID, jsonString(older), jsonString(goAssign), writeFileToolJSON),
			wantFinish: "tool_calls", wantFiles: []string{"double.go", "double_test.go"},
		},
		{name: "tool results done", body: withResults("wrote double.go", "wrote double_test.go"), wantContent: `{"status":"done","files":["double.go","double_test.go"]}`, wantFinish: "stop"},
		{name: "tool result error", body: withResults("wrote double.go", "error: disk full"), wantContent: `{"status":"failed","error":"error: disk full"}`, wantFinish: "stop"},
		{name: "tool result Error with space", body: withResults("  Error <denied> & more"), wantContent: `{"status":"failed","error":"  Error <denied> & more"}`, wantFinish: "stop"},
		{
			name: "content as text parts",
			body: fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"text","text":"intro\n"},{"type":"text","text":%s}]}],"tools":[%s]}`,
				reference.ModelID, jsonString(goAssign), writeFileToolJSON),
			wantFinish: "tool_calls", wantFiles: []string{"double.go", "double_test.go"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := startReference(t, reference.Config{})
			status, raw := post(t, run, "run-9-executor", tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d body %s", status, raw)
			}
			c := decodeCompletion(t, raw)
			ch := c.Choices[0]
			if ch.FinishReason != tc.wantFinish {
				t.Errorf("finish %q, want %q", ch.FinishReason, tc.wantFinish)
			}
			if len(tc.wantFiles) > 0 {
				if ch.Message.Content != nil {
					t.Errorf("content %q next to tool calls, want JSON null", *ch.Message.Content)
				}
				var paths []string
				for _, call := range ch.Message.ToolCalls {
					paths = append(paths, decodeWriteFile(t, call.Function.Arguments).Path)
				}
				if diff := cmp.Diff(tc.wantFiles, paths); diff != "" {
					t.Errorf("write_file paths (-want +got):\n%s", diff)
				}
				return
			}
			if len(ch.Message.ToolCalls) != 0 || ch.Message.Content == nil {
				t.Fatalf("want content and no tool calls, got %s", raw)
			}
			got := *ch.Message.Content
			if tc.wantPrefix && !strings.HasPrefix(got, tc.wantContent) || !tc.wantPrefix && got != tc.wantContent {
				t.Errorf("content %q, want %q (prefix %v)", got, tc.wantContent, tc.wantPrefix)
			}
		})
	}
}

func TestUsageRuleOnRawWire(t *testing.T) {
	// Tool call arguments sent as an object count as their compact JSON; text
	// parts count joined; tool_call_id counts.
	run := startReference(t, reference.Config{})
	body := fmt.Sprintf(`{"model":%q,"messages":[
		{"role":"system","content":[{"type":"text","text":"ab"},{"type":"text","text":"cde"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"write_file","arguments":{ "path" : "x" }}}]},
		{"role":"tool","tool_call_id":"c1","content":"ok"},
		{"role":"user","content":"héllo"}]}`, reference.ModelID)
	status, raw := post(t, run, "s", body)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, raw)
	}
	c := decodeCompletion(t, raw)
	p, comp, tot := ruleUsage([]sentMessage{
		{content: "abcde"},
		{calls: []sentCall{{name: "write_file", arguments: `{"path":"x"}`}}},
		{content: "ok", toolCallID: "c1"},
		{content: "héllo"},
	}, reference.NoAssignmentReply, nil)
	if c.Usage == nil || c.Usage.PromptTokens != p || c.Usage.CompletionTokens != comp || c.Usage.TotalTokens != tot {
		t.Errorf("usage %+v, want %d/%d/%d", c.Usage, p, comp, tot)
	}
	// 4+ceil(5/4)=6, 4+ceil(22/4)=10, 4+ceil(4/4)=5, 4+ceil(6/4)=6.
	if p != 27 {
		t.Errorf("independent rule gives prompt %d, hand computation 27", p)
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   string
	}{
		{"not json", `{"model":`, http.StatusBadRequest, "invalid_body"},
		{"no messages", fmt.Sprintf(`{"model":%q,"messages":[]}`, reference.ModelID), http.StatusBadRequest, "invalid_body"},
		{"unknown role", fmt.Sprintf(`{"model":%q,"messages":[{"role":"wizard","content":"x"}]}`, reference.ModelID), http.StatusBadRequest, "invalid_body"},
		{"image part", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, reference.ModelID), http.StatusBadRequest, "invalid_body"},
		{"n of 2", fmt.Sprintf(`{"model":%q,"n":2,"messages":[{"role":"user","content":"x"}]}`, reference.ModelID), http.StatusBadRequest, "invalid_body"},
		{"other model", `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, http.StatusNotFound, "model_not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := startReference(t, reference.Config{})
			status, raw := post(t, run, "s", tc.body)
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d (%s)", status, tc.wantStatus, raw)
			}
			var e struct {
				Error struct {
					Message, Type, Code string
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != tc.wantCode || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("error body %s (%v), want code %q with message and type", raw, err, tc.wantCode)
			}
		})
	}
}

// sseEvents reads an SSE body as data payloads, failing on anything but
// "data: ..." lines separated by blank lines.
func sseEvents(t *testing.T, raw []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("want a blank line after each event, got %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		out = append(out, data)
		expectBlank = true
	}
	return out
}

func TestFaults(t *testing.T) {
	streamBody := func(includeUsage bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"hi"}]}`, reference.ModelID, includeUsage)
	}
	plainBody := userTurn("hi", writeFileToolJSON)

	t.Run("drop_usage non-streaming omits the usage key", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "critic", Turn: -1, Kind: reference.FaultDropUsage}}})
		_, raw := post(t, run, "run-1-critic", plainBody)
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(raw, &keys); err != nil {
			t.Fatal(err)
		}
		if _, ok := keys["usage"]; ok {
			t.Errorf("usage key present under drop_usage: %s", raw)
		}
		_, raw = post(t, run, "run-1-executor", plainBody)
		if c := decodeCompletion(t, raw); c.Usage == nil {
			t.Errorf("another member lost its usage: %s", raw)
		}
	})

	t.Run("drop_usage streaming sends no usage chunk", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Turn: -1, Kind: reference.FaultDropUsage}}})
		_, raw := post(t, run, "any", streamBody(true))
		events := sseEvents(t, raw)
		if events[len(events)-1] != "[DONE]" {
			t.Fatalf("stream does not end with [DONE]: %q", events)
		}
		for _, e := range events[:len(events)-1] {
			var c struct {
				Usage json.RawMessage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatal(err)
			}
			if len(c.Usage) > 0 && string(c.Usage) != "null" {
				t.Errorf("chunk carries usage under drop_usage: %s", e)
			}
		}
	})

	t.Run("stream without include_usage has no usage", func(t *testing.T) {
		run := startReference(t, reference.Config{})
		_, raw := post(t, run, "any", streamBody(false))
		if bytes.Contains(raw, []byte(`"usage"`)) {
			t.Errorf("usage sent without include_usage: %s", raw)
		}
	})

	t.Run("stream with include_usage ends with an empty-choices usage chunk", func(t *testing.T) {
		run := startReference(t, reference.Config{})
		_, raw := post(t, run, "any", streamBody(true))
		events := sseEvents(t, raw)
		var last struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   *struct {
				TotalTokens int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(events[len(events)-2]), &last); err != nil {
			t.Fatal(err)
		}
		if last.Choices == nil || len(last.Choices) != 0 || last.Usage == nil || last.Usage.TotalTokens == 0 {
			t.Errorf("last chunk before [DONE] is %s, want choices [] with usage", events[len(events)-2])
		}
	})

	t.Run("http_500 by member and turn", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "critic", Turn: 1, Kind: reference.FaultHTTP500}}})
		steps := []struct {
			session string
			want    int
		}{
			{"run-1-critic", 200},   // turn 0
			{"run-1-critic", 500},   // turn 1
			{"run-1-critic", 200},   // turn 2
			{"run-1-executor", 200}, // turn 0 of another member
			{"run-1-executor", 200}, // turn 1 of another member
			{"critic", 200},         // exact match, turn 0
			{"critic", 500},         // exact match, turn 1
			{"run-1-xcritic", 200},  // suffix without the dash: no match
			{"run-1-xcritic", 200},
		}
		for i, s := range steps {
			status, raw := post(t, run, s.session, plainBody)
			if status != s.want {
				t.Errorf("step %d (%s): status %d, want %d: %s", i, s.session, status, s.want, raw)
			}
			if status == 500 && !bytes.Contains(raw, []byte(`"code":"reference_fault_http_500"`)) {
				t.Errorf("500 body %s lacks the fault code", raw)
			}
		}
		if got := run.Server().Turns("run-1-critic"); got != 3 {
			t.Errorf("turns of run-1-critic %d, want 3 (failed requests count)", got)
		}
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  reference.Config
	}{
		{"unknown kind", reference.Config{Faults: []reference.Fault{{Kind: "explode"}}}},
		{"replace_reply without a reply", reference.Config{Faults: []reference.Fault{{Kind: reference.FaultReplaceReply}}}},
		{"negative delay", reference.Config{Faults: []reference.Fault{{Kind: reference.FaultSlow, Delay: -time.Second}}}},
		{"empty kind", reference.Config{Faults: []reference.Fault{{Turn: 0}}}},
		{"turn below -1", reference.Config{Faults: []reference.Fault{{Kind: reference.FaultHTTP500, Turn: -2}}}},
		{"bad header", reference.Config{SessionHeader: "X Session"}},
		{"model id with a space", reference.Config{Model: "ref model"}},
		{"model id with a slash", reference.Config{Model: "ref/model"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := reference.New(tc.cfg); !errors.Is(err, reference.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
			if _, err := reference.Start(t.Context(), tc.cfg); !errors.Is(err, reference.ErrInvalidConfig) {
				t.Errorf("Start: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestCustomSessionHeader(t *testing.T) {
	run := startReference(t, reference.Config{SessionHeader: "X-Member-Session"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, run.BaseURL()+"/chat/completions", strings.NewReader(userTurn("hi", writeFileToolJSON)))
	req.Header.Set("X-Member-Session", "run-1-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if run.Server().Turns("run-1-a") != 1 || run.Server().Turns("") != 0 {
		t.Errorf("turns under the custom header: %d, under none: %d; want 1 and 0", run.Server().Turns("run-1-a"), run.Server().Turns(""))
	}
}

func TestDeterministicBodies(t *testing.T) {
	bodies := []string{
		userTurn(reference.FormatAssignment(doubleAssignment()), writeFileToolJSON),
		strings.Replace(userTurn(reference.FormatAssignment(doubleAssignment()), writeFileToolJSON), `"messages"`, `"stream":true,"stream_options":{"include_usage":true},"messages"`, 1),
	}
	for i, body := range bodies {
		a := startReference(t, reference.Config{})
		b := startReference(t, reference.Config{})
		_, rawA := post(t, a, "run-5-m", body)
		_, rawB := post(t, b, "run-5-m", body)
		if !bytes.Equal(rawA, rawB) {
			t.Errorf("body %d: two servers answered differently:\n%s\n%s", i, rawA, rawB)
		}
		_, rawA2 := post(t, a, "run-5-m", body)
		if bytes.Equal(rawA, rawA2) {
			t.Errorf("body %d: turn 1 repeated turn 0's ids; ids must depend on the turn", i)
		}
	}
}

func TestConcurrentSessionsCountTurns(t *testing.T) {
	run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "m3", Turn: 2, Kind: reference.FaultHTTP500}}})
	const members, perMember = 6, 5
	var wg sync.WaitGroup
	statuses := make([][]int, members)
	for m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("run-c-m%d", m)
			for range perMember {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, run.BaseURL()+"/chat/completions", strings.NewReader(userTurn("hi", writeFileToolJSON)))
				req.Header.Set("X-Session-Id", session)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses[m] = append(statuses[m], -1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[m] = append(statuses[m], resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	for m := range members {
		session := fmt.Sprintf("run-c-m%d", m)
		if got := run.Server().Turns(session); got != perMember {
			t.Errorf("%s: %d turns, want %d", session, got, perMember)
		}
		want := []int{200, 200, 200, 200, 200}
		if m == 3 {
			want[2] = 500
		}
		if diff := cmp.Diff(want, statuses[m]); diff != "" {
			t.Errorf("%s statuses (-want +got):\n%s", session, diff)
		}
	}
}

func TestAssignmentFormatParse(t *testing.T) {
	a := reference.Assignment{Task: "double", Language: "go", Package: "double", Files: []string{"a.go", "a_test.go"}}
	line := reference.FormatAssignment(a)
	const want = `assay-assignment: {"task":"double","language":"go","package":"double","files":["a.go","a_test.go"]}`
	if line != want {
		t.Errorf("FormatAssignment = %s\nwant %s", line, want)
	}
	if got := reference.FormatAssignment(reference.Assignment{Task: "double"}); !strings.HasSuffix(got, `"files":[]}`) {
		t.Errorf("nil files format as %s, want []", got)
	}
	tests := []struct {
		name string
		text string
		want reference.Assignment
		ok   bool
	}{
		{"alone", line, a, true},
		{"inside a message with CRLF and indentation", "Do this:\r\n   " + line + "\r\nthanks", a, true},
		{"no prefix", "please double things", reference.Assignment{}, false},
		{"unknown key", `assay-assignment: {"task":"double","extra":1}`, reference.Assignment{}, false},
		{"trailing data", line + ` {"task":"x"}`, reference.Assignment{}, false},
		{"bad json", `assay-assignment: {"task":`, reference.Assignment{}, false},
		{"prefix mid-line is not an assignment", "note: " + line, reference.Assignment{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := reference.ParseAssignment(tc.text)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("assignment (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartStopsOnContextAndClose(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	run, err := reference.Start(ctx, reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(run.BaseURL() + "/models")
	if err != nil {
		t.Fatalf("GET models: %v", err)
	}
	resp.Body.Close()
	cancel()
	// Poll with a deadline until the listener is gone.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(run.BaseURL() + "/models")
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still answers after its context was cancelled")
		}
		runtime.Gosched()
	}
	if err := run.Close(); err != nil {
		t.Errorf("Close after context end: %v", err)
	}
	if err := run.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// An address that is not host:port is the caller's mistake (ErrInvalidConfig), told apart from a
// port that cannot be had (the listen error).
func TestStartOnRefusesAnAddressThatIsNotHostPort(t *testing.T) {
	for _, addr := range []string{"not-an-address", "127.0.0.1:http-ish", "127.0.0.1:70000", "127.0.0.1:"} {
		if _, err := reference.StartOn(t.Context(), addr, reference.Config{}); !errors.Is(err, reference.ErrInvalidConfig) {
			t.Errorf("%q: %v, want ErrInvalidConfig", addr, err)
		}
	}
	run, err := reference.StartOn(t.Context(), "127.0.0.1:0", reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	taken := strings.TrimSuffix(strings.TrimPrefix(run.BaseURL(), "http://"), "/v1")
	if _, err := reference.StartOn(t.Context(), taken, reference.Config{}); err == nil || errors.Is(err, reference.ErrInvalidConfig) {
		t.Fatalf("a taken port %s: %v, want the listen error", taken, err)
	}
}

// A server given a model id serves that id and no other, and answers with it
// on the plain and the streamed wire; the default stays ModelID.
func TestConfiguredModelID(t *testing.T) {
	run := startReference(t, reference.Config{Model: "ref-model-a"})
	body := strings.Replace(userTurn(reference.FormatAssignment(doubleAssignment()), writeFileToolJSON), reference.ModelID, "ref-model-a", 1)
	code, raw := post(t, run, "run-1-m", body)
	if code != http.StatusOK || decodeCompletion(t, raw).Model != "ref-model-a" {
		t.Fatalf("plain answer %d %s, want model ref-model-a", code, raw)
	}
	stream := strings.Replace(body, `"messages"`, `"stream":true,"stream_options":{"include_usage":true},"messages"`, 1)
	code, raw = post(t, run, "run-2-m", stream)
	if code != http.StatusOK || !strings.Contains(string(raw), `"model":"ref-model-a"`) || strings.Contains(string(raw), reference.ModelID) {
		t.Fatalf("streamed answer %d %s, want every chunk's model ref-model-a", code, raw)
	}
	// The default id is refused by a server configured with another: the routing check
	// compares what was asked with what answered, and a server must not answer for a model it is not.
	code, raw = post(t, run, "run-3-m", userTurn("hi", writeFileToolJSON))
	if code != http.StatusNotFound || !strings.Contains(string(raw), "serves only ref-model-a") {
		t.Fatalf("request for %s: %d %s, want 404 naming ref-model-a", reference.ModelID, code, raw)
	}
	resp, err := http.Get(run.BaseURL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	list, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(list), `"id":"ref-model-a"`) {
		t.Fatalf("GET /v1/models = %s, want ref-model-a", list)
	}
	def := startReference(t, reference.Config{})
	if code, raw := post(t, def, "run-1-m", userTurn("hi", writeFileToolJSON)); code != http.StatusOK || decodeCompletion(t, raw).Model != reference.ModelID {
		t.Fatalf("default server answered %d %s, want model %s", code, raw, reference.ModelID)
	}
}
