package evidence

import (
	"context"
	"fmt"
	"time"
)

// VerifyOptions configures VerifyFile.
type VerifyOptions struct {
	// Runs are the runs to verify; none means every run, deleted ones included (Store.Verify).
	Runs []string
	// Wait and Command are as for Open (the store is opened read-only).
	Wait    time.Duration
	Command string
	// Manifest is a manifest file (Manifest): with WriteManifest false the results are checked
	// against it (CheckManifest); with WriteManifest true one is written there from them
	// (BuildManifest, WriteManifest). "" checks none.
	Manifest      string
	WriteManifest bool
}

// VerifyReport is what VerifyFile found.
type VerifyReport struct {
	// Results has one entry per run verified, with RunVerification.Manifest set when a manifest
	// was checked, plus a tampered entry for each run the manifest lists that the store lacks
	// (only when every run was verified).
	Results []RunVerification `json:"results"`
	// ManifestRuns is the number of runs the written manifest lists (WriteManifest), 0 otherwise.
	ManifestRuns int `json:"manifest_runs,omitempty"`
}

// Failures describes each run that does not verify, in Results order, as "RUN STATUS" or
// "RUN tampered at seq N": nil when every run verifies.
func (r VerifyReport) Failures() []string {
	var bad []string
	for _, v := range r.Results {
		if v.Status == VerifyOK {
			continue
		}
		desc := v.RunID + " " + v.Status
		if v.FirstBadSeq > 0 {
			desc += fmt.Sprintf(" at seq %d", v.FirstBadSeq)
		}
		bad = append(bad, desc)
	}
	return bad
}

// VerifyFile verifies the runs of the store at path (Store.Verify, on a store opened read-only),
// and checks the results against a manifest or writes one (opts.Manifest).
//
// Errors, with nothing verified: a *FieldError (ErrInvalidArgument) for WriteManifest without a
// Manifest; ReadManifest's errors (ErrBadManifest for a missing or malformed manifest); Open's
// (ErrNoStore, ErrLocked, ErrNotStore, *SchemaVersionError); ErrNoRun for a named run that
// neither exists nor leaves traces. When a manifest was to be written and a run does not verify,
// the report holds every result and the error wraps ErrManifestRefused: nothing was written. A
// run that does not verify is not an error otherwise: see VerifyReport.Failures.
func VerifyFile(ctx context.Context, path string, opts VerifyOptions) (VerifyReport, error) {
	if opts.WriteManifest && opts.Manifest == "" {
		return VerifyReport{}, fieldErr(ErrInvalidArgument, "write_manifest", "needs a manifest file to write")
	}
	var manifest Manifest
	if opts.Manifest != "" && !opts.WriteManifest {
		m, err := ReadManifest(opts.Manifest)
		if err != nil {
			return VerifyReport{}, err
		}
		manifest = m
	}
	store, err := Open(ctx, path, OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: opts.Command})
	if err != nil {
		return VerifyReport{}, err
	}
	defer store.Close()
	results, err := store.Verify(ctx, opts.Runs...)
	if err != nil {
		return VerifyReport{}, err
	}
	rep := VerifyReport{Results: results}
	switch {
	case opts.Manifest == "":
	case opts.WriteManifest:
		m, err := BuildManifest(path, results)
		if err != nil {
			return rep, fmt.Errorf("%w; manifest %s not written", err, opts.Manifest)
		}
		if err := WriteManifest(opts.Manifest, m); err != nil {
			return rep, err
		}
		rep.ManifestRuns = len(m.Runs)
	default:
		rep.Results = CheckManifest(manifest, results, len(opts.Runs) == 0)
	}
	return rep, nil
}
