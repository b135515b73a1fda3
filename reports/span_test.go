package reports

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// A correction (assay reconcile) keeps the envelope, invocation id included, of the run it corrects,
// but is made later by another command: the invocation's end and wall time are its own runs', not
// the correction's, which is still listed with its link.
func TestACorrectionDoesNotExtendItsInvocation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "test"})
	must(t, err)
	env := fixtureEnvelope("sequential", "sequential", "inv-x")
	must(t, s.OpenRun(ctx, "run-1", env, ""))
	must(t, s.RecordCheck(ctx, "run-1", evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "ok"}))
	_, err = s.Finalize(ctx, "run-1", evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(t, err)
	time.Sleep(50 * time.Millisecond)
	must(t, s.OpenRun(ctx, "run-1-corr", env, "run-1"))
	_, err = s.Finalize(ctx, "run-1-corr", evidence.Verdict{Verdict: evidence.VerdictNonCertifiable, Reasons: []string{"a reconciliation"}})
	must(t, err)
	must(t, s.Close())

	ro, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	must(t, err)
	defer ro.Close()
	runs, err := ro.Runs(ctx)
	must(t, err)
	var first, corr evidence.RunSummary
	for _, r := range runs {
		switch r.RunID {
		case "run-1":
			first = r
		case "run-1-corr":
			corr = r
		}
	}
	if first.FinalizedAt == nil || corr.FinalizedAt == nil || !corr.FinalizedAt.After(*first.FinalizedAt) {
		t.Fatalf("fixture: run-1 %v, correction %v", first.FinalizedAt, corr.FinalizedAt)
	}
	for _, sel := range []Selection{{All: true}, {RunIDs: []string{"run-1"}}} {
		r, err := Load(ctx, ro, sel)
		must(t, err)
		if len(r.Invocations) != 1 {
			t.Fatalf("%+v: %d invocations", sel, len(r.Invocations))
		}
		inv := r.Invocations[0]
		if inv.EndedAt == nil || !inv.EndedAt.Equal(*first.FinalizedAt) || inv.WallSeconds == nil {
			t.Errorf("%+v: invocation ended %v, want run-1's %v (not the correction's %v)", sel, inv.EndedAt, first.FinalizedAt, corr.FinalizedAt)
		}
	}
}
