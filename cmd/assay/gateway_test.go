package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// lockedBuffer is a bytes.Buffer a subprocess writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is an assay serve command running in its own process (the test binary as assay).
type served struct {
	cmd    *exec.Cmd
	url    string // the first line it printed on stdout: its base URL
	stderr *lockedBuffer
	done   chan error // receives Wait's result
}

// serveProcess starts `assay ARGS...` as a subprocess and waits for the base URL it prints. The
// process is killed at cleanup if the test did not stop it.
func serveProcess(t *testing.T, args ...string) *served {
	t.Helper()
	argv, _ := json.Marshal(args)
	s := &served{cmd: exec.Command(os.Args[0], "-test.run=^$"), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), "ASSAY_TEST_CLI="+string(argv))
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		l, _ := r.ReadString('\n')
		line <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	select {
	case s.url = <-line:
	case err := <-s.done:
		t.Fatalf("assay %v exited before serving: %v: %s", args, err, s.stderr.String())
	}
	if !strings.HasPrefix(s.url, "http://") {
		t.Fatalf("assay %v printed %q, not a URL: %s", args, s.url, s.stderr.String())
	}
	return s
}

// stop sends SIGTERM and returns the exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := <-s.done
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return s.cmd.ProcessState.ExitCode()
}

