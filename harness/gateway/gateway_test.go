package gateway

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func startGateway(t *testing.T, upstream string) (*Gateway, string) {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "out", "gateway-usage.db")
	g, err := Start(t.Context(), Config{Upstream: upstream, DBPath: dbPath})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g, dbPath
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func i64(v int64) *int64 { return &v }

func records(t *testing.T, g *Gateway, session string) []Record {
	t.Helper()
	recs, err := g.Records(t.Context(), session, false)
	if err != nil {
		t.Fatalf("Records(%q): %v", session, err)
	}
	return recs
}

func openRO(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestCredentialsForwardedButNeverStored(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "gateway-usage.db")
	var logBuf syncBuffer
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath, ErrorLog: log.New(&logBuf, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{
		"Authorization":       "Bearer sk-test-SECRETVALUE123",
		"X-Api-Key":           "xak-SECRETAPIKEY456",
		"Api-Key":             "azure-SECRETKEY789",
		"Openai-Organization": "org-SECRETORG000",
		"Openai-Project":      "proj-SECRETPROJ111",
	}
	const session = "run-cred-member-1"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		g.URL()+"/v1/chat/completions?api-key=SECRETQUERY222", strings.NewReader(chatBody("json-usage", false, "hello")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(DefaultSessionHeader, session)
	for k, v := range secrets {
		req.Header.Set(k, v)
	}
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Also drive the unreachable-upstream path, whose errors get logged.
	dead := deadUpstream(t)
	g2, err := Start(t.Context(), Config{Upstream: dead, DBPath: dbPath + "2", ErrorLog: log.New(&logBuf, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	req2, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g2.URL()+"/v1/chat/completions?api-key=SECRETQUERY222", strings.NewReader("{}"))
	req2.Header.Set("Authorization", secrets["Authorization"])
	if resp2, err := rawClient().Do(req2); err == nil {
		resp2.Body.Close()
	}

	got := up.requestOfSession(t, session)
	for k, v := range secrets {
		if got.Header.Get(k) != v {
			t.Errorf("upstream got %s=%q, want %q", k, got.Header.Get(k), v)
		}
	}
	if got.RawQuery != "api-key=SECRETQUERY222" {
		t.Errorf("upstream got query %q", got.RawQuery)
	}

	// Snapshot the -wal and -shm files while the gateway is open (Close
	// checkpoints and removes them), then the main file after Close.
	var raw [][]byte
	var names []string
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", dbPath + "2", dbPath + "2-wal"} {
		if b, err := os.ReadFile(p); err == nil {
			raw = append(raw, b)
			names = append(names, p+" (open)")
		}
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", dbPath + "2"} {
		if b, err := os.ReadFile(p); err == nil {
			raw = append(raw, b)
			names = append(names, p)
		}
	}
	raw = append(raw, logBuf.Bytes())
	names = append(names, "error log")

	needles := []string{"SECRETQUERY222"}
	for _, v := range secrets {
		needles = append(needles, v)
		needles = append(needles, strings.TrimPrefix(v, "Bearer ")) // the bare token too
	}
	for i, b := range raw {
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("%s contains secret %q", names[i], n)
			}
		}
	}
	// The search must be able to find what is stored: the session id is.
	var all []byte
	for _, b := range raw {
		all = append(all, b...)
	}
	if !bytes.Contains(all, []byte(session)) {
		t.Errorf("session id %q not found in the database bytes: the secret search would prove nothing", session)
	}
	if !strings.Contains(logBuf.String(), "upstream round trip") {
		t.Errorf("error log did not record the unreachable upstream: %q", logBuf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }

func TestRecordFields(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	before := time.Now().UTC()
	const session = "run-rec-m1"
	body := chatBody("json-usage", false, "abcdefghij")
	status, got := post(t, g, session, body, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, got)
	}
	recs := records(t, g, session)
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1", len(recs))
	}
	r := recs[0]
	seen := up.requestOfSession(t, session)
	want := Record{
		ID:             r.ID,
		SessionID:      session,
		Method:         http.MethodPost,
		Path:           "/v1/chat/completions",
		Model:          "json-usage",
		AnsweredModel:  "json-usage",
		Stream:         false,
		Status:         http.StatusOK,
		LatencyMS:      r.LatencyMS,
		RequestSHA256:  sha(seen.Body),
		ResponseSHA256: sha(got),
		RequestBytes:   int64(len(seen.Body)),
		// An unencoded body decodes to itself.
		ResponseDecodedSHA256: sha(got),
		ResponseBytes:         int64(len(got)),
		UsageState:            UsageReported,
		PromptTokens:          i64(10),
		CompletionTokens:      i64(completionTokens),
		TotalTokens:           i64(10 + completionTokens),
		CachedTokens:          i64(2),
		ReasoningTokens:       i64(1),
		StartedAt:             r.StartedAt,
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if string(seen.Body) != body || r.RequestSHA256 != sha([]byte(body)) {
		t.Errorf("request body was not forwarded unchanged: upstream got %q", seen.Body)
	}
	if ae := seen.Header.Get("Accept-Encoding"); ae != "" {
		t.Errorf("upstream got Accept-Encoding %q the client never sent", ae)
	}
	if r.LatencyMS <= 0 {
		t.Errorf("LatencyMS = %v, want > 0", r.LatencyMS)
	}
	if r.StartedAt.Location() != time.UTC || r.StartedAt.Before(before.Add(-time.Second)) {
		t.Errorf("StartedAt = %v, want UTC at or after %v", r.StartedAt, before)
	}
	// A request without the session header is recorded with "".
	if status, _ := post(t, g, "", chatBody("json-usage", false, "x"), nil); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	if recs := records(t, g, ""); len(recs) != 1 || recs[0].SessionID != "" {
		t.Errorf("records without session: %+v", recs)
	}
}

func TestUsageExtraction(t *testing.T) {
	up := newFakeUpstream(t)
	g, dbPath := startGateway(t, up.srv.URL)
	const content = "twelve bytes" // prompt_tokens = 12
	full := func(prompt int64) Record {
		return Record{UsageState: UsageReported, PromptTokens: i64(prompt), CompletionTokens: i64(completionTokens),
			TotalTokens: i64(prompt + completionTokens), CachedTokens: i64(2), ReasoningTokens: i64(1)}
	}
	unknown := Record{UsageState: UsageUnknown}
	tests := []struct {
		name       string
		model      string
		stream     bool
		header     map[string]string
		wantStatus int
		want       Record // only the usage fields are compared
	}{
		{name: "json with usage", model: "json-usage", want: full(12)},
		{name: "json usage without details leaves cached and reasoning unknown", model: "json-usage-nodetails",
			want: Record{UsageState: UsageReported, PromptTokens: i64(12), CompletionTokens: i64(completionTokens), TotalTokens: i64(12 + completionTokens)}},
		{name: "json without usage is unknown", model: "json-nousage", want: unknown},
		{name: "json usage null is unknown", model: "json-usage-null", want: unknown},
		{name: "reported zeros stay zeros, suspect on a request with no known empty messages", model: "json-usage-zero",
			want: Record{UsageState: UsageSuspectZero, PromptTokens: i64(0), CompletionTokens: i64(0), TotalTokens: i64(0)}},
		{name: "gzip-encoded json usage", model: "gzip-usage", header: map[string]string{"Accept-Encoding": "gzip"}, want: full(12)},
		{name: "non-2xx is unknown even with a usage object", model: "error-500", wantStatus: http.StatusInternalServerError, want: unknown},
		{name: "stream with usage in the final empty-choices chunk", model: "sse-usage", stream: true, want: full(12)},
		{name: "stream without usage is unknown", model: "sse-nousage", stream: true, want: unknown},
		{name: "metadata-only chunks after usage do not erase it", model: "sse-usage-then-meta", stream: true, want: full(12)},
		{name: "the last usage of a stream wins", model: "sse-two-usages", stream: true,
			want: Record{UsageState: UsageReported, PromptTokens: i64(12), CompletionTokens: i64(completionTokens), TotalTokens: i64(12 + completionTokens)}},
		{name: "stream requested but answered with json", model: "json-usage", stream: true, want: full(12)},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := fmt.Sprintf("usage-%d", i)
			status, _ := post(t, g, session, chatBody(tc.model, tc.stream, content), tc.header)
			wantStatus := tc.wantStatus
			if wantStatus == 0 {
				wantStatus = http.StatusOK
			}
			if status != wantStatus {
				t.Fatalf("status %d, want %d", status, wantStatus)
			}
			recs := records(t, g, session)
			if len(recs) != 1 {
				t.Fatalf("got %d records", len(recs))
			}
			r := recs[0]
			got := Record{UsageState: r.UsageState, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
				TotalTokens: r.TotalTokens, CachedTokens: r.CachedTokens, ReasoningTokens: r.ReasoningTokens}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if r.Stream != tc.stream {
				t.Errorf("Stream = %v, want %v", r.Stream, tc.stream)
			}
			// The database itself holds NULL, not 0, for every unknown count.
			var nulls [5]bool
			err := openRO(t, dbPath).QueryRowContext(t.Context(), `SELECT prompt_tokens IS NULL, completion_tokens IS NULL,
				total_tokens IS NULL, cached_tokens IS NULL, reasoning_tokens IS NULL FROM requests WHERE id = ?`, r.ID).
				Scan(&nulls[0], &nulls[1], &nulls[2], &nulls[3], &nulls[4])
			if err != nil {
				t.Fatal(err)
			}
			wantNulls := [5]bool{tc.want.PromptTokens == nil, tc.want.CompletionTokens == nil, tc.want.TotalTokens == nil,
				tc.want.CachedTokens == nil, tc.want.ReasoningTokens == nil}
			if nulls != wantNulls {
				t.Errorf("IS NULL per column (prompt, completion, total, cached, reasoning) = %v, want %v", nulls, wantNulls)
			}
		})
	}
}

