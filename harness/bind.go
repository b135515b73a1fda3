package harness

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/internal/sqliteuri"
	"github.com/assay-audit/assay/runtime/tool"
)

// Sources of the bindings a case run records (evidence.Binding.Source).
const (
	// BindingGateway binds a run to the gateway's records of the requests its
	// team made while it ran: gateway-usage.db.
	BindingGateway = "gateway"
	// BindingReceipts binds a run to the effect service's receipts of the
	// effects it dispatched: reference-effects.db.
	BindingReceipts = "receipts"
)

// gatewayLocator says which gateway records a run is bound to: those of its
// team's sessions (session_prefix, "{team run id}-") among the records that
// arrived while it ran (after < id <= up_to), in the usage database file
// beside the evidence store.
type gatewayLocator struct {
	File          string `json:"file"`
	After         int64  `json:"after"`
	UpTo          int64  `json:"up_to"`
	SessionPrefix string `json:"session_prefix"`
	// RowForm is the gateway.RowForm the digest was computed over; absent (0)
	// in bindings recorded before it existed, which are form 1. The locator is
	// in the run's terminal hash, so the form cannot be lowered afterwards.
	RowForm int `json:"row_form,omitempty"`
}

// receiptsLocator says which receipts a run is bound to: those of the effects
// it dispatched through the effect service, by idempotency key.
type receiptsLocator struct {
	File string   `json:"file"`
	Keys []string `json:"keys"`
}