// gatewayHealth reads GET /admin/health of the gateway whose base URL is base (with or without /v1).
func gatewayHealth(t *testing.T, base string) gateway.Health {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/admin/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h gateway.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitRecorded polls the gateway's health until n requests have arrived and none is in flight.
func waitRecorded(t *testing.T, base string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if h := gatewayHealth(t, base); h.LastRecordID >= n && h.InFlight == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the gateway did not record %d requests: %+v", n, gatewayHealth(t, base))
}

func writeClaims(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claims.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type tokens struct{ prompt, completion, total int64 }

func claimLine(session string, u tokens) string {
	return fmt.Sprintf(`{"session_id":%q,"member_id":"m-%s","prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`,
		session, session, u.prompt, u.completion, u.total)
}

type reconcileOutput struct {
	OK       bool `json:"ok"`
	Sessions []struct {
		SessionID   string `json:"session_id"`
		Verdict     string `json:"verdict"`
		Differences []struct {
			Field            string `json:"field"`
			Claimed, Gateway int64
		} `json:"differences"`
	} `json:"sessions"`
	Unattributed struct {
		Requests int `json:"requests"`
	} `json:"unattributed"`
	Recorded *struct {
		RunID   string `json:"run_id"`
		Verdict struct {
			Verdict string `json:"verdict"`
		} `json:"verdict"`
	} `json:"recorded"`
}

func reconcileJSON(t *testing.T, args ...string) (result, reconcileOutput) {
	t.Helper()
	r := runCLI(t, append([]string{"usage", "reconcile", "--format", "json"}, args...)...)
	var out reconcileOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("usage reconcile JSON: %v: exit %d %q %s", err, r.code, r.stdout, r.stderr)
	}
	return r, out
}

func verdicts(o reconcileOutput) map[string]string {
	m := map[string]string{}
	for _, s := range o.Sessions {
		m[s.SessionID] = s.Verdict
	}
	return m
}

// The observing gateway as its own process in front of the reference provider as its own process,
// driven by the OpenAI Go SDK with a session header per request (two header names), then the
// system's own usage (what the SDK received) reconciled against the gateway's database.
func TestGatewayServeWithSDKAndUsageReconcile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "gw.db")
	prov := serveProcess(t, "provider", "serve", "--addr", "127.0.0.1:0")
	gw := serveProcess(t, "gateway", "serve", "--upstream", prov.url, "--addr", "127.0.0.1:0", "--db", db,
		"--session-header", "X-Session-Id", "--session-header", "x-inferflux-session-id")
	const secret = "sk-assay-test-SECRET-4f1c9d"
	// The stderr line follows the stdout one: wait for it.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(gw.stderr.String(), "\n"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(gw.stderr.String(), "assay: gateway listening on "+gw.url+" (") {
		t.Errorf("stderr does not give the URL on its line: %q", gw.stderr.String())
	}
	// The key goes both as OpenAI's Authorization bearer and as Azure's api-key header.
	client := openai.NewClient(option.WithBaseURL(gw.url+"/"), option.WithAPIKey(secret), option.WithHeader("Api-Key", secret),
		option.WithMaxRetries(0))
	seen := map[string]tokens{}
	sent := int64(0)
	ask := func(session, header string, stream bool) {
		t.Helper()
		var opts []option.RequestOption
		if header != "" {
			opts = append(opts, option.WithHeader(header, session))
		}
		params := openai.ChatCompletionNewParams{Model: reference.ModelID,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello " + session)}}
		var u openai.CompletionUsage
		if stream {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s := client.Chat.Completions.NewStreaming(t.Context(), params, opts...)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatalf("stream of %s: %v", session, err)
			}
			u = acc.Usage
		} else {
			resp, err := client.Chat.Completions.New(t.Context(), params, opts...)
			if err != nil {
				t.Fatalf("request of %s: %v", session, err)
			}
			u = resp.Usage
		}
		if u.TotalTokens == 0 {
			t.Fatalf("the SDK saw no usage for %s (stream %v)", session, stream)
		}
		sent++
		old := seen[session]
		seen[session] = tokens{old.prompt + u.PromptTokens, old.completion + u.CompletionTokens, old.total + u.TotalTokens}
	}
	ask("sess-a", "X-Session-Id", false)
	ask("sess-a", "X-Session-Id", true)
	ask("sess-b", "X-Inferflux-Session-Id", true)
	ask("sess-b", "X-Inferflux-Session-Id", false)
	waitRecorded(t, gw.url, sent)

	correct := writeClaims(t, claimLine("sess-a", seen["sess-a"]), "", claimLine("sess-b", seen["sess-b"]))
	t.Run("correct claims are conserved", func(t *testing.T) {
		r := runCLI(t, "usage", "reconcile", "--gateway-db", db, "--claims", correct)
		if r.code != 0 || strings.Count(r.stdout, "conserved") < 2 || r.stderr != "" {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("a claim off by one is a mismatch naming the field and both values", func(t *testing.T) {
		b := seen["sess-b"]
		b.completion++
		r, out := reconcileJSON(t, "--gateway-db", db, "--claims", writeClaims(t, claimLine("sess-a", seen["sess-a"]), claimLine("sess-b", b)))
		v := verdicts(out)
		if r.code != 1 || out.OK || v["sess-a"] != "conserved" || v["sess-b"] != "mismatch" {
			t.Fatalf("exit %d %+v", r.code, out)
		}
		want := fmt.Sprintf("completion_tokens claimed %d, gateway %d", b.completion, b.completion-1)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q does not name %q", r.stderr, want)
		}
	})

	ask("sess-c", "X-Session-Id", true) // never claimed
	waitRecorded(t, gw.url, sent)
	t.Run("a session without a claim, and a claim without records, are unknown", func(t *testing.T) {
		r, out := reconcileJSON(t, "--gateway-db", db, "--claims", writeClaims(t, claimLine("sess-a", seen["sess-a"]),
			claimLine("sess-b", seen["sess-b"]), claimLine("sess-ghost", tokens{1, 1, 2})))
		v := verdicts(out)
		if r.code != 1 || v["sess-c"] != "unknown" || v["sess-ghost"] != "unknown" || v["sess-a"] != "conserved" {
			t.Fatalf("exit %d %+v", r.code, v)
		}
	})

	ask("", "", false) // no session header: unattributed
	waitRecorded(t, gw.url, sent)
	all := writeClaims(t, claimLine("sess-a", seen["sess-a"]), claimLine("sess-b", seen["sess-b"]), claimLine("sess-c", seen["sess-c"]))
	store := filepath.Join(dir, "evidence.duckdb")
	t.Run("an unattributed request is listed and fails; --into records an observe run", func(t *testing.T) {
		r, out := reconcileJSON(t, "--gateway-db", db, "--claims", all, "--into", store)
		if r.code != 1 || out.Unattributed.Requests != 1 || out.Recorded == nil || out.Recorded.Verdict.Verdict != "non_certifiable" {
			t.Fatalf("exit %d %+v\n%s", r.code, out, r.stderr)
		}
		for s, v := range verdicts(out) {
			if v != "conserved" {
				t.Errorf("session %s %s", s, v)
			}
		}
		text := runCLI(t, "usage", "reconcile", "--gateway-db", db, "--claims", all)
		if text.code != 1 || !strings.Contains(text.stdout, "unattributed: 1 request(s)") {
			t.Errorf("table: exit %d\n%s", text.code, text.stdout)
		}
		// The error line counts and names the first problem; the table above lists them all.
		if !strings.HasPrefix(text.stderr, "assay: usage claims not conserved: ") || strings.Count(text.stderr, "\n") != 1 ||
			!strings.Contains(text.stderr, "1 unattributed request(s); first: ") {
			t.Errorf("error line %q", text.stderr)
		}
		if v := runCLI(t, "verify", "--store", store); v.code != 0 || !strings.Contains(v.stdout, out.Recorded.RunID) {
			t.Errorf("verify: exit %d\n%s%s", v.code, v.stdout, v.stderr)
		}
		rep := runCLI(t, "report", "--store", store, "--format", "json")
		if rep.code != 0 || !strings.Contains(rep.stdout, out.Recorded.RunID) || !strings.Contains(rep.stdout, "usage_claims") ||
			!strings.Contains(rep.stdout, "non_certifiable") {
			t.Errorf("report: exit %d\n%.2000s%s", rep.code, rep.stdout, rep.stderr)
		}
		// The run executed no task: its report says so, and never that its manifest was tampered
		// with (the envelope binds the manifest's exact bytes).
		if !strings.Contains(rep.stdout, `"status": "not_applicable"`) || strings.Contains(rep.stdout, "manifest_mismatch") {
			t.Errorf("report's task file of a usage-claims run:\n%.3000s", rep.stdout)
		}
	})

	if code := gw.stop(t); code != 0 {
		t.Fatalf("gateway exit %d on SIGTERM: %s", code, gw.stderr.String())
	}
	prov.stop(t)
	// The API key went to the upstream but is in no file the gateway wrote and in none of its output.
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("Bearer")) {
			t.Errorf("%s holds the credential", p)
		}
	}
	if strings.Contains(gw.stderr.String(), secret) {
		t.Errorf("the gateway logged the credential: %s", gw.stderr.String())
	}
	recs, err := gateway.ReadDatabase(t.Context(), db)
	if err != nil || int64(len(recs)) != sent {
		t.Fatalf("rows %d (%v), sent %d", len(recs), err, sent)
	}
	for _, r := range recs {
		if r.UsageState != gateway.UsageReported || r.RelayError != "" || r.AnsweredModel != reference.ModelID {
			t.Errorf("record %d: %s %q %q", r.ID, r.UsageState, r.RelayError, r.AnsweredModel)
		}
	}
}