func getUsage(t *testing.T, g *Gateway, session string) (int, map[string]json.RawMessage) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.URL()+"/admin/usage/run/"+session, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("decode admin response: %v", err)
	}
	return resp.StatusCode, m
}

func TestAdminUsageEndpoint(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	send := func(session, model string, stream bool, content string) {
		t.Helper()
		if status, body := post(t, g, session, chatBody(model, stream, content), nil); status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
	}
	send("run9-a", "json-usage", false, "1234")             // 4 + 7
	send("run9-a", "sse-usage", true, "123456")             // 6 + 7
	send("run9-ab", "json-usage", false, "123456789012345") // must not be mixed into run9-a
	send("run9-b", "json-usage", false, "12")
	send("run9-b", "json-nousage", false, "12")
	send("run9-c", "sse-nousage", true, "1")
	send("run9-d", "json-usage-nodetails", false, "123")
	send("run9-d", "json-usage", false, "123")

	tests := []struct {
		session string
		want    string
	}{
		{"run9-a", `{"schema_version":1,"session_id":"run9-a","requests":2,"no_usage_requests":0,"state":"reported","prompt_tokens":10,"completion_tokens":14,"total_tokens":24,"cached_tokens":4,"reasoning_tokens":2}`},
		{"run9-ab", `{"schema_version":1,"session_id":"run9-ab","requests":1,"no_usage_requests":0,"state":"reported","prompt_tokens":15,"completion_tokens":7,"total_tokens":22,"cached_tokens":2,"reasoning_tokens":1}`},
		{"run9-b", `{"schema_version":1,"session_id":"run9-b","requests":2,"no_usage_requests":0,"state":"partial","prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null}`},
		{"run9-c", `{"schema_version":1,"session_id":"run9-c","requests":1,"no_usage_requests":0,"state":"unknown","prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null}`},
		{"run9-d", `{"schema_version":1,"session_id":"run9-d","requests":2,"no_usage_requests":0,"state":"reported","prompt_tokens":6,"completion_tokens":14,"total_tokens":20,"cached_tokens":null,"reasoning_tokens":null}`},
		{"run9-none", `{"schema_version":1,"session_id":"run9-none","requests":0,"no_usage_requests":0,"state":"unknown","prompt_tokens":null,"completion_tokens":null,"total_tokens":null,"cached_tokens":null,"reasoning_tokens":null}`},
	}
	for _, tc := range tests {
		t.Run(tc.session, func(t *testing.T) {
			status, got := getUsage(t, g, tc.session)
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, got)
			}
			var want map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.Transformer("str", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("usage JSON (-want +got):\n%s", diff)
			}
			u, err := g.Usage(t.Context(), tc.session)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(u)
			var viaGo map[string]json.RawMessage
			_ = json.Unmarshal(b, &viaGo)
			delete(want, "schema_version") // the endpoint's envelope, not SessionUsage's
			if diff := cmp.Diff(want, viaGo, cmp.Transformer("str", func(r json.RawMessage) string { return string(r) })); diff != "" {
				t.Errorf("Usage() (-want +got):\n%s", diff)
			}
		})
	}

	// A session id with a space and a slash, percent-encoded in the path.
	send("run9 x/y", "json-usage", false, "12")
	if status, m := getUsage(t, g, url.PathEscape("run9 x/y")); status != http.StatusOK ||
		string(m["session_id"]) != `"run9 x/y"` || string(m["prompt_tokens"]) != "2" {
		t.Errorf("usage of an escaped session id: %d %v", status, m)
	}

	recs, err := g.Records(t.Context(), "run9-a", true)
	if err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for _, r := range recs {
		sessions = append(sessions, r.SessionID)
	}
	if diff := cmp.Diff([]string{"run9-a", "run9-a", "run9-ab"}, sessions); diff != "" {
		t.Errorf("prefix records (-want +got):\n%s", diff)
	}

	for _, path := range []string{"/admin/", "/admin/usage", "/admin/usage/run/", "/admin/nope/run9-a"} {
		resp, err := rawClient().Get(g.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, resp.StatusCode)
		}
	}
	resp, err := rawClient().Post(g.URL()+"/admin/usage/run/run9-a", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST usage: status %d, want 405", resp.StatusCode)
	}
	for _, r := range up.requests() {
		if strings.HasPrefix(r.Path, "/admin") {
			t.Errorf("admin request %s leaked to the upstream", r.Path)
		}
	}
}

