package tool

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// startEffects starts the reference provider's effect service on a SQLite file.
func startEffects(t *testing.T) (*reference.Running, string) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "effects.db")
	run, err := reference.Start(t.Context(), reference.Config{EffectsDB: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Close() })
	return run, db
}

// lossyProxy forwards every request to the effect service, but answers a PUT with HTTP 500 after
// the service has answered it: the backend committed and the response was lost on the way back.
// It counts the PUTs it forwarded.
func lossyProxy(t *testing.T, upstream string, puts *atomic.Int32) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPut {
			return nil
		}
		puts.Add(1)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
		resp.Body = io.NopCloser(strings.NewReader(`{"error":{"message":"upstream response lost"}}`))
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

func remoteCall(id, args string) Call {
	return Call{RunID: "run-1", MemberID: "exec-1", SessionID: "run-1-exec-1", CallID: id, Tool: RemotePutName,
		Arguments: args, Allowed: []string{RemotePutName}}
}

func TestRemotePutCommitsThroughTheBoundary(t *testing.T) {
	run, db := startEffects(t)
	j := &memJournal{}
	b := NewBoundary(map[string]Tool{RemotePutName: RemotePut(run.BaseURL(), nil)}, j)
	c := remoteCall("call_1", `{"name":"double/exec-1","value":"v"}`)
	c.Root = t.TempDir()
	out, err := b.Invoke(t.Context(), c)
	if err != nil || out.State != StateSucceeded || !strings.Contains(out.Result, `"committed":true`) ||
		!strings.Contains(out.Result, `"idempotency_key":"run-1:exec-1:call_1"`) {
		t.Fatalf("outcome %+v err %v", out, err)
	}
	if j.intents[0].Access != Network {
		t.Fatalf("intent access %s, want network", j.intents[0].Access)
	}
	r, err := reference.OpenEffectsReader(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rc, found, err := r.Receipt(t.Context(), c.Key())
	if err != nil || !found || rc.Puts != 1 || rc.Name != "double/exec-1" {
		t.Fatalf("receipt %+v found %v err %v", rc, found, err)
	}
	if v, _, _, _ := r.Value(t.Context(), "double/exec-1"); v != "v" {
		t.Fatalf("committed value %q", v)
	}
	// A re-delivery of the same call returns the outcome; nothing is sent again.
	again, err := b.Invoke(t.Context(), c)
	if err != nil || again.State != StateSucceeded {
		t.Fatalf("re-delivery %+v %v", again, err)
	}
	if rc, _, _ := r.Receipt(t.Context(), c.Key()); rc.Puts != 1 {
		t.Fatalf("re-delivery sent a second PUT (%d)", rc.Puts)
	}
}

// The case: the backend commits and the response is lost. The effect is unknown, the tool
// is not retried (even with readonly retries configured), and the receipt lookup resolves it.
func TestRemotePutLostResponseIsUnknownThenReconciled(t *testing.T) {
	run, _ := startEffects(t)
	var puts atomic.Int32
	proxy := lossyProxy(t, run.BaseURL(), &puts)
	b := NewBoundary(map[string]Tool{RemotePutName: RemotePut(proxy, nil)}, &memJournal{},
		WithReadonlyRetries(3), WithBackend(effect.NewHTTPBackend(run.BaseURL(), nil)))
	c := remoteCall("call_1", `{"name":"n","value":"v"}`)
	c.Root = t.TempDir()
	out, err := b.Invoke(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out.State != StateUnknown || !out.ReconciliationRequired || out.Retryable || out.Attempts != 1 {
		t.Fatalf("outcome %+v, want unknown, reconciliation required, not retryable, one attempt", out)
	}
	if n := puts.Load(); n != 1 {
		t.Fatalf("the service saw %d PUTs, want exactly 1 (no second dispatch)", n)
	}
	rec, err := b.Reconcile(t.Context(), c.Key())
	if err != nil || rec.State != StateSucceeded || rec.Receipt == nil || !rec.Receipt.Committed || rec.Source != "reconciliation" {
		t.Fatalf("reconciled %+v err %v", rec, err)
	}
	if n := puts.Load(); n != 1 {
		t.Fatalf("reconciliation sent a PUT (%d)", n)
	}
}

func TestRemotePutClassifiesAnswers(t *testing.T) {
	var puts atomic.Int32
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /refuse/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		http.Error(w, `{"error":{"message":"no such name"}}`, http.StatusUnprocessableEntity)
	})
	mux.HandleFunc("PUT /noreceipt/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	mux.HandleFunc("PUT /otherkey/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		_, _ = io.WriteString(w, `{"idempotency_key":"run-9:x:y","committed":true}`)
	})
	mux.HandleFunc("PUT /hangup/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the connection is lost after the request arrived
		}
	})
	mux.HandleFunc("PUT /slow/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		puts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close: the slow handler returns
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	for _, tc := range []struct {
		name, base string
		client     *http.Client
		state      string
		sent       int32
		want       string
	}{
		{"4xx is a failure", srv.URL + "/refuse", nil, StateFailed, 1, "refused it with status 422"},
		{"2xx without a receipt is indeterminate", srv.URL + "/noreceipt", nil, StateUnknown, 1, "without a committed receipt"},
		{"2xx with another key's receipt is indeterminate", srv.URL + "/otherkey", nil, StateUnknown, 1, "without a committed receipt"},
		{"a connection lost after sending is indeterminate", srv.URL + "/hangup", nil, StateUnknown, 1, "may have reached the service"},
		{"a timeout after sending is indeterminate", srv.URL + "/slow", &http.Client{Timeout: 200 * time.Millisecond}, StateUnknown, 1, "may have reached the service"},
		{"a service that is down fails: nothing was sent", downURL, nil, StateFailed, 0, "nothing was sent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := puts.Load()
			b := NewBoundary(map[string]Tool{RemotePutName: RemotePut(tc.base, tc.client)}, &memJournal{}, WithReadonlyRetries(3))
			c := remoteCall("call_"+strings.ReplaceAll(tc.name, " ", "_"), `{"name":"n","value":"v"}`)
			c.Root = t.TempDir()
			out, err := b.Invoke(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if out.State != tc.state || !strings.Contains(out.Error, tc.want) || out.Retryable || out.Attempts != 1 {
				t.Fatalf("outcome %+v, want %s naming %q, one attempt, not retryable", out, tc.state, tc.want)
			}
			if out.ReconciliationRequired != (tc.state == StateUnknown) {
				t.Fatalf("reconciliation_required %v for %s", out.ReconciliationRequired, tc.state)
			}
			if got := puts.Load() - before; got != tc.sent {
				t.Fatalf("%d PUTs reached the service, want %d", got, tc.sent)
			}
		})
	}
}

