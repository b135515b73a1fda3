package harness

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/effectstest"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

const fixtureRun = effectstest.RunID

// statesOf returns call id -> state of the effects Effects lists for q.
func statesOf(t *testing.T, q EffectsQuery) map[string]string {
	t.Helper()
	effs, err := Effects(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range effs {
		states[e.CallID] = string(e.State)
	}
	return states
}

func TestEffectsEstablishesEachStateFromTheEvidence(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true)
	want := map[string]string{"call_1": "succeeded", "call_2": "unknown", "call_3": "awaiting_approval", "call_4": "failed"}
	for _, q := range []EffectsQuery{{StorePath: path}, {StorePath: path, Runs: []string{fixtureRun}}} {
		if got := statesOf(t, q); len(got) != len(want) || got["call_1"] != want["call_1"] || got["call_2"] != want["call_2"] ||
			got["call_3"] != want["call_3"] || got["call_4"] != want["call_4"] {
			t.Fatalf("%+v: states %v, want %v", q, got, want)
		}
	}
	effs, err := Effects(context.Background(), EffectsQuery{StorePath: path, State: "unknown"})
	if err != nil || len(effs) != 1 || effs[0].CallID != "call_2" || !effs[0].ReconciliationRequired {
		t.Fatalf("State unknown: %+v %v, want call_2 needing reconciliation", effs, err)
	}
	if effs, err := Effects(context.Background(), EffectsQuery{StorePath: path, State: "cancelled"}); err != nil || effs != nil {
		t.Fatalf("State cancelled: %+v %v, want nothing", effs, err)
	}
}

func TestEffectsRefusals(t *testing.T) {
	path := effectstest.Store(t, true)
	var oe *OptionError
	if _, err := Effects(context.Background(), EffectsQuery{StorePath: path, State: "lost"}); !errors.As(err, &oe) || oe.Field != "State" ||
		!strings.Contains(err.Error(), "awaiting_approval, pending, running") {
		t.Fatalf("State lost: %v, want an *OptionError for State naming the states", err)
	}
	if _, err := Effects(context.Background(), EffectsQuery{StorePath: path, Runs: []string{"run-nope"}}); !errors.Is(err, evidence.ErrNoRun) {
		t.Fatalf("an unknown run: %v, want evidence.ErrNoRun", err)
	}
	if _, err := Effects(context.Background(), EffectsQuery{StorePath: filepath.Join(t.TempDir(), "none.duckdb")}); !errors.Is(err, evidence.ErrNoStore) {
		t.Fatalf("no store: %v, want evidence.ErrNoStore", err)
	}
}

