package gateway

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A stream the upstream cut, cleanly or mid-body, after a usage chunk is broken: its usage is
// unknown, never the partial figure it carried.
func TestCutStreamIsBrokenNotReported(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	tests := []struct {
		model, wantRelay string
	}{
		{"sse-usage", RelayOK}, // the control: the same stream with its [DONE] is reported
		{"sse-cut-clean", RelayStreamUnterminated},
		{"sse-cut-abort", RelayResponseAborted},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			session := "cut-" + tc.model
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, g.URL()+"/v1/chat/completions", strings.NewReader(chatBody(tc.model, true, "abc")))
			req.Header.Set(DefaultSessionHeader, session)
			if resp, err := rawClient().Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body) // a cut body may fail here: that is the point
				resp.Body.Close()
			}
			recs := records(t, g, session)
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			r := recs[0]
			if r.RelayError != tc.wantRelay {
				t.Errorf("relay error %q, want %q", r.RelayError, tc.wantRelay)
			}
			wantState := UsageUnknown
			if tc.wantRelay == RelayOK {
				wantState = UsageReported
			}
			if r.UsageState != wantState || (wantState == UsageUnknown && r.TotalTokens != nil) {
				t.Errorf("usage %s total %v, want %s", r.UsageState, r.TotalTokens, wantState)
			}
		})
	}
}

// A zero prompt count on a request with messages is suspect: kept as reported, not summed.
func TestZeroPromptIsSuspect(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	post(t, g, "z", chatBody("json-usage-zero-prompt", false, "abc"), nil)
	post(t, g, "e", `{"model":"json-usage-zero-prompt","messages":[]}`, nil)
	z := records(t, g, "z")
	if len(z) != 1 || z[0].UsageState != UsageSuspectZero || z[0].PromptTokens == nil || *z[0].PromptTokens != 0 || *z[0].TotalTokens != 3 {
		t.Fatalf("zero prompt with a message: %+v", z)
	}
	if u := SumUsage("z", z); u.State == UsageReported || u.TotalTokens != nil {
		t.Errorf("a suspect record summed: %+v", u)
	}
	if e := records(t, g, "e"); len(e) != 1 || e[0].UsageState != UsageReported {
		t.Errorf("zero prompt with no messages: %+v, want reported", e)
	}
}

// Several session headers: either carries the id; two that disagree attribute the request to no
// session rather than pick one.
func TestSessionHeaders(t *testing.T) {
	up := newFakeUpstream(t)
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: filepath.Join(t.TempDir(), "gw.db"),
		SessionHeaders: []string{"X-Session-Id", "x-inferflux-session-id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	post(t, g, "", chatBody("json-usage", false, "a"), map[string]string{"X-Inferflux-Session-Id": "infer-1"})
	post(t, g, "both-1", chatBody("json-usage", false, "a"), map[string]string{"X-Inferflux-Session-Id": "both-1"})
	post(t, g, "left", chatBody("json-usage", false, "a"), map[string]string{"X-Inferflux-Session-Id": "right"})
	if n := len(records(t, g, "infer-1")); n != 1 {
		t.Errorf("second header: %d records, want 1", n)
	}
	if n := len(records(t, g, "both-1")); n != 1 {
		t.Errorf("agreeing headers: %d records, want 1", n)
	}
	for _, s := range []string{"left", "right"} {
		if n := len(records(t, g, s)); n != 0 {
			t.Errorf("disagreeing headers attributed to %q", s)
		}
	}
	if n := len(records(t, g, "")); n != 1 {
		t.Errorf("disagreeing headers: %d unattributed records, want 1", n)
	}
	for _, bad := range []string{"Authorization", "api-key", "X-Api-Key", "bad header"} {
		_, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: filepath.Join(t.TempDir(), "x.db"), SessionHeaders: []string{bad}})
		if !errors.Is(err, ErrConfig) {
			t.Errorf("session header %q: err %v, want ErrConfig", bad, err)
		}
	}
}

func TestHealthEndpoint(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, "http://user:secret@"+strings.TrimPrefix(up.srv.URL, "http://")+"/v1?key=k")
	post(t, g, "h", chatBody("json-usage", false, "a"), nil)
	resp, err := http.Get(g.URL() + "/admin/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "secret") || strings.Contains(string(body), "key=") {
		t.Fatalf("health %d %s", resp.StatusCode, body)
	}
	var h Health
	if err := json.Unmarshal(body, &h); err != nil || h.Status != "ok" || h.LastRecordID != 1 || h.SchemaVersion != 1 || !strings.HasPrefix(string(body), `{"schema_version":1,`) {
		t.Errorf("health %s (%v)", body, err)
	}
}

