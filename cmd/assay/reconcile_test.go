package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/effectstest"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// The "done when", end to end through the commands: the matrix run with the HTTP 500 after a
// committed write is rejected with the effect unknown; `assay reconcile --lookup` resolves it from
// the effect service's receipt after the provider is gone.
func TestReconcileLookupResolvesTheHTTP500AfterCommitFault(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	out := t.TempDir()
	r := call(t, "", func(ctx context.Context, io IOStreams) error {
		return runMatrixRun(ctx, &MatrixRunOptions{IO: io, Format: "json", Harness: harness.Options{OutDir: out,
			Formations: []string{"sequential+remote"}, Language: caseLanguage(t), ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 1, Kind: reference.FaultHTTP500AfterCommit}}}})
	})
	if r.code != 1 {
		t.Fatalf("matrix run: exit %d, want 1 (rejected)\n%s", r.code, r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	cr := sum.Cases[0]
	if cr.Verdict.Verdict != "rejected" || !strings.Contains(strings.Join(cr.Verdict.Reasons, " "), "reconciliation required") {
		t.Fatalf("verdict %+v", cr.Verdict)
	}
	store := filepath.Join(out, "evidence.duckdb")
	puts := effectsOf(t, store, cr.RunID)[tool.RemotePutName]
	if len(puts) != 1 || puts[0].State != "unknown" || !puts[0].ReconciliationRequired {
		t.Fatalf("remote_put effects %+v, want one unknown", puts)
	}
	key := puts[0].IdempotencyKey

	// An operator may not guess both ways at once.
	if r := reconcile(t, store, ReconcileOptions{Run: cr.RunID, Call: key, Lookup: true, Outcome: "failed", Note: "x"}); r.code != 2 {
		t.Fatalf("--lookup with --outcome: exit %d", r.code)
	}
	r = reconcile(t, store, ReconcileOptions{Run: cr.RunID, Call: key, Lookup: true})
	if r.code != 0 || !strings.Contains(r.stdout, "unknown -> succeeded (receipt lookup, receipt ref-") {
		t.Fatalf("reconcile --lookup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e := effectsOf(t, store, cr.RunID)[tool.RemotePutName][0]
	if e.State != "succeeded" || e.Source != "reconciliation" || e.Receipt == nil || !e.Receipt.Committed ||
		!strings.HasPrefix(e.Receipt.Reference, "ref-") || e.ReconciliationRequired {
		t.Fatalf("after reconciliation %+v", e)
	}
	// Resolved once: a second lookup is refused, nothing recorded.
	if r := reconcile(t, store, ReconcileOptions{Run: cr.RunID, Call: key, Lookup: true}); r.code != 2 || !strings.Contains(r.stderr, "not unknown") {
		t.Fatalf("second reconcile: exit %d %s", r.code, r.stderr)
	}
	if r := verify(t, store, VerifyOptions{}); r.code != 0 {
		t.Fatalf("verify: exit %d %s", r.code, r.stderr)
	}
}

// A lookup that finds no effects database is bad input; one that finds no receipt, or a receipt for
// another payload, resolves nothing and records nothing: a failed check, exit 1, saying what to do.
func TestReconcileLookupRefusesWhatDoesNotResolve(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true) // call_2 is an unknown "deploy" effect
	lookup := func(db string) result {
		return reconcile(t, path, ReconcileOptions{Run: fixtureRun, Call: "call_2", Lookup: true, EffectsDB: db})
	}
	noEffects := lookup("")
	if noEffects.code != 2 {
		t.Fatalf("no effects database: exit %d", noEffects.code)
	}
	oneLine(t, noEffects, "--effects-db is not given and there is no effects database at "+filepath.Join(filepath.Dir(path), harness.EffectsDBName))
	if !strings.Contains(noEffects.stderr, "or decide with --outcome") {
		t.Errorf("the refusal does not name --outcome: %s", noEffects.stderr)
	}

	db := filepath.Join(t.TempDir(), "effects.db")
	run, err := reference.Start(t.Context(), reference.Config{EffectsDB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	r := lookup(db)
	if r.code != 1 || !strings.Contains(r.stderr, "no receipt") || !strings.Contains(r.stderr, "stays unknown") {
		t.Fatalf("no receipt: exit %d %s", r.code, r.stderr)
	}
	oneLine(t, r, "decide with --outcome succeeded|failed --note TEXT")
	// A receipt under the effect's key for another payload is evidence for another action.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, run.BaseURL()+"/effects/"+fixtureRun+":exec-1:call_2",
		strings.NewReader(`{"name":"n","value":"v"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	r = lookup(db)
	if r.code != 1 || !strings.Contains(r.stderr, "another payload") {
		t.Fatalf("another payload: exit %d %s", r.code, r.stderr)
	}
	if r := effects(t, path, EffectsOptions{State: "unknown", Runs: []string{fixtureRun}}); r.code != 0 || !strings.Contains(r.stdout, "call_2") {
		t.Fatalf("call_2 should still be unknown, nothing recorded: %s", r.stdout)
	}
}
