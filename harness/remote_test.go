package harness

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// remoteEffects returns the remote_put effects of a run as its stored evidence establishes them.
func remoteEffects(t *testing.T, store *evidence.Store, runID string) []tool.Effect {
	t.Helper()
	recs, err := ToolRecords(t.Context(), store, runID)
	if err != nil {
		t.Fatal(err)
	}
	effs, err := tool.Replay(recs, false)
	if err != nil {
		t.Fatal(err)
	}
	var out []tool.Effect
	for _, e := range effs {
		if e.Tool == tool.RemotePutName {
			out = append(out, e)
		}
	}
	return out
}

func openStoreReadOnly(t *testing.T, outDir string) *evidence.Store {
	t.Helper()
	store, err := evidence.Open(t.Context(), filepath.Join(outDir, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// remoteRun is sequential+remote on the reference provider, run once per test binary; unknownRun is
// the same case with exec-1's publish answered 500 after the effect service committed it. Each
// caller gets a copy of the output directory of its own.
func remoteRun(t *testing.T) (Summary, string) {
	return sharedRun(t, "remote", Options{Formations: []string{"sequential+remote"}, Language: caseLanguage(t)})
}

func unknownRun(t *testing.T) (Summary, string) {
	// exec-1's turn 0 writes its files, turn 1 publishes: that PUT commits and is answered 500.
	return sharedRun(t, "remote-unknown", Options{Formations: []string{"sequential+remote"}, Language: caseLanguage(t),
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 1, Kind: reference.FaultHTTP500AfterCommit}}})
}

func TestRemoteCaseIsAcceptedWithCommittedReceipts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	lang := caseLanguage(t)
	// Each member puts its task, language and deliverables: "double/go/double.go,double_test.go" in Go.
	wantValue := "double/" + lang + "/" + strings.Join(deliverables(t, lang), ",")
	sum, out := remoteRun(t)
	if len(sum.Cases) != 1 || !sum.Accepted() {
		t.Fatalf("cases %+v", sum.Cases)
	}
	cr := sum.Cases[0]
	if c := checkByName(cr)["effects"]; c.Status != statusPassed || !strings.Contains(c.Detail, "2 remote_put receipt(s) match") {
		t.Fatalf("effects check %+v", c)
	}
	store := openStoreReadOnly(t, out)
	effs := remoteEffects(t, store, cr.RunID)
	db, err := OpenEffectsBackend(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if len(effs) != 2 {
		t.Fatalf("%d remote_put effects, want one per member", len(effs))
	}
	for _, e := range effs {
		rc, found, err := db.Receipt(t.Context(), e.IdempotencyKey)
		if e.State != effect.Succeeded || err != nil || !found || rc.Puts != 1 || rc.PayloadSHA256 != e.PayloadSHA256 {
			t.Fatalf("effect %s %s; receipt %+v found %v err %v", e.IdempotencyKey, e.State, rc, found, err)
		}
		v, key, found, err := db.Value(t.Context(), "double/"+e.MemberID)
		if err != nil || !found || key != e.IdempotencyKey || v != wantValue {
			t.Fatalf("committed value %q by %q found %v err %v", v, key, found, err)
		}
	}
}

// The "done when": a matrix run with the reference provider's HTTP 500 after a committed
// write ends with that effect unknown, no second dispatch, the case rejected naming reconciliation,
// and the receipt lookup resolving it.
func TestHTTP500AfterCommitLeavesTheEffectUnknownUntilReconciled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sum, out := unknownRun(t)
	if len(sum.Cases) != 1 {
		t.Fatalf("cases %+v", sum.Cases)
	}
	cr := sum.Cases[0]
	if cr.Verdict.Verdict != "rejected" || !strings.Contains(strings.Join(cr.Verdict.Reasons, "; "), "reconciliation required") {
		t.Fatalf("verdict %+v, want rejected naming reconciliation", cr.Verdict)
	}
	if c := checkByName(cr)["effects"]; c.Status != statusFailed || !strings.Contains(c.Detail, "reconciliation required: 1 effect(s) unknown") {
		t.Fatalf("effects check %+v", c)
	}

	store := openStoreReadOnly(t, out)
	effs := remoteEffects(t, store, cr.RunID)
	if len(effs) != 1 {
		t.Fatalf("%d remote_put effects, want exec-1's only (the member stops at the unknown effect)", len(effs))
	}
	e := effs[0]
	if e.MemberID != "exec-1" || e.State != effect.Unknown || !e.ReconciliationRequired || !strings.Contains(e.Error, "status 500") {
		t.Fatalf("effect %+v, want exec-1's unknown with reconciliation required", e)
	}
	db, err := OpenEffectsBackend(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rc, found, err := db.Receipt(t.Context(), e.IdempotencyKey)
	if err != nil || !found || !rc.Committed || rc.Puts != 1 {
		t.Fatalf("receipt %+v found %v err %v: the backend must have committed exactly one PUT (no second dispatch)", rc, found, err)
	}

	// Reconciliation through the receipt lookup, on the database alone (the provider is gone), through
	// the one transition guard: unknown -> succeeded, with the backend's receipt.
	l := effect.NewLedger(db, nil)
	if err := l.Add(e.IdempotencyKey, effect.Unknown); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Reconcile(t.Context(), e.IdempotencyKey, nil)
	if err != nil || rec.State != effect.Succeeded || rec.Receipt == nil || rec.Receipt.Reference != rc.Reference {
		t.Fatalf("reconciled %+v err %v", rec, err)
	}
}

// The effects check must be able to fail when the backend contradicts the evidence: it reads the
// effect service's database, not what the runtime said.
func TestEffectsCheckFailsWhenTheBackendContradictsTheEvidence(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sum, out := remoteRun(t)
	if !sum.Accepted() {
		t.Fatalf("cases %+v", sum.Cases)
	}
	runID := sum.Cases[0].RunID
	store := openStoreReadOnly(t, out)
	key := remoteEffects(t, store, runID)[0].IdempotencyKey
	state := &caseState{runID: runID, store: store, caseDir: filepath.Join(out, "cases", runID)}

	raw, err := sql.Open("sqlite3", "file:"+EffectsDBPath(out))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, tc := range []struct{ name, sql, want string }{
		{"sent twice", `UPDATE effect_receipts SET puts = 2 WHERE idempotency_key = ?`, "received 2 PUTs"},
		{"another payload", `UPDATE effect_receipts SET payload_sha256 = 'x' WHERE idempotency_key = ?`, "another payload"},
		{"no receipt", `DELETE FROM effect_receipts WHERE idempotency_key = ?`, "has no receipt"},
	} {
		if _, err := raw.ExecContext(t.Context(), tc.sql, key); err != nil {
			t.Fatal(err)
		}
		status, detail, _ := effectsCheck.run(context.Background(), state)
		if status != statusFailed || !strings.Contains(detail, tc.want) {
			t.Fatalf("%s: %s %q, want failed naming %q", tc.name, status, detail, tc.want)
		}
	}
	// Without the database nothing is confirmed: unknown, never passed.
	state.caseDir = filepath.Join(t.TempDir(), "cases", runID)
	if status, detail, _ := effectsCheck.run(context.Background(), state); status != statusUnknown || !strings.Contains(detail, "cannot be checked") {
		t.Fatalf("without the database: %s %q", status, detail)
	}
}

// A durable case paused at the unknown effect is resumed by a new run: resume reconciles it through
// the effect service's receipt (the backend wired by caseBackendOptions), the paused member's call
// returns the reconciled outcome without a second PUT, and the resumed case is accepted.
func TestResumeReconcilesTheUnknownEffectThroughTheReceipt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sum, out := unknownRun(t)
	first := sum.Cases[0]
	if first.Verdict.Verdict != "rejected" {
		t.Fatalf("first run %+v", first.Verdict)
	}
	var progress strings.Builder
	res, err := Resume(context.Background(), Options{OutDir: out, Progress: &progress}, first.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict.Verdict != "accepted" || !strings.Contains(progress.String(), "reconciled through the receipt lookup: succeeded") {
		t.Fatalf("resumed %+v\n%s", res.Verdict, progress.String())
	}
	if c := checkByName(res)["effects"]; c.Status != statusPassed || !strings.Contains(c.Detail, "2 remote_put receipt(s) match") {
		t.Fatalf("effects check of the resumed run %+v", c)
	}
	store := openStoreReadOnly(t, out)
	db, err := OpenEffectsBackend(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, e := range remoteEffects(t, store, first.RunID) {
		if rc, found, err := db.Receipt(t.Context(), e.IdempotencyKey); err != nil || !found || rc.Puts != 1 {
			t.Fatalf("%s: receipt %+v found %v err %v: sent more than once across the resume", e.IdempotencyKey, rc, found, err)
		}
	}
}

func TestHTTP500AfterCommitFaultMustBeAbleToFire(t *testing.T) {
	for _, tc := range []struct {
		formations []string
		member     string
		ok         bool
	}{
		{[]string{"sequential+remote"}, "exec-1", true},
		{[]string{"sequential", "sequential+remote"}, "", true},
		{[]string{"sequential"}, "exec-1", false}, // exec-1 exists but never publishes
		{[]string{"parallel"}, "", false},
	} {
		o := Options{OutDir: t.TempDir(), Formations: tc.formations,
			ReferenceFaults: []reference.Fault{{Member: tc.member, Turn: 1, Kind: reference.FaultHTTP500AfterCommit}}}
		err := o.Normalize()
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "publishes with remote_put in no selected case")) {
			t.Fatalf("%v member %q: %v", tc.formations, tc.member, err)
		}
	}
}