func TestRemotePutRefusesBeforeSending(t *testing.T) {
	var puts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { puts.Add(1) }))
	t.Cleanup(srv.Close)
	rp := RemotePut(srv.URL, nil)
	b := NewBoundary(map[string]Tool{RemotePutName: rp}, &memJournal{})
	for i, args := range []string{`{"name":"n"}`, `{"name":"","value":"v"}`, `{"name":"n","value":"v","path":"x"}`, `{"name":"n","value":7}`} {
		c := remoteCall("call_bad"+string(rune('a'+i)), args)
		c.Root = t.TempDir()
		out, err := b.Invoke(t.Context(), c)
		if err != nil || out.State != StateFailed || !strings.Contains(out.Error, "refused before dispatch") {
			t.Fatalf("%s: %+v %v", args, out, err)
		}
	}
	// Outside the boundary there is no idempotency key: nothing is sent.
	if _, err := rp.Run(context.Background(), nil, []byte(`{"name":"n","value":"v"}`)); err == nil || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("Run outside the boundary: %v", err)
	}
	if puts.Load() != 0 {
		t.Fatalf("%d PUTs sent for refused calls", puts.Load())
	}
	if rp.Access != Network {
		t.Fatalf("access %s", rp.Access)
	}
	tools := Builtins()
	tools[RemotePutName] = rp
	for _, n := range DefaultAllowedTools(tools, "executor", "") {
		if n == RemotePutName {
			t.Fatal("remote_put is granted by default; network tools must be named")
		}
	}
	if err := CheckSchemas(map[string]Tool{RemotePutName: rp}); err != nil {
		t.Fatal(err)
	}
}