// bindExternal records, before the run is finalized, its bindings to the
// records outside the store its verdict rests on: the gateway's records of
// its sessions in the window the team ran (gwFrom, gwTo], and the receipts
// of the remote effects it dispatched (none when it dispatched none). Their
// counts and digests enter the run's terminal hash; assay verify reads them
// back (BindingCheckers).
func bindExternal(ctx context.Context, env caseEnv, outDir, runID, teamRunID string, gwFrom, gwTo int64) error {
	recs, err := env.gateway.RecordsIn(ctx, gwFrom, gwTo)
	if err != nil {
		return fmt.Errorf("read the gateway's records: %w", err)
	}
	prefix := teamRunID + "-"
	var mine []gateway.Record
	for _, r := range recs {
		if strings.HasPrefix(r.SessionID, prefix) {
			mine = append(mine, r)
		}
	}
	sum, err := gateway.DigestRecords(mine)
	if err != nil {
		return err
	}
	loc, err := json.Marshal(gatewayLocator{File: GatewayDBName, After: gwFrom, UpTo: gwTo, SessionPrefix: prefix, RowForm: gateway.RowForm})
	if err != nil {
		return err
	}
	if err := env.store.BindExternal(ctx, runID, evidence.Binding{Source: BindingGateway, Locator: loc, Records: int64(len(mine)), SHA256: sum}); err != nil {
		return fmt.Errorf("bind the gateway's records: %w", err)
	}
	journal, err := ToolRecords(ctx, env.store, runID)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var keys []string
	for _, r := range journal {
		if in := r.Intent; in != nil && in.Tool == tool.RemotePutName && in.Dispatched && !seen[in.IdempotencyKey] {
			seen[in.IdempotencyKey] = true
			keys = append(keys, in.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	n, sum, err := receiptsDigest(ctx, EffectsDBPath(outDir), keys)
	if err != nil {
		return fmt.Errorf("read the effect service's receipts: %w", err)
	}
	loc, err = json.Marshal(receiptsLocator{File: EffectsDBName, Keys: keys})
	if err != nil {
		return err
	}
	if err := env.store.BindExternal(ctx, runID, evidence.Binding{Source: BindingReceipts, Locator: loc, Records: n, SHA256: sum}); err != nil {
		return fmt.Errorf("bind the effect service's receipts: %w", err)
	}
	return nil
}

// GatewayDBName is the gateway's usage database in the output directory.
const GatewayDBName = "gateway-usage.db"

// receiptObject is the canonical form of a receipt: every column of the
// effect service's effect_receipts table, named as there.
type receiptObject struct {
	IdempotencyKey string `json:"idempotency_key"`
	Name           string `json:"name"`
	PayloadSHA256  string `json:"payload_sha256"`
	Reference      string `json:"reference"`
	CommittedAt    string `json:"committed_at"`
	Puts           int64  `json:"puts"`
}

// receiptsDigest reads the receipts of keys from the effects database at
// path, read-only and creating nothing beside it, and returns how many there
// are and the SHA-256 hex of the RFC 8785 form of their array in key order.
// A key without a receipt is left out (it committed nothing). Errors wrap
// fs.ErrNotExist when the file is gone.
func receiptsDigest(ctx context.Context, path string, keys []string) (int64, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return 0, "", fmt.Errorf("effects database %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite3", sqliteuri.ReadOnlyFile(abs))
	if err != nil {
		return 0, "", fmt.Errorf("effects database %s: %w", abs, err)
	}
	defer db.Close()
	objs := []receiptObject{}
	for _, k := range keys {
		var o receiptObject
		err := db.QueryRowContext(ctx, `SELECT idempotency_key, name, payload_sha256, reference, committed_at, puts
			FROM effect_receipts WHERE idempotency_key = ?`, k).Scan(&o.IdempotencyKey, &o.Name, &o.PayloadSHA256, &o.Reference, &o.CommittedAt, &o.Puts)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("effects database %s: receipt %s: %w", abs, k, err)
		}
		objs = append(objs, o)
	}
	raw, err := json.Marshal(objs)
	if err != nil {
		return 0, "", err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return 0, "", err
	}
	sum := sha256.Sum256(canon)
	return int64(len(objs)), hex.EncodeToString(sum[:]), nil
}

// besideStore resolves a locator's file name in the store's directory,
// refusing anything but a plain name: a locator read from the store is not
// trusted to send a reader elsewhere.
func besideStore(storeDir, name string) (string, error) {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return "", fmt.Errorf("the binding names %q, not a file beside the store", name)
	}
	return filepath.Join(storeDir, name), nil
}

// gatewayChecker recomputes "gateway" bindings from the usage database.
type gatewayChecker struct{ dir string }

func (gatewayChecker) Source() string { return BindingGateway }

func (c gatewayChecker) Recompute(ctx context.Context, _ string, locator json.RawMessage) (int64, string, error) {
	var loc gatewayLocator
	if err := json.Unmarshal(locator, &loc); err != nil {
		return 0, "", fmt.Errorf("the binding's locator does not decode: %v", err)
	}
	path, err := besideStore(c.dir, loc.File)
	if err != nil {
		return 0, "", err
	}
	form := loc.RowForm
	if form == 0 {
		form = 1
	}
	recs, err := gateway.ReadRecords(ctx, path, loc.After, loc.UpTo, loc.SessionPrefix)
	if err != nil {
		return 0, "", err
	}
	sum, err := gateway.DigestRecordsForm(recs, form)
	return int64(len(recs)), sum, err
}

// receiptsChecker recomputes "receipts" bindings from the effects database.
type receiptsChecker struct{ dir string }

func (receiptsChecker) Source() string { return BindingReceipts }

func (c receiptsChecker) Recompute(ctx context.Context, _ string, locator json.RawMessage) (int64, string, error) {
	var loc receiptsLocator
	if err := json.Unmarshal(locator, &loc); err != nil {
		return 0, "", fmt.Errorf("the binding's locator does not decode: %v", err)
	}
	path, err := besideStore(c.dir, loc.File)
	if err != nil {
		return 0, "", err
	}
	return receiptsDigest(ctx, path, loc.Keys)
}

// BindingCheckers returns the checkers that read back, from the files beside
// the evidence store in storeDir, the records a case run is bound to (the
// gateway's usage database, the effect service's receipts), for
// evidence.VerifyRequest.Bindings. They only read, and create no file.
func BindingCheckers(storeDir string) []evidence.BindingChecker {
	return []evidence.BindingChecker{gatewayChecker{dir: storeDir}, receiptsChecker{dir: storeDir}}
}

// deliverablePrefix names the artifacts that hold a member's declared file,
// "deliverable/<member>/<path>" (proveDeliverables).
const deliverablePrefix = "deliverable/"

// WorkingCopy maps a case run's deliverable artifacts to the files a user
// opens for them, cases/<first run of the lineage>/<member>/<path> beside the
// evidence store in storeDir (a case with worktree isolation: the member's
// worktree, cases/<run>/worktrees/<run>-<member>/<path>), for
// evidence.VerifyRequest.WorkingCopy.
func WorkingCopy(storeDir string) evidence.WorkingCopyFunc {
	return func(root string, run evidence.RunSummary, link evidence.ArtifactLink) (string, bool) {
		rel, ok := strings.CutPrefix(link.Name, deliverablePrefix)
		if !ok || rel == "" {
			return "", false
		}
		clean := filepath.Clean(filepath.FromSlash(rel))
		if filepath.IsAbs(clean) || clean == "." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || clean == ".." {
			return "", false
		}
		if e, err := LookupCase(run.Envelope.Case); err == nil && e.Options().Isolation.Enabled {
			if member, file, ok := strings.Cut(clean, string(filepath.Separator)); ok {
				return filepath.Join(worktreePath(filepath.Join(storeDir, "cases", root), root, member), file), true
			}
		}
		return filepath.Join(storeDir, "cases", root, clean), true
	}
}

// signRuns signs runIDs (finalized or sealed) with opts.Signer into
// opts.AttestDir (default OUT/attestations); nothing without a signer.
func signRuns(ctx context.Context, opts Options, store *evidence.Store, runIDs ...string) error {
	if opts.Signer == nil {
		return nil
	}
	dir := opts.AttestDir
	if dir == "" {
		dir = filepath.Join(opts.OutDir, "attestations")
	}
	for _, id := range runIDs {
		if _, err := attest.SignRun(ctx, store, opts.Signer, dir, id); err != nil {
			return fmt.Errorf("run %s is finalized, but its attestation was not written (sign it later with assay attest): %w", id, err)
		}
	}
	return nil
}
