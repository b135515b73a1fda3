package claims

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/internal/jsonconv"
	"github.com/assay-audit/assay/internal/runid"
)

// CheckName is the name of the check a recorded reconciliation carries.
const CheckName = "usage_claims"

// Artifact names linked to a recorded reconciliation run.
const (
	ManifestArtifact = "manifest.json"              // what the run reconciled (Manifest)
	ClaimsArtifact   = "usage/claims.jsonl"         // the claims file, byte for byte
	RecordsArtifact  = "usage/gateway-records.json" // the gateway rows the result was derived from
	mediaJSONLines   = "application/jsonl"
)

// Manifest is what a recorded reconciliation is bound to; its SHA-256 (of the JSON bytes linked as
// ManifestArtifact) is the run envelope's manifest digest.
type Manifest struct {
	Kind                 string `json:"kind"`                   // "usage_claims_reconciliation"
	GatewayDB            string `json:"gateway_db"`             // path as given
	GatewayRecords       int    `json:"gateway_records"`        // rows read
	GatewayRecordsSHA256 string `json:"gateway_records_sha256"` // SHA-256 hex of RecordsArtifact
	ClaimsSHA256         string `json:"claims_sha256"`          // SHA-256 hex of the claims file
	Claims               int    `json:"claims"`                 // claim lines
}

// RecordRequest asks Record to store a reconciliation in an evidence store.
type RecordRequest struct {
	StorePath   string           // evidence store (DuckDB file), created if missing
	Tenant      string           // envelope tenant; default "local"
	ToolVersion string           // assay's version, for the environment fingerprint
	GatewayDB   string           // the gateway database path, as given
	Records     []gateway.Record // the rows Result was derived from
	Claims      []byte           // the claims file, exact bytes
	ClaimLines  int              // claims parsed from it
	Result      Result
	Wait        time.Duration // how long to wait for a writer holding the store
	Command     string        // the command line recorded as the store's holder
}

// Recorded is the run Record finalized.
type Recorded struct {
	RunID        string           `json:"run_id"`
	Verdict      evidence.Verdict `json:"verdict"` // always non_certifiable: the run is in observe mode
	EventCount   int64            `json:"event_count"`
	TerminalHash string           `json:"terminal_hash"`
}

// ExternalProvider is the provider name a recorded reconciliation's envelope carries: the usage
// was an external system's, observed through the gateway, not a run of assay's provider client
// (reports never present it as the reference provider's; reports/case.go isReference).
const ExternalProvider = "external"

// Record stores the reconciliation as one run in observe mode (evidence.ModeObserve): the claims
// file and the gateway rows as artifacts, the check CheckName (required; passed only when
// Result.OK, failed on a mismatch, else unknown) with the per-session results as its evidence, then
// finalizes it. The store makes the verdict non_certifiable by mode: an external system's claims
// are observed, not enforced.
//
// Errors: those of evidence.Open (evidence.ErrLocked, ErrNotStore ...), of the store's writes, and
// of Finalize; a run left open by a failure is sealed as interrupted by the store's next writer.
func Record(ctx context.Context, req RecordRequest) (Recorded, error) {
	recordsJSON, err := recordsArtifact(req.Records)
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: encode gateway records: %w", err)
	}
	m := Manifest{Kind: "usage_claims_reconciliation", GatewayDB: req.GatewayDB, GatewayRecords: len(req.Records),
		GatewayRecordsSHA256: sha256Hex(recordsJSON), ClaimsSHA256: sha256Hex(req.Claims), Claims: req.ClaimLines}
	manifestJSON, err := json.Marshal(m)
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: encode manifest: %w", err)
	}
	status := evidence.CheckUnknown
	switch {
	case req.Result.OK():
		status = evidence.CheckPassed
	case req.Result.Mismatched > 0:
		status = evidence.CheckFailed
	}
	checkEvidence, err := json.Marshal(req.Result)
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: encode result: %w", err)
	}
	detail := fmt.Sprintf("%d session(s): %d conserved, %d mismatch, %d unknown; %d unattributed request(s)",
		len(req.Result.Sessions), req.Result.Conserved, req.Result.Mismatched, req.Result.Unknown, req.Result.Unattributed.Requests)
	tenant := req.Tenant
	if tenant == "" {
		tenant = "local"
	}
	env := harness.CurrentEnvironment(req.ToolVersion)
	fingerprint, err := env.Fingerprint()
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: environment fingerprint: %w", err)
	}
	envJSON, err := env.Canonical()
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: environment: %w", err)
	}
	store, err := evidence.Open(ctx, req.StorePath, evidence.OpenOptions{Wait: req.Wait, Command: req.Command})
	if err != nil {
		return Recorded{}, err
	}
	runID := runid.New("run-", time.Now())
	rec, err := record(ctx, store, runID, evidence.Envelope{Tenant: tenant, ManifestDigest: sha256Hex(manifestJSON), Mode: evidence.ModeObserve,
		EnvironmentFingerprint: fingerprint, EntropySources: []string{"external_claims", "gateway_records", "wall_clock", "run_id"},
		ReplayTolerance: "exact", Provider: ExternalProvider, Case: "usage_claims", InvocationID: harness.NewInvocationID()},
		[]artifact{{ManifestArtifact, "application/json", manifestJSON}, {evidence.EnvironmentArtifact, "application/json", envJSON},
			{ClaimsArtifact, mediaJSONLines, req.Claims}, {RecordsArtifact, "application/json", recordsJSON}},
		evidence.Check{Name: CheckName, Required: true, Status: status, Detail: detail, Evidence: checkEvidence},
		req.Result.Problems())
	return rec, errors.Join(err, store.Close())
}

// recordsArtifact is RecordsArtifact's bytes: {"records": [gateway.RecordRow...]} in the order
// given (the rows a gateway binding's digest is computed over), without HTML escapes.
func recordsArtifact(recs []gateway.Record) ([]byte, error) {
	return jsonconv.Marshal(struct {
		Records []gateway.RecordRow `json:"records"`
	}{gateway.RecordRows(recs)})
}

type artifact struct {
	name, mediaType string
	data            []byte
}

func record(ctx context.Context, store *evidence.Store, runID string, env evidence.Envelope, arts []artifact, check evidence.Check, problems []string) (Recorded, error) {
	if err := store.OpenRun(ctx, runID, env, ""); err != nil {
		return Recorded{}, fmt.Errorf("claims: open run %s: %w", runID, err)
	}
	for _, a := range arts {
		if _, err := store.PutArtifact(ctx, runID, a.name, a.mediaType, a.data); err != nil {
			return Recorded{}, fmt.Errorf("claims: run %s: store %s: %w", runID, a.name, err)
		}
	}
	if err := store.RecordCheck(ctx, runID, check); err != nil {
		return Recorded{}, fmt.Errorf("claims: run %s: record check: %w", runID, err)
	}
	v := evidence.Verdict{Verdict: evidence.VerdictAccepted, Reasons: []string{}}
	if len(problems) > 0 {
		v = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: problems}
	}
	fin, err := store.Finalize(ctx, runID, v)
	if err != nil {
		return Recorded{}, fmt.Errorf("claims: finalize run %s: %w", runID, err)
	}
	return Recorded{RunID: runID, Verdict: fin.Verdict, EventCount: fin.EventCount, TerminalHash: fin.TerminalHash}, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
