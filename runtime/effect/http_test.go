package effect_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestHTTPBackendLooksUpTheEffectServicesReceipts(t *testing.T) {
	run, err := reference.Start(t.Context(), reference.Config{EffectsDB: filepath.Join(t.TempDir(), "effects.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Close() })
	b := effect.NewHTTPBackend(run.BaseURL(), nil)
	key := "run-1:a:r1-call_1"
	if _, found, err := b.Lookup(t.Context(), effect.Query{IdempotencyKey: key}); found || err != nil {
		t.Fatalf("before the PUT: found %v err %v", found, err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, run.BaseURL()+"/effects/"+key, strings.NewReader(`{"name":"n","value":"v"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	rc, found, err := b.Lookup(t.Context(), effect.Query{IdempotencyKey: key})
	if err != nil || !found || !rc.Committed || rc.IdempotencyKey != key || !strings.HasPrefix(rc.Reference, "ref-") || rc.Time.IsZero() {
		t.Fatalf("lookup %+v found %v err %v", rc, found, err)
	}

	// Through the ledger: an unknown effect becomes succeeded from the receipt.
	l := effect.NewLedger(b, nil)
	if err := l.Add(key, effect.Unknown); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Reconcile(t.Context(), key, nil)
	if err != nil || rec.State != effect.Succeeded || rec.Receipt == nil || rec.Receipt.Reference != rc.Reference || rec.Lookups != 1 {
		t.Fatalf("reconciled %+v err %v", rec, err)
	}
}

func TestHTTPBackendRefusesAnswersThatAreNotReceipts(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /nocommitted/effects/{key}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"reference":"x"}`) })
	mux.HandleFunc("GET /garbage/effects/{key}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `<html>`) })
	mux.HandleFunc("GET /broken/effects/{key}", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "db down", http.StatusInternalServerError) })
	mux.HandleFunc("GET /other/effects/{key}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"idempotency_key":"run-9:x:y","committed":true}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// Answers that are not receipts are errors, never "not committed".
	for _, path := range []string{"/nocommitted", "/garbage", "/broken"} {
		_, found, err := effect.NewHTTPBackend(srv.URL+path, nil).Lookup(t.Context(), effect.Query{IdempotencyKey: "k"})
		if err == nil || found {
			t.Fatalf("%s: found %v err %v", path, found, err)
		}
		if path != "/broken" && !errors.Is(err, effect.ErrMalformedReceipt) {
			t.Fatalf("%s: %v, want ErrMalformedReceipt", path, err)
		}
	}
	// A receipt for another effect is not applied to this one.
	l := effect.NewLedger(effect.NewHTTPBackend(srv.URL+"/other", nil), nil)
	if err := l.Add("run-1:a:c", effect.Unknown); err != nil {
		t.Fatal(err)
	}
	if rec, err := l.Reconcile(t.Context(), "run-1:a:c", nil); !errors.Is(err, effect.ErrUnrelatedReceipt) || rec.State != effect.Unknown {
		t.Fatalf("unrelated receipt: %+v %v", rec, err)
	}
}
