package claims

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
)

// A recorded reconciliation is an observe-mode run: finalized, non_certifiable whatever the
// result, its check failed on a mismatch with the per-session results as evidence, and it verifies.
func TestRecordIsAnObserveRunThatVerifies(t *testing.T) {
	store := filepath.Join(t.TempDir(), "evidence.duckdb")
	recs := []gateway.Record{rec(1, "s", 3, 4, 7)}
	for _, tc := range []struct {
		claim  int64
		status string
	}{{7, evidence.CheckPassed}, {8, evidence.CheckFailed}} {
		cs := []Claim{claim("s", nil, nil, i64(tc.claim))}
		res := Reconcile(cs, recs)
		got, err := Record(t.Context(), RecordRequest{StorePath: store, ToolVersion: "test", GatewayDB: "gw.db", Records: recs,
			Claims: []byte(`{"session_id":"s","total_tokens":7}`), ClaimLines: 1, Result: res, Command: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict.Verdict != evidence.VerdictNonCertifiable || len(got.TerminalHash) != 64 {
			t.Errorf("recorded %+v", got)
		}
		s, err := evidence.Open(t.Context(), store, evidence.OpenOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := s.Run(t.Context(), got.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Envelope.Mode != evidence.ModeObserve || sum.Status != evidence.StatusFinalized || len(sum.Checks) != 1 ||
			sum.Checks[0].Name != CheckName || sum.Checks[0].Status != tc.status || !sum.Checks[0].Required {
			t.Errorf("claim %d: run %+v checks %+v", tc.claim, sum.Envelope, sum.Checks)
		}
		var ev Result
		if err := json.Unmarshal(sum.Checks[0].Evidence, &ev); err != nil || len(ev.Sessions) != 1 || ev.Sessions[0].Verdict != res.Sessions[0].Verdict {
			t.Errorf("check evidence %s (%v)", sum.Checks[0].Evidence, err)
		}
		names := map[string]bool{}
		for _, a := range sum.Artifacts {
			names[a.Name] = true
		}
		for _, n := range []string{ManifestArtifact, ClaimsArtifact, RecordsArtifact, evidence.EnvironmentArtifact} {
			if !names[n] {
				t.Errorf("artifact %s not linked: %v", n, names)
			}
		}
		v, err := s.Verify(t.Context(), got.RunID)
		s.Close()
		if err != nil || len(v) != 1 || v[0].Status != "ok" {
			t.Errorf("verify: %+v %v", v, err)
		}
	}
}
