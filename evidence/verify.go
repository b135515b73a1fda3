package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Verification statuses, most severe first.
const (
	VerifyDamaged        = "damaged"         // the store's structure is broken: a table missing, unexpected or rebuilt, duplicate keys, unreadable blocks, a truncated file
	VerifyTampered       = "tampered"        // hash chain, sequence, event count, envelope, terminal hash, check/verdict events or a store-wide chain do not verify, or the run was deleted
	VerifyCorruptPayload = "corrupt_payload" // an artifact's payload, or records bound outside the store, no longer hash to their digest
	VerifyMissingPayload = "missing_payload" // an artifact's payload, or records bound outside the store, are gone
	VerifyUnfinalized    = "unfinalized"     // the evidence verifies so far, but the run is open and its writer (the caller) is live
	VerifyInterrupted    = "interrupted"     // the run was interrupted: its evidence verifies, sealed (finalized rejected, "interrupted") or waiting for the next writer to seal it
	VerifyOK             = "ok"              // finalized and everything verifies
)

// RunVerification is Verify's finding for one run, or for the store (RunID
// "" and Table set: damage that belongs to no run, a store-wide chain that
// breaks). Status is the most severe finding; Detail lists every finding.
type RunVerification struct {
	RunID       string `json:"run_id"`
	Status      string `json:"status"`        // "ok" | "interrupted" | "unfinalized" | "missing_payload" | "corrupt_payload" | "tampered" | "damaged"
	FirstBadSeq int64  `json:"first_bad_seq"` // first sequence number whose hash (or sequence) does not verify; 0 when n/a
	Detail      string `json:"detail"`        // what failed, e.g. "event 3: hash mismatch; terminal hash mismatch; event count 5 != 6"
	Events      int64  `json:"events"`        // events stored for the run
	// TerminalHash is the stored terminal hash ("" when unfinalized); with
	// Status "ok" or a sealed "interrupted" it is what a manifest records.
	TerminalHash string `json:"terminal_hash"`
	// Table and Row name where a store-level finding (damage, a store-wide
	// chain) is: e.g. "events" and "run_id=r1, seq=3"; "" otherwise.
	Table string `json:"table,omitempty"`
	Row   string `json:"row,omitempty"`
	// Notes are informational findings that do not change Status, e.g.
	// "working copy differs: cases/r1/m1/double.go ...": the artifact in the
	// store is the evidence.
	Notes []string `json:"notes,omitempty"`
	// Manifest is CheckManifest's outcome ("match", "differs", "missing",
	// "added", "finalized_since"); "" when no manifest was checked.
	Manifest string `json:"manifest,omitempty"`
	// Attestation is the outcome of checking the run's signed attestation
	// (package evidence/attest): "verified", "missing", "invalid",
	// "differs", "unknown_run"; "" when none was checked.
	Attestation string `json:"attestation,omitempty"`
}

// Passed reports whether v is a verification that holds: ok, or an
// interrupted run whose evidence verifies (it was never accepted), and no
// manifest or attestation check failed on it.
func (v RunVerification) Passed() bool {
	if v.Status != VerifyOK && v.Status != VerifyInterrupted {
		return false
	}
	switch v.Manifest {
	case "", ManifestMatch, ManifestAdded, ManifestFinalizedSince:
	default:
		return false
	}
	return v.Attestation == "" || v.Attestation == AttestationVerified
}

// Attestation outcomes (RunVerification.Attestation), set by evidence/attest.
const (
	AttestationVerified   = "verified"    // a valid signature over a statement matching the run as stored
	AttestationMissing    = "missing"     // the run is finalized but nobody signed it
	AttestationInvalid    = "invalid"     // the file is not a valid signed statement under the given key
	AttestationDiffers    = "differs"     // validly signed, but the run's evidence changed since
	AttestationUnknownRun = "unknown_run" // an attestation for a run the store lacks
)

func severity(status string) int {
	switch status {
	case VerifyDamaged:
		return 6
	case VerifyTampered:
		return 5
	case VerifyCorruptPayload:
		return 4
	case VerifyMissingPayload:
		return 3
	case VerifyUnfinalized:
		return 2
	case VerifyInterrupted:
		return 1
	}
	return 0
}

