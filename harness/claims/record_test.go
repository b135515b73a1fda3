package claims

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

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

// The gateway rows a recorded reconciliation links (RecordsArtifact) are the requests table's
// columns as named there (gateway.RecordRow): every key snake_case, unknown counts null, no HTML
// escapes, no Go field names; the manifest's gateway_records_sha256 is the digest of exactly those
// bytes, and the rows digest as gateway.DigestRecords digests the records they came from.
func TestRecordedGatewayRowsFollowTheJSONConvention(t *testing.T) {
	store := filepath.Join(t.TempDir(), "evidence.duckdb")
	r := rec(1, "s<1>", 3, 4, 7)
	r.LatencyMS, r.Path, r.CachedTokens = 250, "/v1/chat/completions", nil
	recs := []gateway.Record{r}
	got, err := Record(t.Context(), RecordRequest{StorePath: store, ToolVersion: "test", GatewayDB: "gw.db", Records: recs,
		Claims: []byte(`{"session_id":"s<1>","total_tokens":7}`), ClaimLines: 1, Result: Reconcile([]Claim{claim("s<1>", nil, nil, i64(7))}, recs), Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := evidence.Open(t.Context(), store, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sum, err := s.Run(t.Context(), got.RunID)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		for _, a := range sum.Artifacts {
			if a.Name == name {
				b, err := s.Artifact(t.Context(), a.Digest)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
		}
		t.Fatalf("artifact %s not linked", name)
		return nil
	}
	raw := read(RecordsArtifact)
	var doc struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Records) != 1 {
		t.Fatalf("%s: %s (%v)", RecordsArtifact, raw, err)
	}
	row := doc.Records[0]
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for k := range row {
		if !snake.MatchString(k) {
			t.Errorf("key %q is not snake_case: %s", k, raw)
		}
	}
	if row["latency_ms"] != float64(250) || row["session_id"] != "s<1>" || row["total_tokens"] != float64(7) ||
		row["cached_tokens"] != nil || len(row) != 23 {
		t.Errorf("row %v: want latency_ms 250, the session id, total_tokens 7, cached_tokens null, 23 keys", row)
	}
	var rows struct {
		Records []gateway.RecordRow `json:"records"`
	}
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(rows.Records)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := jcs.Transform(again)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := gateway.DigestRecords(recs); err != nil || sha256Hex(canon) != want {
		t.Errorf("the linked rows digest to %s, the records to %s (%v)", sha256Hex(canon), want, err)
	}
	if strings.Contains(string(raw), `\u003c`) {
		t.Errorf("HTML escapes in %s", raw)
	}
	var m Manifest
	if err := json.Unmarshal(read(ManifestArtifact), &m); err != nil || m.GatewayRecordsSHA256 != sha256Hex(raw) || m.GatewayRecords != 1 {
		t.Errorf("manifest %+v (%v) does not name the records' digest %s", m, err, sha256Hex(raw))
	}
}
