package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
)

// VerifyOptions configures VerifyStore.
type VerifyOptions struct {
	// Runs are the runs to verify; none means every run, deleted ones included.
	Runs []string
	// Wait and Command are as for evidence.Open (the store is opened read-only).
	Wait    time.Duration
	Command string
	// Manifest is a manifest file: checked against (evidence.Store.CheckManifest), or with
	// WriteManifest written from the results (evidence.Store.BuildManifest), signed with SignKey
	// when set and marked final with Final. "" checks none.
	Manifest      string
	WriteManifest bool
	Final         bool
	SignKey       *attest.Signer
	// Strict fails a manifest check on any run, finalization or writer session added since the
	// manifest (always so when the manifest is final).
	Strict bool
	// PubKey is the public key a manifest must be signed with and attestations are checked
	// against; with PubKey nil a manifest must be unsigned.
	PubKey *attest.Verifier
	// Attestations is a directory of attestations (evidence/attest) every finalized run must have
	// one in, signed with PubKey; "" checks none.
	Attestations string
}

// VerifyReport is what VerifyStore found.
type VerifyReport struct {
	// Results has one entry per run verified and per store-level finding (RunID "" with Table
	// set: damage, a broken store-wide chain, a manifest log that changed, an invalid attestation
	// line), with Manifest and Attestation set when those were checked.
	Results []evidence.RunVerification `json:"results"`
	// ManifestRuns is the number of runs the written manifest pins (WriteManifest), 0 otherwise.
	ManifestRuns int `json:"manifest_runs,omitempty"`
	// ManifestSigned reports that the manifest written or checked was signed.
	ManifestSigned bool `json:"manifest_signed,omitempty"`
}

// Failures describes each entry that does not pass (evidence.RunVerification.Passed), in
// Results order, as "RUN STATUS" (with " at seq N", " (manifest M)", " (attestation A)" when
// they apply) or "store TABLE STATUS": nil when everything passes.
func (r VerifyReport) Failures() []string {
	var bad []string
	for _, v := range r.Results {
		if v.Passed() {
			continue
		}
		desc := v.RunID + " " + v.Status
		if v.RunID == "" {
			// A store finding is named by its table and row, as the table shows it: two rows of one
			// table are two findings, never one repeated.
			desc = "store " + v.Table
			if v.Row != "" {
				desc += " " + v.Row
			}
			desc += " " + v.Status
		}
		if v.FirstBadSeq > 0 {
			desc += fmt.Sprintf(" at seq %d", v.FirstBadSeq)
		}
		if v.Manifest != "" && v.Manifest != evidence.ManifestMatch {
			desc += " (manifest " + v.Manifest + ")"
		}
		if v.Attestation != "" && v.Attestation != evidence.AttestationVerified {
			desc += " (attestation " + v.Attestation + ")"
		}
		bad = append(bad, desc)
	}
	return bad
}

// VerifyStore verifies the evidence store at path with everything it is bound to: the store's
// chains and structure, each run's records in the gateway's usage database and the effect
// service's receipts beside it (BindingCheckers; a file edited, short of rows or gone is
// reported), and its case files on disk (WorkingCopy; a difference is a note, the artifact is the
// evidence); then checks a manifest (or writes one) and a directory of attestations. It opens
// only for reading and creates no file except the manifest it is asked to write.
//
// A store whose file cannot be opened as a database (truncated, corrupt) is a report with one
// damaged entry, not an error.
//
// Errors, with nothing verified: a manifest that cannot be used (evidence.ErrBadManifest:
// missing, empty, inconsistent with its checkpoint, unsigned although PubKey is set, signed
// although it is not, a signature that does not verify); an attestations directory that is
// missing; evidence.Open's (no store, locked, not a store, another schema version);
// evidence.ErrNoRun for a named run that neither exists nor leaves traces. When a manifest was to
// be written and something does not verify, the report holds every result and the error wraps
// evidence.ErrManifestRefused: nothing was written.
func VerifyStore(ctx context.Context, path string, opts VerifyOptions) (VerifyReport, error) {
	if opts.WriteManifest && opts.Manifest == "" {
		return VerifyReport{}, fmt.Errorf("%w: writing a manifest needs a manifest file", ErrBadOptions)
	}
	if opts.WriteManifest && len(opts.Runs) > 0 {
		return VerifyReport{}, fmt.Errorf("%w: a manifest pins the whole store: name no runs to write one", ErrBadOptions)
	}
	if opts.Attestations != "" && opts.PubKey == nil {
		return VerifyReport{}, fmt.Errorf("%w: checking attestations needs the public key they were signed with", ErrBadOptions)
	}
	var rep VerifyReport
	var manifest evidence.Manifest
	if opts.Manifest != "" && !opts.WriteManifest {
		m, signed, err := attest.ReadManifest(ctx, opts.Manifest, opts.PubKey)
		if err != nil {
			return VerifyReport{}, err
		}
		manifest, rep.ManifestSigned = m, signed
	}
	store, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: opts.Command})
	var damaged *evidence.DamagedError
	if errors.As(err, &damaged) {
		rep.Results = []evidence.RunVerification{{Status: evidence.VerifyDamaged, Table: damaged.Table, Detail: damaged.Reason}}
		if opts.WriteManifest {
			return rep, fmt.Errorf("%w: the store is damaged; manifest %s not written", evidence.ErrManifestRefused, opts.Manifest)
		}
		return rep, nil
	}
	if err != nil {
		return VerifyReport{}, err
	}
	defer store.Close()
	dir := filepath.Dir(path)
	results, err := store.VerifyWith(ctx, evidence.VerifyRequest{Runs: opts.Runs, Bindings: BindingCheckers(dir), WorkingCopy: WorkingCopy(dir)})
	if err != nil {
		return VerifyReport{}, err
	}
	rep.Results = results
	all := len(opts.Runs) == 0
	switch {
	case opts.Manifest == "":
	case opts.WriteManifest:
		if err := overwritable(opts.Manifest); err != nil {
			return rep, err
		}
		m, err := store.BuildManifest(ctx, results, opts.Final)
		if err != nil {
			return rep, fmt.Errorf("%w; manifest %s not written", err, opts.Manifest)
		}
		if err := attest.WriteManifest(ctx, opts.Manifest, m, opts.SignKey); err != nil {
			return rep, err
		}
		rep.ManifestRuns, rep.ManifestSigned = len(m.Runs), opts.SignKey != nil
	default:
		if rep.Results, err = store.CheckManifest(ctx, manifest, rep.Results, opts.Strict); err != nil {
			return rep, err
		}
	}
	if opts.Attestations != "" {
		if rep.Results, err = attest.Check(ctx, store, opts.PubKey, opts.Attestations, rep.Results, all); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// overwritable refuses to write a manifest over path when something is there that is not a
// manifest (a mistyped path must not destroy a key or any other file): a directory, or a file that
// is neither an unsigned manifest's JSON nor a DSSE envelope. Errors wrap evidence.ErrBadManifest.
func overwritable(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file; nothing written", evidence.ErrBadManifest, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	var probe struct {
		Format      *string `json:"format"`
		PayloadType *string `json:"payloadType"`
	}
	if json.Unmarshal(data, &probe) != nil || (probe.Format == nil && probe.PayloadType == nil) {
		return fmt.Errorf("%w: %s exists and is not a manifest; nothing overwritten (remove it, or name another file)", evidence.ErrBadManifest, path)
	}
	return nil
}
