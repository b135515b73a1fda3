package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// runEvidence is everything stored about one run, as read for verification.
type runEvidence struct {
	summary     RunSummary
	chain       chainResult
	status      string
	ordinal     int64
	storedCount sql.NullInt64
	terminal    sql.NullString
	finalizedAt sql.NullTime
	hasEnvelope bool
	requested   sql.NullString // verdicts.requested_verdict; NULL without a verdicts row
	decidedAt   sql.NullTime   // verdicts.decided_at
	admission   *Admission     // nil when the run has none
	// finalization is the run's entry in the finalizations chain; nil when none.
	finalization *Finalization
	// writerID is runs.writer_id (nil when NULL); writer its session (nil when missing).
	writerID *int64
	writer   *Writer
	// tables are the run's rows terminal hash v5 covers (loadTerminalRows).
	tables map[string][]json.RawMessage
	// checkTimes are checks.recorded_at by check name.
	checkTimes map[string]time.Time
}

// chained reports whether the run's checks and verdict are in its hash chain
// (check_recorded, run_finalized): true for every run admitted under schema
// v3, whose admission is not Backfilled. A run without an admission is
// treated as chained, so deleting its admission does not excuse it.
func (re *runEvidence) chained() bool {
	return re.admission == nil || !re.admission.Backfilled
}

// sealed reports a run finalized as interrupted by a later writer.
func (re *runEvidence) sealed() bool {
	return re.status == StatusInterrupted && re.finalizationRecorded()
}

// finalizationRecorded reports whether anything records a finalization of
// the run: a terminal hash, event count or time, a verdict, an entry in the
// finalizations chain, or a run_finalized event.
func (re *runEvidence) finalizationRecorded() bool {
	if re.terminal.Valid || re.storedCount.Valid || re.finalizedAt.Valid || re.summary.Verdict != nil || re.finalization != nil {
		return true
	}
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized {
			return true
		}
	}
	return false
}

func (s *Store) loadRunEvidence(ctx context.Context, q queryer, runID string) (*runEvidence, error) {
	return s.loadRunEvidenceWith(ctx, q, runID, runReads{})
}

// runReads is what a verification of every run has already read about one of them, in one pass
// over all runs, instead of one pass per run; a nil field is read for the run alone.
type runReads struct {
	summary *RunSummary                  // its summary (loadRuns; summariesByRun)
	tables  map[string][]json.RawMessage // its rows terminal hash v5 covers (loadTerminalRows; terminalRowsByRun)
}