type finding struct {
	status string
	detail string
}

// VerifyRequest says what VerifyWith verifies.
type VerifyRequest struct {
	// Runs are the runs to verify; none means every run, deleted ones
	// included.
	Runs []string
	// Bindings recompute the records a run is bound to outside the store
	// (run_bindings), one checker per source. nil verifies the bindings'
	// hashes only, as part of the terminal hash; a source without a checker
	// is then noted as not compared.
	Bindings []BindingChecker
	// WorkingCopy, when set, names the file on disk that holds a copy of an
	// artifact a run links (ok false: none); a file that differs from the
	// artifact, or is gone, is noted "working copy differs" without changing
	// the run's status: the artifact is the evidence.
	WorkingCopy WorkingCopyFunc
}

// WorkingCopyFunc maps an artifact link of run r, whose lineage starts at run
// root (r itself unless r corrects another run), to the path of the file a
// user opens for it, or reports ok false when it has none.
type WorkingCopyFunc func(root string, r RunSummary, link ArtifactLink) (path string, ok bool)

// Verify is VerifyWith for runIDs without external checkers.
func (s *Store) Verify(ctx context.Context, runIDs ...string) ([]RunVerification, error) {
	return s.VerifyWith(ctx, VerifyRequest{Runs: runIDs})
}

// VerifyWith recomputes each named run's (every run's, in creation order,
// when none is named) envelope digest, admission, hash chain, sequence
// continuity, event count, terminal hash, checks and verdict against the
// chained check_recorded and run_finalized events, its entry in the
// finalizations chain, verdict consistency, artifact digests and the records
// it is bound to outside the store (req.Bindings), and reports one
// RunVerification per run. It also checks the store as a whole: its tables
// against the schema, every block readable, no duplicate keys, the file not
// truncated (each problem a VerifyDamaged entry naming the table and row,
// and Verify goes on where it can); the admissions, finalizations and writer
// chains (gaps and broken links are reported on the run, or writer, whose
// entry breaks them); and every run id missing from runs that another table
// or a run's corrects_run_id still names: a deleted run, reported tampered
// on an entry of its own. With runs named, only findings about those runs
// (and damage to the store) are reported; a named run that is missing from
// runs but leaves such traces is reported tampered rather than refused. It
// works on a read-only store and changes nothing in the file.
//
// Detection is against accidental damage and against edits that do not also
// recompute every downstream hash: the hashes are unkeyed, so someone able
// to rewrite the whole file consistently is out of its reach. A manifest
// kept elsewhere (BuildManifest, CheckManifest) and signed attestations
// (evidence/attest) cover that.
//
// Errors: ErrNoRun when a named run neither exists nor leaves traces;
// ErrClosed; ctx's error. A table the engine cannot read is damage, not an
// error.
func (s *Store) VerifyWith(ctx context.Context, req VerifyRequest) ([]RunVerification, error) {
	damage, release, err := s.beginVerify(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var storeLevel []RunVerification
	damagedRun := map[string][]string{} // run id -> damage of its own rows
	var everyRun []string               // damage that concerns every run
	for _, d := range damage {
		storeLevel = append(storeLevel, RunVerification{RunID: d.RunID, Status: VerifyDamaged, Table: d.Table, Row: d.Row, Detail: d.Reason})
		switch {
		case d.RunID != "":
			damagedRun[d.RunID] = append(damagedRun[d.RunID], fmt.Sprintf("damaged: %s (%s): %s", d.Table, d.Row, d.Reason))
		case d.Table == "" || !strings.Contains(d.Reason, "not part of schema"):
			what := "the file"
			if d.Table != "" {
				what = "table " + d.Table
			}
			everyRun = append(everyRun, fmt.Sprintf("damaged: %s: %s", what, d.Reason))
		}
	}
	chain, missing, chainLevel, err := s.storeFindings(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		storeLevel = append(storeLevel, RunVerification{Status: VerifyDamaged, Detail: "the store-wide chains cannot be read: " + engineReason(err)})
		everyRun = append(everyRun, "damaged: the store-wide chains cannot be read")
	}
	storeLevel = append(storeLevel, chainLevel...)
	missingByID := map[string]RunVerification{}
	for _, m := range missing {
		missingByID[m.RunID] = m
	}
	runIDs := req.Runs
	named := len(runIDs) > 0
	if !named {
		rows, err := s.conn.QueryContext(ctx, `SELECT run_id FROM runs ORDER BY ordinal`)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return append(storeLevel, RunVerification{Status: VerifyDamaged, Table: "runs", Detail: "the runs cannot be listed: " + engineReason(err)}), nil
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
			}
			runIDs = append(runIDs, id)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
		}
	}
	var summaries map[string]*RunSummary
	var tables map[string]map[string][]json.RawMessage
	if !named && len(runIDs) > 1 {
		summaries = summariesByRun(ctx, s.conn)
		tables = terminalRowsByRun(ctx, s.conn)
	}
	checkers := map[string]BindingChecker{}
	for _, c := range req.Bindings {
		checkers[c.Source()] = c
	}
	out := make([]RunVerification, 0, len(storeLevel)+len(runIDs)+len(missing))
	out = append(out, storeLevel...)
	for _, id := range runIDs {
		extra := append(append([]string(nil), everyRun...), damagedRun[id]...)
		pre := runReads{summary: summaries[id], tables: tables[id]}
		if tables != nil && pre.tables == nil {
			pre.tables = emptyTerminalRows() // the run holds no such rows
		}
		v, err := s.verifyRun(ctx, id, pre, chain[id], extra, req, checkers)
		if errors.Is(err, ErrNoRun) && named {
			if m, ok := missingByID[id]; ok {
				out = append(out, m)
				continue
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrNoRun):
			return nil, err
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			detail := append(extra, "its evidence cannot be read ("+engineReason(err)+")")
			v = RunVerification{RunID: id, Status: VerifyDamaged, Detail: strings.Join(detail, "; ")}
		}
		out = append(out, v)
	}
	if !named {
		out = append(out, missing...)
	}
	return out, nil
}