func TestReadDatabase(t *testing.T) {
	up := newFakeUpstream(t)
	g, dbPath := startGateway(t, up.srv.URL)
	post(t, g, "r1", chatBody("json-usage", false, "abc"), nil)
	post(t, g, "", chatBody("json-usage", false, "abc"), nil)
	if _, err := g.RecordsIn(t.Context(), 0, g.Mark()); err != nil { // waits for every row
		t.Fatal(err)
	}
	recs, err := ReadDatabase(t.Context(), dbPath) // while the gateway holds it
	if err != nil || len(recs) != 2 || recs[0].SessionID != "r1" || recs[1].SessionID != "" {
		t.Fatalf("ReadDatabase: %+v %v", recs, err)
	}
	dir := t.TempDir()
	if _, err := ReadDatabase(t.Context(), filepath.Join(dir, "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	text := filepath.Join(dir, "text.db")
	os.WriteFile(text, []byte("not sqlite at all, long enough to be read as a header........................................................"), 0o644)
	other := filepath.Join(dir, "other.db")
	db, _ := sql.Open("sqlite3", "file:"+other)
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, p := range []string{text, other, dir} {
		if _, err := ReadDatabase(t.Context(), p); !errors.Is(err, ErrNotGatewayDB) {
			t.Errorf("%s: %v, want ErrNotGatewayDB", filepath.Base(p), err)
		}
	}
}

// A version 2 database (whose CHECK constraint refuses 'suspect_zero') is rebuilt, rows and ids kept.
func TestVersion2DatabaseIsMigrated(t *testing.T) {
	up := newFakeUpstream(t)
	dbPath := filepath.Join(t.TempDir(), "gateway-usage.db")
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.Replace(schemaSQL, `'reported', 'unknown', 'suspect_zero'`, `'reported', 'unknown'`, 1)
	for _, stmt := range []string{v2, `INSERT INTO meta VALUES ('schema_version', '2')`,
		`INSERT INTO requests (id, session_id, method, path, model, stream, status, latency_ms, request_sha256, response_sha256,
			request_bytes, response_bytes, usage_state, total_tokens, relay_error, started_at)
			VALUES (7, 'old', 'POST', '/v1/chat/completions', 'm', 0, 200, 1.5, 'a', 'b', 1, 2, 'reported', 9, '', '2026-01-01T00:00:00.000000000Z')`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO requests (id, session_id, method, path, model, stream, status, latency_ms, request_sha256, response_sha256,
			request_bytes, response_bytes, usage_state, relay_error, started_at) VALUES (8, 'x', 'POST', '/', 'm', 0, 200, 1, 'a', 'b', 1, 2, 'suspect_zero', '', '2026-01-01T00:00:00.000000000Z')`); err == nil {
		t.Fatal("the version 2 layout accepted suspect_zero: the test does not build a version 2 database")
	}
	db.Close()
	// Readers read a version 2 database as it is (a store's bindings to it still verify).
	if recs, err := ReadDatabase(t.Context(), dbPath); err != nil || len(recs) != 1 {
		t.Fatalf("ReadDatabase of version 2: %d %v", len(recs), err)
	}
	if recs, err := ReadRecords(t.Context(), dbPath, 0, 7, "old"); err != nil || len(recs) != 1 {
		t.Fatalf("ReadRecords of version 2: %d %v", len(recs), err)
	}
	g, err := Start(t.Context(), Config{Upstream: up.srv.URL, DBPath: dbPath})
	if err != nil {
		t.Fatalf("Start on a version 2 database: %v", err)
	}
	defer g.Close()
	post(t, g, "new", chatBody("json-usage-zero-prompt", false, "a"), nil)
	if old := records(t, g, "old"); len(old) != 1 || old[0].ID != 7 || *old[0].TotalTokens != 9 {
		t.Errorf("the version 2 row: %+v", old)
	}
	if recs := records(t, g, "new"); len(recs) != 1 || recs[0].ID != 8 || recs[0].UsageState != UsageSuspectZero {
		t.Errorf("a row after the migration: %+v", recs)
	}
}
