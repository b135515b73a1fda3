package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// effectsOf runs `assay effects --format json` on one run and returns its effects by tool.
func effectsOf(t *testing.T, out, runID string) map[string][]tool.Effect {
	t.Helper()
	r := runCLI(t, "effects", "--out", out, "--format", "json", runID)
	if r.code != 0 {
		t.Fatalf("effects: exit %d %s", r.code, r.stderr)
	}
	var effs []tool.Effect
	if err := json.Unmarshal([]byte(r.stdout), &effs); err != nil {
		t.Fatal(err)
	}
	byTool := map[string][]tool.Effect{}
	for _, e := range effs {
		byTool[e.Tool] = append(byTool[e.Tool], e)
	}
	return byTool
}

// The "done when", end to end through the commands: the matrix run with the HTTP 500 after a
// committed write is rejected with the effect unknown; `assay reconcile --lookup` resolves it from
// the effect service's receipt after the provider is gone.
func TestReconcileLookupResolvesTheHTTP500AfterCommitFault(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "sequential+remote",
		"--reference-fault", "exec-1:1:http_500_after_commit", "--format", "json")
	if r.code != 1 {
		t.Fatalf("matrix run: exit %d, want 1 (rejected)\n%s", r.code, r.stderr)
	}
	var sum harness.Summary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	cr := sum.Cases[0]
	if cr.Verdict.Verdict != "rejected" || !strings.Contains(strings.Join(cr.Verdict.Reasons, " "), "reconciliation required") {
		t.Fatalf("verdict %+v", cr.Verdict)
	}
	puts := effectsOf(t, out, cr.RunID)[tool.RemotePutName]
	if len(puts) != 1 || puts[0].State != "unknown" || !puts[0].ReconciliationRequired {
		t.Fatalf("remote_put effects %+v, want one unknown", puts)
	}
	key := puts[0].IdempotencyKey

	// An operator may not guess both ways at once.
	if r := runCLI(t, "reconcile", "--out", out, cr.RunID, key, "--lookup", "--outcome", "failed", "--note", "x"); r.code != 2 {
		t.Fatalf("--lookup with --outcome: exit %d", r.code)
	}
	r = runCLI(t, "reconcile", "--out", out, cr.RunID, key, "--lookup")
	if r.code != 0 || !strings.Contains(r.stdout, "unknown -> succeeded (receipt lookup, receipt ref-") {
		t.Fatalf("reconcile --lookup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e := effectsOf(t, out, cr.RunID)[tool.RemotePutName][0]
	if e.State != "succeeded" || e.Source != "reconciliation" || e.Receipt == nil || !e.Receipt.Committed ||
		!strings.HasPrefix(e.Receipt.Reference, "ref-") || e.ReconciliationRequired {
		t.Fatalf("after reconciliation %+v", e)
	}
	// Resolved once: a second lookup is refused, nothing recorded.
	if r := runCLI(t, "reconcile", "--out", out, cr.RunID, key, "--lookup"); r.code != 2 || !strings.Contains(r.stderr, "not unknown") {
		t.Fatalf("second reconcile: exit %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "verify", "--out", out); r.code != 0 {
		t.Fatalf("verify: exit %d %s", r.code, r.stderr)
	}
}

func TestReconcileLookupRefusesWhatDoesNotResolve(t *testing.T) {
	path, runID := effectsFixture(t) // call_2 is an unknown "deploy" effect
	noEffects := runCLI(t, "reconcile", "--store", path, runID, "call_2", "--lookup")
	if noEffects.code != 2 {
		t.Fatalf("no effects database: exit %d", noEffects.code)
	}
	oneLine(t, noEffects, "no effects database at "+filepath.Join(filepath.Dir(path), harness.EffectsDBName))
	if r := runCLI(t, "reconcile", "--store", path, runID, "call_2"); r.code != 2 || !strings.Contains(r.stderr, "--lookup") {
		t.Fatalf("neither --lookup nor --outcome: exit %d %s", r.code, r.stderr)
	}

	db := filepath.Join(t.TempDir(), "effects.db")
	run, err := reference.Start(t.Context(), reference.Config{EffectsDB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	r := runCLI(t, "reconcile", "--store", path, runID, "call_2", "--lookup", "--effects-db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "no receipt") || !strings.Contains(r.stderr, "stays unknown") {
		t.Fatalf("no receipt: exit %d %s", r.code, r.stderr)
	}
	// A receipt under the effect's key for another payload is evidence for another action.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, run.BaseURL()+"/effects/"+runID+":exec-1:call_2",
		strings.NewReader(`{"name":"n","value":"v"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	r = runCLI(t, "reconcile", "--store", path, runID, "call_2", "--lookup", "--effects-db", db)
	if r.code != 1 || !strings.Contains(r.stderr, "another payload") {
		t.Fatalf("another payload: exit %d %s", r.code, r.stderr)
	}
	r = runCLI(t, "effects", "--store", path, "--state", "unknown", runID)
	if r.code != 0 || !strings.Contains(r.stdout, "call_2") {
		t.Fatalf("call_2 should still be unknown, nothing recorded: %s", r.stdout)
	}
}