// SIGTERM mid-traffic: requests in flight that finish within the grace are recorded as relayed,
// those still running when it ends are cut and recorded as gateway_closed; no row is lost.
func TestGatewayServeSIGTERMMidTraffic(t *testing.T) {
	const finishing, held = 8, 4
	arrived := make(chan struct{}, finishing+held)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		arrived <- struct{}{}
		if r.Header.Get("X-Session-Id") == "held" {
			<-r.Context().Done() // until the gateway cuts it
			return
		}
		<-release
		_, _ = io.WriteString(w, `data: {"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	db := filepath.Join(t.TempDir(), "gw.db")
	gw := serveProcess(t, "gateway", "serve", "--upstream", up.URL, "--addr", "127.0.0.1:0", "--db", db, "--shutdown-grace", "2s")
	// A second gateway on the same database is refused while this one holds it.
	if r := runCLI(t, "gateway", "serve", "--upstream", up.URL, "--addr", "127.0.0.1:0", "--db", db); r.code != 2 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("a second gateway on %s: exit %d %s", db, r.code, r.stderr)
	}
	var wg sync.WaitGroup
	for i := range finishing + held {
		session := "finishing"
		if i >= finishing {
			session = "held"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, gw.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("X-Session-Id", session)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for range finishing + held {
		<-arrived
	}
	if err := gw.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The gateway now refuses new connections; let the finishing streams end inside the grace.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := http.Get(gw.url + "/admin/health"); err != nil {
			break
		}
	}
	close(release)
	wg.Wait()
	<-gw.done
	if code := gw.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d: %s", code, gw.stderr.String())
	}
	recs, err := gateway.ReadDatabase(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		count[r.SessionID+"/"+r.UsageState+"/"+r.RelayError]++
	}
	want := map[string]int{"finishing/reported/": finishing, "held/unknown/gateway_closed": held}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("rows by session/usage/relay error: %v, want %v (%d rows for %d requests)", count, want, len(recs), finishing+held)
	}
}

// Bad input is one line on stderr, exit 2, and nothing written.
func TestGatewayAndUsageBadInput(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "gw.db")
	notDB := filepath.Join(dir, "not.db")
	os.WriteFile(notDB, []byte(strings.Repeat("not a database ", 20)), 0o644)
	good := writeClaims(t, `{"session_id":"s","total_tokens":3}`)
	store := filepath.Join(dir, "evidence.duckdb")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no upstream", []string{"gateway", "serve", "--addr", "127.0.0.1:0", "--db", db}, "--upstream is required"},
		{"upstream not http", []string{"gateway", "serve", "--upstream", "ftp://x", "--addr", "127.0.0.1:0", "--db", db}, "not an absolute http(s) URL"},
		{"upstream with a query", []string{"gateway", "serve", "--upstream", "http://127.0.0.1:9/v1?api-key=SEKRIT", "--addr", "127.0.0.1:0", "--db", db}, "query"},
		{"bad address", []string{"gateway", "serve", "--upstream", "http://127.0.0.1:9", "--addr", "nope", "--db", db}, "listen address"},
		{"credential as session header", []string{"gateway", "serve", "--upstream", "http://127.0.0.1:9", "--addr", "127.0.0.1:0", "--db", db, "--session-header", "Authorization"}, "credentials"},
		{"malformed claims line", []string{"usage", "reconcile", "--gateway-db", db, "--into", store, "--claims",
			writeClaims(t, `{"session_id":"s","total_tokens":3}`, ``, `{"session_id":"s","total_token":3}`)}, "line 3"},
		{"negative count", []string{"usage", "reconcile", "--gateway-db", db, "--into", store, "--claims", writeClaims(t, `{"session_id":"s","total_tokens":-1}`)}, "line 1"},
		{"missing db", []string{"usage", "reconcile", "--gateway-db", filepath.Join(dir, "missing.db"), "--into", store, "--claims", good}, "missing.db"},
		{"not a gateway db", []string{"usage", "reconcile", "--gateway-db", notDB, "--into", store, "--claims", good}, "not a gateway usage database"},
		{"missing claims", []string{"usage", "reconcile", "--gateway-db", notDB, "--claims", filepath.Join(dir, "none.jsonl")}, "none.jsonl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
			if strings.Contains(r.stderr, "SEKRIT") {
				t.Errorf("stderr shows the query's key: %s", r.stderr)
			}
			for _, p := range []string{db, store} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}