// An operator's decision is recorded in a correction run; the effect is then what the decision
// says, the original run is untouched and verifies, and a second decision is refused.
func TestReconcileRecordsAnOperatorDecisionInACorrectionRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := effectstest.Store(t, true)
	decide := func(call, outcome, operator string) (Reconciliation, error) {
		return Reconcile(ctx, ReconcileRequest{StorePath: path, RunID: fixtureRun, Call: call, Outcome: outcome,
			Note: "backend audit log has the deploy, receipt tx-4411", Operator: operator})
	}
	for _, c := range []struct {
		name string
		req  ReconcileRequest
		want error
	}{
		{"an outcome that is not one", ReconcileRequest{Call: "call_2", Outcome: "maybe", Note: "x", Operator: "alice"}, ErrBadOptions},
		{"no note", ReconcileRequest{Call: "call_2", Outcome: "succeeded", Operator: "alice"}, ErrBadOptions},
		{"no operator", ReconcileRequest{Call: "call_2", Outcome: "succeeded", Note: "x"}, ErrBadOptions},
		{"neither lookup nor outcome", ReconcileRequest{Call: "call_2"}, ErrBadOptions},
		{"both lookup and outcome", ReconcileRequest{Call: "call_2", Lookup: true, Outcome: "failed", Note: "x", Operator: "alice"}, ErrBadOptions},
		{"an effect that is not unknown", ReconcileRequest{Call: "call_1", Outcome: "failed", Note: "x", Operator: "alice"}, ErrEffectState},
		{"no such call", ReconcileRequest{Call: "call_9", Outcome: "failed", Note: "x", Operator: "alice"}, ErrNoCall},
		{"no such run", ReconcileRequest{RunID: "run-other", Call: "call_2", Outcome: "failed", Note: "x", Operator: "alice"}, evidence.ErrNoRun},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.StorePath = path
			if c.req.RunID == "" {
				c.req.RunID = fixtureRun
			}
			if _, err := Reconcile(ctx, c.req); !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
		})
	}
	rec, err := decide(fixtureRun+":exec-1:call_2", "succeeded", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if rec.How != "operator decision" || rec.RunID != fixtureRun || !strings.HasPrefix(rec.CorrectionRunID, fixtureRun+"-reconcile-") ||
		rec.Outcome.State != "succeeded" || rec.Effect.CallID != "call_2" {
		t.Fatalf("reconciliation %+v", rec)
	}
	effs, err := Effects(ctx, EffectsQuery{StorePath: path, Runs: []string{fixtureRun}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range effs {
		if e.CallID == "call_2" && (e.State != "succeeded" || e.Source != "operator" || !strings.Contains(e.Note, "tx-4411 (operator alice)")) {
			t.Fatalf("after reconciliation: %+v", e)
		}
	}
	// The correction, named, lists the same team run.
	if got := statesOf(t, EffectsQuery{StorePath: path, Runs: []string{rec.CorrectionRunID}}); got["call_2"] != "succeeded" {
		t.Fatalf("effects through the correction run: %v", got)
	}
	// Listing every team run lists this one once.
	if effs, err := Effects(ctx, EffectsQuery{StorePath: path}); err != nil || len(effs) != 4 {
		t.Fatalf("every team run: %d effects (%v), want 4", len(effs), err)
	}
	// A terminal outcome is never revised.
	if _, err := decide("call_2", "failed", "bob"); !errors.Is(err, ErrEffectState) || !strings.Contains(err.Error(), "not unknown") {
		t.Fatalf("second decision: %v, want ErrEffectState", err)
	}
	// The original run is untouched and verifies; the correction is a separate finalized run.
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vs, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Status != evidence.VerifyOK {
			t.Fatalf("after reconciliation: %+v", v)
		}
	}
	corr, err := s.Run(ctx, rec.CorrectionRunID)
	if err != nil || corr.CorrectsRunID != fixtureRun || corr.Verdict == nil || corr.Verdict.Verdict != evidence.VerdictNonCertifiable {
		t.Fatalf("correction run %+v %v", corr, err)
	}
}

// A lookup resolves nothing without a receipt, or with a receipt for another payload, and records
// nothing; a committed receipt for the intent's payload resolves the effect to succeeded.
func TestReconcileLookupResolvesOnlyThroughTheEffectsReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := effectstest.Store(t, true)
	lookup := func(db string) (Reconciliation, error) {
		return Reconcile(ctx, ReconcileRequest{StorePath: path, RunID: fixtureRun, Call: "call_2", Lookup: true, EffectsDB: db})
	}
	var oe *OptionError
	if _, err := lookup(""); !errors.As(err, &oe) || oe.Field != "EffectsDB" ||
		!strings.Contains(err.Error(), "no effects database at "+EffectsDBPath(filepath.Dir(path))) {
		t.Fatalf("no effects database beside the store: %v, want an *OptionError for EffectsDB naming it", err)
	}
	if _, err := lookup(filepath.Join(t.TempDir(), "none.db")); !errors.As(err, &oe) || oe.Field != "EffectsDB" {
		t.Fatalf("no effects database where named: %v, want an *OptionError for EffectsDB", err)
	}
	db := filepath.Join(t.TempDir(), "effects.db")
	run, err := reference.Start(ctx, reference.Config{EffectsDB: db})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if _, err := lookup(db); !errors.Is(err, ErrNoReceipt) || !strings.Contains(err.Error(), "stays unknown") {
		t.Fatalf("no receipt: %v, want ErrNoReceipt", err)
	}
	put := func(body string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, run.BaseURL()+"/effects/"+fixtureRun+":exec-1:call_2", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s: status %d", body, resp.StatusCode)
		}
	}
	// A receipt under the effect's key for another payload is evidence for another action.
	put(`{"name":"n","value":"v"}`)
	if _, err := lookup(db); !errors.Is(err, ErrReceiptPayloadMismatch) {
		t.Fatalf("another payload: %v, want ErrReceiptPayloadMismatch", err)
	}
	if got := statesOf(t, EffectsQuery{StorePath: path, State: "unknown"}); got["call_2"] != "unknown" {
		t.Fatalf("call_2 should still be unknown, nothing recorded: %v", got)
	}
	// The service committed the intent's own payload under its key: the effect succeeded.
	db2 := filepath.Join(t.TempDir(), "effects.db")
	run2, err := reference.Start(ctx, reference.Config{EffectsDB: db2})
	if err != nil {
		t.Fatal(err)
	}
	defer run2.Close()
	run = run2
	put(`{"name":"release","value":"v1"}`)
	rec, err := lookup(db2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome.State != "succeeded" || rec.Outcome.Source != "reconciliation" || rec.Outcome.Receipt == nil ||
		!strings.HasPrefix(rec.How, "receipt lookup, receipt ref-") {
		t.Fatalf("reconciliation %+v", rec)
	}
	e := statesOf(t, EffectsQuery{StorePath: path, Runs: []string{fixtureRun}})
	if e["call_2"] != "succeeded" {
		t.Fatalf("after the lookup: %v", e)
	}
	if _, err := lookup(db2); !errors.Is(err, ErrEffectState) {
		t.Fatalf("a second lookup: %v, want ErrEffectState (resolved once)", err)
	}
}

func TestApprovalBindsExactlyThePendingCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := effectstest.Store(t, true)
	file := filepath.Join(t.TempDir(), "approvals.json")
	req := ApprovalRequest{StorePath: path, RunID: fixtureRun, Call: "call_3", File: file, Approver: "alice", Expires: time.Hour}
	p, err := PrepareApproval(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	hash := p.Effect.Intent.PayloadSHA256
	if len(hash) != 64 || p.Effect.Tool != "shell" || !strings.Contains(string(p.Effect.Intent.Arguments), `"go"`) {
		t.Fatalf("pending call %+v", p.Effect)
	}
	for _, answer := range []string{"yes", hash[:ApprovalPrefixLen-1], hash, strings.ToUpper(hash[:ApprovalPrefixLen]), ""} {
		if p.ConfirmedBy(answer) {
			t.Fatalf("%q confirms the approval; only the first %d characters of the hash do", answer, ApprovalPrefixLen)
		}
	}
	if !p.ConfirmedBy(hash[:ApprovalPrefixLen]) {
		t.Fatal("the hash's prefix does not confirm the approval")
	}
	var oe *OptionError
	if _, err := p.Grant(effectstest.Digest("other"), time.Now()); !errors.As(err, &oe) || oe.Field != "PayloadSHA256" {
		t.Fatalf("another payload's hash: %v, want an *OptionError for PayloadSHA256", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("an approval file was written for a hash that is not the payload's")
	}
	now := time.Now().Add(500 * time.Nanosecond)
	g, err := p.Grant(hash, now)
	if err != nil {
		t.Fatal(err)
	}
	f, err := policy.LoadApprovalFile(file)
	if err != nil || len(f.Approvals) != 1 || g.File != file {
		t.Fatalf("%+v %v", f, err)
	}
	a := f.Approvals[0]
	if a.RunID != fixtureRun || a.SessionID != fixtureRun+"-exec-1" || a.CallID != "call_3" || a.PayloadSHA256 != hash || a.Access != "execute" ||
		a.Disclose || a.Approver != "alice" || !strings.Contains(a.PolicyScope, effectstest.PolicyDigest) || !a.ExpiresAt.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("approval %+v", a)
	}
	// The approval binds the exact call: preloaded into a boundary for that run, it covers exactly it.
	ap := policy.NewApprovals(nil)
	if n := ap.Preload(f, fixtureRun, func(m string) string { return fixtureRun + "-" + m }); n != 1 {
		t.Fatalf("preloaded %d", n)
	}
	b := policy.Binding{RunID: fixtureRun, MemberID: "exec-1", SessionID: fixtureRun + "-exec-1", CallID: "call_3", Tool: "shell",
		PayloadSHA256: hash, SchemaSHA256: a.SchemaSHA256, Access: "execute", Scope: a.PolicyScope}
	if _, err := ap.Check(b); err != nil {
		t.Fatal(err)
	}
	b.PayloadSHA256 = effectstest.Digest("other")
	if _, err := ap.Check(b); err == nil {
		t.Fatal("the approval covers another payload")
	}
	// Approving again replaces the entry for the call; entries for other calls are kept.
	f.Approvals = append(f.Approvals, policy.FileApproval{MemberID: "exec-2", CallID: "other", Tool: "shell", PayloadSHA256: hash,
		SchemaSHA256: a.SchemaSHA256, Access: "execute", PolicyScope: a.PolicyScope, Approver: "bob", ExpiresAt: a.ExpiresAt})
	if err := writeApprovalFile(file, f); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Grant(hash, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if f, err = policy.LoadApprovalFile(file); err != nil || len(f.Approvals) != 2 || f.Approvals[1].CallID != "call_3" ||
		!f.Approvals[1].ExpiresAt.Equal(now.Add(time.Hour+time.Minute).Truncate(time.Second)) {
		t.Fatalf("after approving again: %+v %v", f, err)
	}
	// Without a file named, the approval goes beside the store, where Resume reads it.
	req.File = ""
	p, err = PrepareApproval(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := p.Grant(hash, now); err != nil || g.File != ApprovalsPath(filepath.Dir(path)) {
		t.Fatalf("default file: %+v %v", g, err)
	}
}

func TestPrepareApprovalRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := effectstest.Store(t, true)
	for _, c := range []struct {
		name string
		req  ApprovalRequest
		want error
	}{
		{"a call that does not await approval", ApprovalRequest{Call: "call_1"}, ErrEffectState},
		{"no such call", ApprovalRequest{Call: "call_9"}, ErrNoCall},
		{"no such run", ApprovalRequest{RunID: "run-other", Call: "call_3"}, evidence.ErrNoRun},
		{"no expiry", ApprovalRequest{Call: "call_3", Expires: -1}, ErrBadOptions},
		{"no approver", ApprovalRequest{Call: "call_3", Approver: " "}, ErrBadOptions},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.StorePath = path
			if c.req.RunID == "" {
				c.req.RunID = fixtureRun
			}
			if c.req.Expires == 0 {
				c.req.Expires = time.Hour
			}
			if c.req.Approver == "" {
				c.req.Approver = "alice"
			}
			if _, err := PrepareApproval(ctx, c.req); !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
		})
	}
	// A call of a finalized run that did not pause can never be dispatched.
	done := effectstest.Store(t, false)
	_, err := PrepareApproval(ctx, ApprovalRequest{StorePath: done, RunID: fixtureRun, Call: "call_3", Approver: "alice", Expires: time.Hour})
	if !errors.Is(err, ErrEffectState) || !strings.Contains(err.Error(), "did not pause") {
		t.Fatalf("a run that cannot resume: %v, want ErrEffectState saying it did not pause", err)
	}
}