// StoreFindings is the part of VerifyWith that concerns the store as a whole, without verifying
// any run's own evidence: damage to the file or its tables, breaks in the store-wide chains
// (admissions, finalizations, writer sessions) — attributed to the run whose entry broke, or to
// none — and runs the chains name that the store no longer holds. Each is a RunVerification with
// Status VerifyDamaged or VerifyTampered, in that order; none when the store verifies. A reader
// that verifies a selection of runs (VerifyWith with Runs) calls it so that a run erased
// elsewhere in the store is never missed. Works on a read-only store.
//
// Errors: ErrClosed; ctx's error; the engine's errors reading the schema (a chain that cannot be
// read is a VerifyDamaged finding, not an error).
func (s *Store) StoreFindings(ctx context.Context) ([]RunVerification, error) {
	damage, release, err := s.beginVerify(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	out := []RunVerification{}
	for _, d := range damage {
		out = append(out, RunVerification{RunID: d.RunID, Status: VerifyDamaged, Table: d.Table, Row: d.Row, Detail: d.Reason})
	}
	chain, missing, chainLevel, err := s.storeFindings(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return append(out, RunVerification{Status: VerifyDamaged, Detail: "the store-wide chains cannot be read: " + engineReason(err)}), nil
	}
	out = append(out, chainLevel...)
	ids := make([]string, 0, len(chain))
	for id, fs := range chain {
		if len(fs) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		status, details := VerifyTampered, []string{}
		for _, f := range chain[id] {
			details = append(details, f.detail)
			if f.status == VerifyDamaged {
				status = VerifyDamaged
			}
		}
		out = append(out, RunVerification{RunID: id, Status: status, Detail: strings.Join(details, "; ")})
	}
	return append(out, missing...), nil
}

// beginVerify begins a read of the store for a verification and scans it for damage (damageScan);
// release drops the scan's stand-ins and ends the read. On error nothing is held.
func (s *Store) beginVerify(ctx context.Context) (damage []Damage, release func(), err error) {
	if err := s.beginRead(); err != nil {
		return nil, nil, err
	}
	damage, standIns, err := s.damageScan(ctx)
	if err != nil {
		s.mu.Unlock()
		return nil, nil, err
	}
	return damage, func() {
		s.dropStandIns(context.WithoutCancel(ctx), standIns)
		s.mu.Unlock()
	}, nil
}