// loadRunEvidenceWith is loadRunEvidence with what pre holds already read.
func (s *Store) loadRunEvidenceWith(ctx context.Context, q queryer, runID string, pre runReads) (*runEvidence, error) {
	summary := pre.summary
	re := &runEvidence{}
	// Uncorrelated scalar subqueries rather than joins on grouped subqueries: the same rows, about
	// half the planning and execution per run.
	var writerID sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT r.status, r.ordinal, r.event_count, r.terminal_hash, r.finalized_at, r.writer_id,
			EXISTS (SELECT 1 FROM envelopes WHERE run_id = $1),
			(SELECT min(requested_verdict) FROM verdicts WHERE run_id = $1),
			(SELECT min(decided_at) FROM verdicts WHERE run_id = $1)
		FROM runs r WHERE r.run_id = $1`, runID).Scan(&re.status, &re.ordinal, &re.storedCount, &re.terminal, &re.finalizedAt,
		&writerID, &re.hasEnvelope, &re.requested, &re.decidedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: load run %s: %w", runID, err)
	}
	if summary != nil {
		re.summary = *summary
	} else {
		runs, err := loadRuns(ctx, q, runID)
		if err != nil {
			return nil, err
		}
		if len(runs) != 1 {
			return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
		}
		re.summary = runs[0]
	}
	if re.admission, err = loadAdmission(ctx, q, runID); err != nil {
		return nil, err
	}
	if re.chain, err = s.verifyChainStream(ctx, runID); err != nil {
		return nil, err
	}
	if re.tables = pre.tables; re.tables == nil {
		if re.tables, err = loadTerminalRows(ctx, q, runID); err != nil {
			return nil, err
		}
	}
	if re.writerID, re.writer, err = writerOfRun(ctx, q, runID, writerID); err != nil {
		return nil, err
	}
	var f Finalization
	var wid sql.NullInt64
	err = q.QueryRowContext(ctx, `SELECT ordinal, run_id, status, terminal_hash, writer_id, finalized_at, backfilled, prev_hash, hash
		FROM finalizations WHERE run_id = ?`, runID).Scan(&f.Ordinal, &f.RunID, &f.Status, &f.TerminalHash, &wid, &f.FinalizedAt,
		&f.Backfilled, &f.PrevHash, &f.Hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("evidence: run %s: finalization: %w", runID, err)
	default:
		if wid.Valid {
			v := wid.Int64
			f.WriterID = &v
		}
		f.FinalizedAt = f.FinalizedAt.UTC()
		re.finalization = &f
	}
	rows, err := q.QueryContext(ctx, `SELECT name, recorded_at FROM checks WHERE run_id = ?`, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: run %s: check times: %w", runID, err)
	}
	defer rows.Close()
	re.checkTimes = map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return nil, fmt.Errorf("evidence: run %s: check times: %w", runID, err)
		}
		re.checkTimes[name] = at.UTC()
	}
	return re, rows.Err()
}

// summariesByRun reads every run's summary in one loadRuns pass and returns those of the runs
// that have exactly one (what loadRuns of that run alone returns); a run with none or several, as
// a damaged store may give, is left out, for loadRunEvidence to read on its own. nil when the pass
// fails: each run is then read on its own, and any error is its own.
func summariesByRun(ctx context.Context, q queryer) map[string]*RunSummary {
	runs, err := loadRuns(ctx, q, "")
	if err != nil {
		return nil
	}
	n := map[string]int{}
	for _, r := range runs {
		n[r.RunID]++
	}
	out := make(map[string]*RunSummary, len(runs))
	for i := range runs {
		if n[runs[i].RunID] == 1 {
			out[runs[i].RunID] = &runs[i]
		}
	}
	return out
}

// lastHash is the stored hash of the last event, ZeroHash for an empty trace.
func (re *runEvidence) lastHash() string {
	if re.chain.count == 0 {
		return ZeroHash
	}
	return re.chain.lastHash
}

// terminalRecord is what the run's terminal hash covers under version, with
// verdict v; for TerminalV5 the status, finalization time and requested
// verdict are the stored ones (Finalize sets its own).
func (re *runEvidence) terminalRecord(v Verdict, version int) TerminalRecord {
	admission := re.summary.AdmissionHash
	if admission == "" {
		// A run without an admission is reported tampered; its terminal
		// record still has a definite value.
		admission = ZeroHash
	}
	rec := TerminalRecord{
		AdmissionHash:  admission,
		Version:        version,
		RunID:          re.summary.RunID,
		CorrectsRunID:  re.summary.CorrectsRunID,
		EnvelopeDigest: re.summary.EnvelopeDigest,
		LastEventHash:  re.lastHash(),
		EventCount:     re.chain.count,
		Artifacts:      re.summary.Artifacts,
		Checks:         re.summary.Checks,
		Usage:          re.summary.Usage,
		UsageCalls:     re.summary.UsageCalls,
		UsageVerdicts:  re.summary.UsageVerdicts,
		Checkpoints:    re.summary.Checkpoints,
		Verdict:        v,
	}
	if version == TerminalV5 {
		rec.Status, rec.RequestedVerdict, rec.Tables = re.status, re.requested.String, re.tables
		rec.FinalizedAt = re.finalizedAt.Time
		rec.WriterID = re.writerID
		if re.writer != nil {
			rec.WriterHash = re.writer.Hash
		}
	}
	return rec
}

// TerminalRecord returns what run runID's terminal hash covers, read from
// the store as it is now, under the run's terminal version (TerminalV5 for a
// run not finalized): TerminalHash of it is the terminal hash the stored
// evidence yields. It is how an auditor recomputes a terminal hash without
// reimplementing the row encoding. A run without a verdict gets an empty one.
// Errors: ErrNoRun; ErrClosed; database errors.
func (s *Store) TerminalRecord(ctx context.Context, runID string) (TerminalRecord, error) {
	if err := s.beginRead(); err != nil {
		return TerminalRecord{}, err
	}
	defer s.mu.Unlock()
	re, err := s.loadRunEvidence(ctx, s.conn, runID)
	if err != nil {
		return TerminalRecord{}, err
	}
	version := re.summary.TerminalVersion
	if version == 0 {
		version = TerminalV5
	}
	v := Verdict{}
	if re.summary.Verdict != nil {
		v = *re.summary.Verdict
	}
	return re.terminalRecord(v, version), nil
}
