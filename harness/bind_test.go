package harness

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
)

// A gateway binding records the row form its digest covers (gateway.RowForm) in its locator, which
// the terminal hash covers; the checker recomputes with the form recorded, and a locator without
// one (a binding recorded before row_form existed) with form 1, which leaves out echoed_session.
func TestGatewayBindingIsRecomputedInTheRowFormItWasRecordedWith(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sum, out := remoteRun(t)
	store := openStoreReadOnly(t, out)
	runID := sum.Cases[0].RunID
	byRun, err := store.Bindings(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var b *evidence.Binding
	for _, x := range byRun[runID] {
		if x.Source == BindingGateway {
			b = &x
		}
	}
	if b == nil || b.Records == 0 {
		t.Fatalf("run %s has no gateway binding over records: %+v", runID, byRun[runID])
	}
	var loc gatewayLocator
	if err := json.Unmarshal(b.Locator, &loc); err != nil {
		t.Fatal(err)
	}
	if loc.RowForm != gateway.RowForm {
		t.Fatalf("locator %s: row_form %d, want %d", b.Locator, loc.RowForm, gateway.RowForm)
	}
	c := gatewayChecker{dir: out}
	n, got, err := c.Recompute(t.Context(), runID, b.Locator)
	if err != nil || n != b.Records || got != b.SHA256 {
		t.Fatalf("recomputed (%d, %s, %v), recorded (%d, %s)", n, got, err, b.Records, b.SHA256)
	}
	recs, err := gateway.ReadRecords(t.Context(), filepath.Join(out, GatewayDBName), loc.After, loc.UpTo, loc.SessionPrefix)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := gateway.DigestRecordsForm(recs, 1)
	if err != nil || v1 == b.SHA256 {
		t.Fatalf("form 1 digest %s (%v) equals the form 2 one", v1, err)
	}
	old := loc
	old.RowForm = 0
	raw, _ := json.Marshal(old)
	if n, got, err := c.Recompute(t.Context(), runID, raw); err != nil || n != b.Records || got != v1 {
		t.Fatalf("a locator without row_form recomputed (%d, %s, %v), want form 1's %s", n, got, err, v1)
	}
	old.RowForm = gateway.RowForm + 1
	raw, _ = json.Marshal(old)
	if _, _, err := c.Recompute(t.Context(), runID, raw); err == nil {
		t.Fatalf("row_form %d was recomputed", old.RowForm)
	}
}