func TestConcurrentRequests(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	const sessions, perSession = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, sessions*perSession)
	for i := range sessions * perSession {
		wg.Go(func() {
			session := fmt.Sprintf("conc-%d", i%sessions)
			model, stream := "json-usage", false
			if i%2 == 1 {
				model, stream = "sse-usage", true
			}
			content := strings.Repeat("x", i+1) // prompt_tokens = i+1
			if err := postChat(t.Context(), g.URL(), session, chatBody(model, stream, content)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s := range sessions {
		session := fmt.Sprintf("conc-%d", s)
		var wantPrompt int64
		for i := s; i < sessions*perSession; i += sessions {
			wantPrompt += int64(i + 1)
		}
		u, err := g.Usage(t.Context(), session)
		if err != nil {
			t.Fatal(err)
		}
		want := SessionUsage{SessionID: session, Requests: perSession, State: UsageReported,
			PromptTokens: i64(wantPrompt), CompletionTokens: i64(perSession * completionTokens),
			TotalTokens: i64(wantPrompt + perSession*completionTokens), CachedTokens: i64(2 * perSession), ReasoningTokens: i64(perSession)}
		if diff := cmp.Diff(want, u); diff != "" {
			t.Errorf("session %s (-want +got):\n%s", session, diff)
		}
	}
	all, err := g.Records(t.Context(), "conc-", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != sessions*perSession {
		t.Errorf("prefix records = %d, want %d", len(all), sessions*perSession)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Errorf("records not ordered by ID: %d then %d", all[i-1].ID, all[i].ID)
		}
	}
}

// A client that asks the usage endpoint for its session as soon as its stream has ended sees the
// request, with its usage: the row is built after the handler returns, but the request stays in
// flight until it is written, and the endpoint waits for it. Many clients at once, so that rows
// are still being built or queued when the endpoint is asked.
func TestUsageSeenRightAfterResponseEnds(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	const clients, rounds = 40, 5
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds)
	for c := range clients {
		wg.Go(func() {
			for i := range rounds {
				session := fmt.Sprintf("seen-%d-%d", c, i)
				if err := postChat(t.Context(), g.URL(), session, chatBody("sse-usage", true, "12345")); err != nil {
					errs <- err
					return
				}
				uresp, err := rawClient().Get(g.URL() + "/admin/usage/run/" + session)
				if err != nil {
					errs <- err
					return
				}
				var u adminUsage
				err = json.NewDecoder(uresp.Body).Decode(&u)
				uresp.Body.Close()
				if err != nil || uresp.StatusCode != http.StatusOK || u.Requests != 1 || u.State != UsageReported ||
					u.PromptTokens == nil || *u.PromptTokens != 5 {
					errs <- fmt.Errorf("session %s right after its response: status %d, %+v (%v)", session, uresp.StatusCode, u, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A row whose building panics (after its handler returned, on a record worker) is not silently
// dropped: its request ends in flight as lost, so Records and Close report ErrRecordLost instead of
// waiting forever or returning an incomplete picture.
func TestRowThatCannotBeBuiltIsLost(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	seq := g.inflight.begin("run-panic")
	x := &exchange{id: g.store.reserveID(), started: time.Now(), session: "run-panic"}
	g.record(x, &relayed{method: http.MethodPost, path: "/v1/chat/completions", ended: time.Now()}, seq) // no relayWriter: panics
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := g.Records(ctx, "run-panic", false)
	var lost *RecordLostError
	if !errors.As(err, &lost) || lost.Lost != 1 || !errors.Is(err, ErrRecordLost) {
		t.Fatalf("Records after a row that could not be built: %v, want a RecordLostError", err)
	}
	if h := g.Health(); h.InFlight != 0 || h.LostRecords != 1 {
		t.Errorf("health: in flight %d, lost %d; want 0 and 1", h.InFlight, h.LostRecords)
	}
	if err := g.Close(); !errors.Is(err, ErrRecordLost) {
		t.Errorf("Close: %v, want ErrRecordLost", err)
	}
}

func TestStreamRelayedIncrementally(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const session = "run-stream-m1"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL()+"/v1/chat/completions",
		strings.NewReader(chatBody("slow-stream", true, "abc")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(DefaultSessionHeader, session)
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err) // headers must arrive while the upstream is still holding the stream open
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The upstream holds the rest of the stream until release is closed, so
	// this read only completes if the gateway relayed the first chunk alone.
	var first bytes.Buffer
	for !bytes.HasSuffix(first.Bytes(), []byte("\n\n")) {
		line, err := br.ReadBytes('\n')
		first.Write(line)
		if err != nil {
			t.Fatalf("reading first chunk: %v (got %q)", err, first.String())
		}
	}
	if !strings.Contains(first.String(), `"first"`) || strings.Contains(first.String(), `"second"`) {
		t.Fatalf("first chunk = %q", first.String())
	}

	// While the stream is in flight, Records for this session waits for it
	// (a cancelled context makes that visible), but another session does not.
	done, stop := context.WithCancel(t.Context())
	stop()
	if _, err := g.Records(done, session, false); !errors.Is(err, context.Canceled) {
		t.Errorf("Records during the stream: err = %v, want context.Canceled", err)
	}
	// The stream is held open until release, so waiting on it would end in
	// the deadline instead.
	idle, stopIdle := context.WithTimeout(t.Context(), 30*time.Second)
	defer stopIdle()
	if _, err := g.Records(idle, "run-stream-other", false); err != nil {
		t.Errorf("Records of an idle session: %v", err)
	}

	close(up.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	client := append(first.Bytes(), rest...)
	recs := records(t, g, session)
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	r := recs[0]
	if r.ResponseSHA256 != sha(client) || r.ResponseBytes != int64(len(client)) {
		t.Errorf("response hash/size %s/%d, want %s/%d", r.ResponseSHA256, r.ResponseBytes, sha(client), len(client))
	}
	if r.UsageState != UsageReported || r.PromptTokens == nil || *r.PromptTokens != 3 || !r.Stream {
		t.Errorf("record = %+v", r)
	}
}

func TestClientDisconnectMidStream(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	ctx, cancel := context.WithCancel(t.Context())
	const session = "run-disc-m1"
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.URL()+"/v1/chat/completions",
		strings.NewReader(chatBody("slow-stream", true, "abc")))
	req.Header.Set(DefaultSessionHeader, session)
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-up.firstSent
	cancel()
	resp.Body.Close()
	recs := records(t, g, session)
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	r := recs[0]
	if r.RelayError != RelayClientDisconnected || r.UsageState != UsageUnknown || r.PromptTokens != nil {
		t.Errorf("record = %+v, want relay error %q with unknown usage", r, RelayClientDisconnected)
	}
}

// deadUpstream returns the URL of a port nothing listens on.
func deadUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func TestUpstreamDown(t *testing.T) {
	g, dbPath := startGateway(t, deadUpstream(t))
	const session = "run-down-m1"
	body := chatBody("json-usage", false, "abc")
	status, got := post(t, g, session, body, nil)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", status)
	}
	recs := records(t, g, session)
	if len(recs) != 1 {
		t.Fatalf("got %d records", len(recs))
	}
	r := recs[0]
	if r.Status != http.StatusBadGateway || r.RelayError != RelayUpstreamUnreachable || r.UsageState != UsageUnknown ||
		r.PromptTokens != nil || r.TotalTokens != nil || r.Model != "json-usage" ||
		r.RequestSHA256 != sha([]byte(body)) || r.ResponseSHA256 != sha(got) {
		t.Errorf("record = %+v", r)
	}
	var nullTotal bool
	if err := openRO(t, dbPath).QueryRowContext(t.Context(), `SELECT total_tokens IS NULL FROM requests WHERE id = ?`, r.ID).Scan(&nullTotal); err != nil || !nullTotal {
		t.Errorf("total_tokens IS NULL = %v (err %v), want true", nullTotal, err)
	}
	if status, m := getUsage(t, g, session); status != http.StatusOK || string(m["state"]) != `"unknown"` || string(m["total_tokens"]) != "null" {
		t.Errorf("admin usage %d %v", status, m)
	}
}

func TestUpgradeRefused(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.URL()+"/v1/realtime", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set(DefaultSessionHeader, "run-up-m1")
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("status %d, want 501", resp.StatusCode)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
	recs := records(t, g, "run-up-m1")
	if len(recs) != 1 || recs[0].RelayError != RelayUpgradeRefused || recs[0].Status != http.StatusNotImplemented {
		t.Errorf("records = %+v", recs)
	}
}

func TestPathAndQueryForwardedUnchanged(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	resp, err := rawClient().Get(g.URL() + "/v1/models?limit=2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("fake-1")) {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	seen := up.requests()
	if len(seen) != 1 || seen[0].Path != "/v1/models" || seen[0].RawQuery != "limit=2" || seen[0].Method != http.MethodGet {
		t.Errorf("upstream saw %+v", seen)
	}
	recs := records(t, g, "")
	if len(recs) != 1 || recs[0].Path != "/v1/models" || recs[0].UsageState != UsageUnknown || recs[0].RequestBytes != 0 {
		t.Errorf("records = %+v", recs)
	}
}

func TestRecordLostIsReported(t *testing.T) {
	up := newFakeUpstream(t)
	g, dbPath := startGateway(t, up.srv.URL)
	// Make inserts for one session fail inside SQLite itself.
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), `CREATE TRIGGER reject_bad BEFORE INSERT ON requests
		WHEN NEW.session_id = 'run-lost-bad' BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	post(t, g, "run-lost-bad", chatBody("json-usage", false, "a"), nil)
	post(t, g, "run-lost-good", chatBody("json-usage", false, "a"), nil)

	_, err = g.Records(t.Context(), "run-lost-bad", false)
	var lost *RecordLostError
	if !errors.Is(err, ErrRecordLost) || !errors.As(err, &lost) || lost.SessionID != "run-lost-bad" || lost.Lost != 1 {
		t.Errorf("Records(bad): err = %v, want a RecordLostError for run-lost-bad", err)
	}
	if _, err := g.Records(t.Context(), "run-lost-", true); !errors.Is(err, ErrRecordLost) {
		t.Errorf("Records(prefix): err = %v, want ErrRecordLost", err)
	}
	if recs := records(t, g, "run-lost-good"); len(recs) != 1 {
		t.Errorf("good session: %d records", len(recs))
	}
	if status, m := getUsage(t, g, "run-lost-bad"); status != http.StatusInternalServerError || m["error"] == nil {
		t.Errorf("admin usage for a lost session: %d %v, want 500 with an error", status, m)
	}
	if err := g.Close(); !errors.Is(err, ErrRecordLost) {
		t.Errorf("Close: err = %v, want ErrRecordLost", err)
	}
}

func TestReopenAndSchemaVersion(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "gateway-usage.db")
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath, SessionHeader: "x-member-session"})
	if err != nil {
		t.Fatal(err)
	}
	post(t, g, "", chatBody("json-usage", false, "a"), map[string]string{"X-Member-Session": "s1"})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Records(t.Context(), "s1", false); !errors.Is(err, ErrClosed) {
		t.Errorf("Records after Close: %v, want ErrClosed", err)
	}

	g, err = Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath, SessionHeader: "X-Member-Session"})
	if err != nil {
		t.Fatal(err)
	}
	if g2, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath}); !errors.Is(err, ErrDatabaseInUse) {
		t.Errorf("second gateway on an open database: err = %v, want ErrDatabaseInUse", err)
		if g2 != nil {
			_ = g2.Close()
		}
	}
	post(t, g, "", chatBody("json-usage", false, "a"), map[string]string{"X-Member-Session": "s1"})
	recs := records(t, g, "s1")
	if len(recs) != 2 || recs[0].ID >= recs[1].ID {
		t.Errorf("records after reopen = %+v", recs)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite3", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), `UPDATE meta SET value = '999' WHERE key = 'schema_version'`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath}); !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("Start on version 999: err = %v, want ErrSchemaVersion", err)
	}
}

func TestConfigErrors(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "g.db")
	tests := []struct {
		name string
		cfg  Config
	}{
		{"empty upstream", Config{DBPath: dbPath}},
		{"relative upstream", Config{Upstream: "/v1", DBPath: dbPath}},
		{"non-http scheme", Config{Upstream: "ftp://127.0.0.1:21", DBPath: dbPath}},
		{"unparsable upstream", Config{Upstream: "http://[::1", DBPath: dbPath}},
		{"empty db path", Config{Upstream: "http://127.0.0.1:1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Start(t.Context(), tc.cfg)
			if !errors.Is(err, ErrConfig) {
				t.Errorf("err = %v, want ErrConfig", err)
			}
			if g != nil {
				_ = g.Close()
			}
		})
	}
}

func TestContextCancelStopsGateway(t *testing.T) {
	up := newFakeUpstream(t)
	ctx, cancel := context.WithCancel(t.Context())
	g, err := Start(ctx, Config{Upstream: up.srv.URL, DBPath: filepath.Join(t.TempDir(), "g.db")})
	if err != nil {
		t.Fatal(err)
	}
	post(t, g, "s", chatBody("json-usage", false, "a"), nil)
	cancel()
	select { // nothing but the cancelled context calls Close here
	case <-g.closing:
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not start closing after its context was cancelled")
	}
	_ = g.Close() // waits for the close the context started
	if _, err := g.Records(t.Context(), "s", false); !errors.Is(err, ErrClosed) {
		t.Errorf("Records after context cancel: %v, want ErrClosed", err)
	}
	if _, err := rawClient().Get(g.URL() + "/v1/models"); err == nil {
		t.Error("gateway still accepts requests after its context was cancelled")
	}
}

// startSlowStream sends a slow-stream request of session through g and
// returns once the upstream has sent the first chunk. The response body is
// drained by a goroutine; its error (if any) goes to the returned channel.
func startSlowStream(t *testing.T, g *Gateway, up *fakeUpstream, session string) <-chan error {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL()+"/v1/chat/completions",
		strings.NewReader(chatBody("slow-stream", true, "abcd")))
	req.Header.Set(DefaultSessionHeader, session)
	resp, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-up.firstSent
	done := make(chan error, 1)
	go func() {
		defer resp.Body.Close()
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	return done
}

func rowsOf(t *testing.T, dbPath, session string) []struct {
	State, RelayError string
	Prompt            sql.NullInt64
} {
	t.Helper()
	rows, err := openRO(t, dbPath).QueryContext(t.Context(),
		`SELECT usage_state, relay_error, prompt_tokens FROM requests WHERE session_id = ? ORDER BY id`, session)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []struct {
		State, RelayError string
		Prompt            sql.NullInt64
	}
	for rows.Next() {
		var r struct {
			State, RelayError string
			Prompt            sql.NullInt64
		}
		if err := rows.Scan(&r.State, &r.RelayError, &r.Prompt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestCloseLetsInFlightRequestsFinish(t *testing.T) {
	up := newFakeUpstream(t)
	g, dbPath := startGateway(t, up.srv.URL)
	streamDone := startSlowStream(t, g, up, "run-close-m1")
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	<-g.closing
	// Close has begun; new connections are refused, the stream goes on.
	close(up.release)
	if err := <-streamDone; err != nil {
		t.Errorf("in-flight stream broken by a graceful Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, dbPath, "run-close-m1")
	if len(rows) != 1 || rows[0].State != UsageReported || rows[0].RelayError != RelayOK || rows[0].Prompt.Int64 != 4 {
		t.Errorf("rows after Close = %+v, want one complete reported row", rows)
	}
}

func TestCloseCutsRequestsAfterGrace(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath, ShutdownGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	streamDone := startSlowStream(t, g, up, "run-cut-m1")
	// The upstream never releases the stream: Close must cut it, still record
	// it, and only then close the database.
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-streamDone; err == nil {
		t.Error("client read a complete stream, want it cut")
	}
	rows := rowsOf(t, dbPath, "run-cut-m1")
	if len(rows) != 1 || rows[0].State != UsageUnknown || rows[0].RelayError != RelayGatewayClosed || rows[0].Prompt.Valid {
		t.Errorf("rows after a forced Close = %+v, want one %q row with unknown usage", rows, RelayGatewayClosed)
	}
}

func TestRecordsInArrivalOrder(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	const session = "run-order-m1"
	// The first request is still streaming when the second one, sent later,
	// has already been answered and recorded.
	streamDone := startSlowStream(t, g, up, session)
	post(t, g, session, chatBody("json-usage", false, "b"), nil)
	close(up.release)
	if err := <-streamDone; err != nil {
		t.Fatal(err)
	}
	recs := records(t, g, session)
	if len(recs) != 2 || recs[0].Model != "slow-stream" || recs[1].Model != "json-usage" {
		t.Fatalf("records = %+v, want slow-stream then json-usage", recs)
	}
}

func TestAnsweredModelIsRecorded(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	for _, c := range []struct {
		model  string
		stream bool
		want   string
	}{
		{"json-usage", false, "json-usage"},
		{"answers-other", false, "other-model-2"},
		{"sse-answers-other", true, "other-model-3"}, // the first chunk names none; the first that does counts
		{"error-500", false, ""},                     // an error response names no answering model
	} {
		session := "am-" + c.model
		post(t, g, session, chatBody(c.model, c.stream, "x"), nil)
		recs := records(t, g, session)
		if len(recs) != 1 || recs[0].Model != c.model || recs[0].AnsweredModel != c.want {
			t.Errorf("%s: records %+v, want asked %q answered %q", c.model, recs, c.model, c.want)
		}
	}
}

// A gzip-encoded response: the relayed bytes are hashed as sent, and once decoded, which is what a
// client that decompresses (Go's transport does) stores.
func TestDecodedResponseDigest(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	status, got := post(t, g, "gz", chatBody("gzip-usage", false, "x"), map[string]string{"Accept-Encoding": "gzip"})
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	recs := records(t, g, "gz")
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	zr, err := gzip.NewReader(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("the relayed body is not gzip: %v", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].ResponseSHA256 != sha(got) || recs[0].ResponseDecodedSHA256 != sha(plain) || recs[0].ResponseDecodedSHA256 == recs[0].ResponseSHA256 {
		t.Fatalf("record %+v: want the relayed digest %s and the decoded %s", recs[0], sha(got), sha(plain))
	}
}

func TestRecordsInReadsEverySessionBetweenTwoMarks(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	post(t, g, "before", chatBody("json-usage", false, "a"), nil)
	from := g.Mark()
	post(t, g, "s-1", chatBody("json-usage", false, "a"), nil)
	post(t, g, "", chatBody("json-usage", false, "a"), nil)
	post(t, g, "stranger", chatBody("json-usage", false, "a"), nil)
	to := g.Mark()
	post(t, g, "after", chatBody("json-usage", false, "a"), nil)
	recs, err := g.RecordsIn(t.Context(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.SessionID)
	}
	if strings.Join(got, ",") != "s-1,,stranger" {
		t.Fatalf("RecordsIn = %q, want the three requests between the marks in arrival order", got)
	}
	if to-from != 3 {
		t.Fatalf("marks %d..%d", from, to)
	}
}

func TestVersion1DatabaseIsMigrated(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "gateway-usage.db")
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	post(t, g, "old", chatBody("json-usage", false, "a"), nil)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// Make it the version 1 layout: no answered_model column.
	db, err := sql.Open("sqlite3", "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`ALTER TABLE requests DROP COLUMN answered_model`, `ALTER TABLE requests DROP COLUMN response_decoded_sha256`, `ALTER TABLE requests DROP COLUMN echoed_session`,
		`UPDATE meta SET value = '1' WHERE key = 'schema_version'`} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	g, err = Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath})
	if err != nil {
		t.Fatalf("Start on a version 1 database: %v", err)
	}
	defer g.Close()
	post(t, g, "new", chatBody("json-usage", false, "a"), nil)
	if old := records(t, g, "old"); len(old) != 1 || old[0].AnsweredModel != "" {
		t.Errorf("a version 1 row: %+v (its answered model was never read: it must stay empty)", old)
	}
	if recs := records(t, g, "new"); len(recs) != 1 || recs[0].AnsweredModel != "json-usage" {
		t.Errorf("a row after the migration: %+v", recs)
	}
	ro := openRO(t, dbPath)
	var v string
	if err := ro.QueryRowContext(t.Context(), `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&v); err != nil || v != SchemaVersion {
		t.Errorf("schema_version %q %v, want %s", v, err, SchemaVersion)
	}
}

// A gateway started with Until is the database as it stood then: records, records between marks and
// the usage endpoint leave out what arrived later.
func TestUntilServesTheRecordsAsTheyStoodThen(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "gateway-usage.db")
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	post(t, g, "run-1-a", chatBody("json-usage", false, "a"), nil)
	then := records(t, g, "run-1-a")[0].StartedAt
	post(t, g, "run-1-a", chatBody("json-usage", false, "a"), nil)
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	g, err = Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath, Until: then})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if recs := records(t, g, "run-1-a"); len(recs) != 1 {
		t.Fatalf("records as of the first request: %d, want 1", len(recs))
	}
	if recs, err := g.RecordsIn(t.Context(), 0, 2); err != nil || len(recs) != 1 {
		t.Fatalf("RecordsIn as of the first request: %d %v", len(recs), err)
	}
	if u, err := g.Usage(t.Context(), "run-1-a"); err != nil || u.Requests != 1 {
		t.Fatalf("usage as of the first request: %+v %v", u, err)
	}
}

// postChat posts body to the gateway at base as a chat completion of session (DefaultSessionHeader)
// and reads the whole response.
func postChat(ctx context.Context, base, session, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(DefaultSessionHeader, session)
	resp, err := rawClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
