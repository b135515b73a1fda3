package evidence

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
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
	re := &runEvidence{}
	err := q.QueryRowContext(ctx, `SELECT status, ordinal, event_count, terminal_hash, finalized_at,
			(SELECT count(*) FROM envelopes e WHERE e.run_id = r.run_id) > 0,
			(SELECT min(v.requested_verdict) FROM verdicts v WHERE v.run_id = r.run_id),
			(SELECT min(v.decided_at) FROM verdicts v WHERE v.run_id = r.run_id)
		FROM runs r WHERE run_id = ?`, runID).Scan(&re.status, &re.ordinal, &re.storedCount, &re.terminal, &re.finalizedAt,
		&re.hasEnvelope, &re.requested, &re.decidedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: load run %s: %w", runID, err)
	}
	runs, err := loadRuns(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	if len(runs) != 1 {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	re.summary = runs[0]
	if re.admission, err = loadAdmission(ctx, q, runID); err != nil {
		return nil, err
	}
	if re.chain, err = s.verifyChainStream(ctx, runID); err != nil {
		return nil, err
	}
	if re.tables, err = loadTerminalRows(ctx, q, runID); err != nil {
		return nil, err
	}
	if re.writerID, re.writer, err = writerOfRun(ctx, q, runID); err != nil {
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

// chainResult is what a pass over a run's stored events found.
type chainResult struct {
	count    int64              // events stored
	maxSeq   int64              // highest seq stored
	lastHash string             // stored hash of the event with the highest seq
	firstBad int64              // first seq whose hash, link, parent, payload or sequence does not verify; 0 = none
	detail   string             // what failed at firstBad
	refs     map[string][]int64 // artifact digest -> seqs of events whose payload references it (*_artifact keys)
	// storeEvents are the events of the types only the store writes
	// (check_recorded, run_finalized), in seq order.
	storeEvents []storeEvent
}

// storeEvent is a check_recorded or run_finalized event as stored.
type storeEvent struct {
	seq     int64
	typ     string
	payload string
	time    time.Time
}

// chainRow is one stored event as read for verification.
type chainRow struct {
	ev      StoredEvent
	payload string
}

// verifyChainStream recomputes run runID's hash chain from the stored rows
// without holding the trace in memory: rows are read in storage order
// (normally seq order) and checked as soon as their predecessor is; rows that
// arrive early wait in a map. It checks, for seq 1..n: no gap or duplicate,
// prev_hash = the previous event's stored hash, 0 <= parent < seq, the
// payload is a JSON object in RFC 8785 canonical form (the store never writes
// another), and hash = EventHash. Must be called with s.mu held; it runs in
// the connection's current transaction, if any.
func (s *Store) verifyChainStream(ctx context.Context, runID string) (chainResult, error) {
	res := chainResult{refs: map[string][]int64{}}
	var (
		expected = int64(1)
		prev     [32]byte
		maxSeq   int64
		pending  = map[int64]chainRow{}
		seen     = map[int64]bool{} // only for seqs at or beyond a gap (pending), duplicates before are caught by expected
	)
	bad := func(seq int64, format string, args ...any) {
		if res.firstBad == 0 {
			res.firstBad = seq
			res.detail = fmt.Sprintf("event %d: ", seq) + fmt.Sprintf(format, args...)
		}
	}
	check := func(r chainRow) {
		e := r.ev
		if res.firstBad != 0 {
			return
		}
		if e.PrevHash != hex.EncodeToString(prev[:]) {
			bad(e.Seq, "prev_hash does not link to event %d", e.Seq-1)
			return
		}
		if e.Parent < 0 || e.Parent >= e.Seq {
			bad(e.Seq, "parent %d is not an earlier event", e.Parent)
			return
		}
		canon, reason := canonicalObject([]byte(r.payload))
		if reason != "" {
			bad(e.Seq, "payload is not a JSON object (%s)", reason)
			return
		}
		if string(canon) != r.payload {
			bad(e.Seq, "payload is not in the canonical form the store writes (hash mismatch)")
			return
		}
		collectArtifactRefs(canon, e.Seq, res.refs)
		sum, err := s.hasher.eventHash(&prev, e, canon)
		if err != nil {
			bad(e.Seq, "cannot recompute hash: %v", err)
			return
		}
		if hex.EncodeToString(sum[:]) != e.Hash {
			bad(e.Seq, "hash mismatch")
			return
		}
		prev = sum
	}
	err := s.conn.Raw(func(dc any) error {
		qc, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		rows, err := qc.QueryContext(ctx, `SELECT seq, parent, type, member_id, session_id, time, CAST(payload AS VARCHAR), prev_hash, hash
			FROM events WHERE run_id = $1`, []driver.NamedValue{{Ordinal: 1, Value: runID}})
		if err != nil {
			return err
		}
		defer rows.Close()
		dest := make([]driver.Value, 9)
		for {
			if err := rows.Next(dest); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			var r chainRow
			var ok [9]bool
			r.ev.RunID = runID
			r.ev.Seq, ok[0] = dest[0].(int64)
			r.ev.Parent, ok[1] = dest[1].(int64)
			r.ev.Type, ok[2] = dest[2].(string)
			r.ev.MemberID, ok[3] = dest[3].(string)
			r.ev.SessionID, ok[4] = dest[4].(string)
			r.ev.Time, ok[5] = dest[5].(time.Time)
			r.payload, ok[6] = dest[6].(string)
			r.ev.PrevHash, ok[7] = dest[7].(string)
			r.ev.Hash, ok[8] = dest[8].(string)
			for i, k := range ok {
				if !k {
					return fmt.Errorf("event row: column %d has type %T", i, dest[i])
				}
			}
			r.ev.Payload = json.RawMessage(r.payload)
			res.count++
			if r.ev.Seq >= maxSeq {
				maxSeq, res.lastHash = r.ev.Seq, r.ev.Hash
			}
			if storeEventTypes[r.ev.Type] {
				res.storeEvents = append(res.storeEvents, storeEvent{seq: r.ev.Seq, typ: r.ev.Type, payload: r.payload, time: r.ev.Time.UTC()})
			}
			switch {
			case r.ev.Seq < expected || seen[r.ev.Seq]:
				bad(r.ev.Seq, "duplicate seq %d", r.ev.Seq)
			case r.ev.Seq == expected:
				check(r)
				expected++
				for {
					p, ok := pending[expected]
					if !ok {
						break
					}
					delete(pending, expected)
					check(p)
					expected++
				}
			default:
				seen[r.ev.Seq] = true
				pending[r.ev.Seq] = r
			}
		}
	})
	if err != nil {
		return chainResult{}, fmt.Errorf("evidence: read events of run %s: %w", runID, err)
	}
	res.maxSeq = maxSeq
	sort.Slice(res.storeEvents, func(i, j int) bool { return res.storeEvents[i].seq < res.storeEvents[j].seq })
	if len(pending) > 0 {
		next := int64(-1)
		for seq := range pending {
			if next < 0 || seq < next {
				next = seq
			}
		}
		// A gap is the first failure in seq order, whatever was found after it.
		if res.firstBad == 0 || expected < res.firstBad {
			res.firstBad, res.detail = expected, fmt.Sprintf("event %d: missing (sequence gap, next stored seq is %d)", expected, next)
		}
	}
	return res, nil
}

// collectArtifactRefs records, for each top-level payload key named
// "artifact" or ending in "_artifact" whose value is a SHA-256 hex string,
// that event seq references that artifact digest.
func collectArtifactRefs(canon []byte, seq int64, refs map[string][]int64) {
	if !bytes.Contains(canon, []byte(`artifact"`)) {
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(canon, &m) != nil {
		return
	}
	for k, v := range m {
		if k != "artifact" && !strings.HasSuffix(k, "_artifact") {
			continue
		}
		var d string
		if json.Unmarshal(v, &d) == nil && isDigest(d) {
			refs[d] = append(refs[d], seq)
		}
	}
}

// integrityFindings checks what must hold for any run, finalized or not: the
// envelope digest, the run's admission, the hash chain, the checks table
// against the chained check_recorded events, checkpoints and the artifact
// payloads.
func (s *Store) integrityFindings(ctx context.Context, q queryer, re *runEvidence) ([]finding, error) {
	var out []finding
	if !re.hasEnvelope {
		out = append(out, finding{VerifyTampered, "envelope missing"})
	} else if d, err := re.summary.Envelope.Digest(); err != nil || d != re.summary.EnvelopeDigest {
		out = append(out, finding{VerifyTampered, "envelope digest mismatch"})
	}
	out = append(out, admissionFindings(re)...)
	if re.chain.firstBad != 0 {
		out = append(out, finding{VerifyTampered, re.chain.detail})
	}
	if re.chained() {
		out = append(out, checkEventFindings(re)...)
	} else {
		out = append(out, backfilledEventFindings(re)...)
	}
	cps, err := checkpointFindings(ctx, q, re)
	if err != nil {
		return nil, err
	}
	out = append(out, cps...)
	checked := map[string]error{}
	for _, l := range re.summary.Artifacts {
		err, done := checked[l.Digest]
		if !done {
			_, err = s.readArtifact(ctx, q, l.Digest)
			checked[l.Digest] = err
		}
		if err == nil {
			continue
		}
		var ae *ArtifactError
		switch {
		case errors.As(err, &ae) && errors.Is(err, ErrArtifactCorrupt):
			out = append(out, finding{VerifyCorruptPayload, fmt.Sprintf("artifact %s: %v", l.Name, err)})
		case errors.As(err, &ae):
			out = append(out, finding{VerifyMissingPayload, fmt.Sprintf("artifact %s: %v", l.Name, err)})
		default:
			return nil, err
		}
	}
	return out, nil
}

// checkpointFindings recomputes each checkpoint's hash from its stored state
// and checks the event it follows still has the hash recorded with it.
func checkpointFindings(ctx context.Context, q queryer, re *runEvidence) ([]finding, error) {
	rows, err := q.QueryContext(ctx, `SELECT c.seq, CAST(c.state AS VARCHAR), c.hash, coalesce(c.event_hash, ''),
			CASE WHEN c.seq = 0 THEN ? ELSE e.hash END
		FROM checkpoints c LEFT JOIN events e ON e.run_id = c.run_id AND e.seq = c.seq
		WHERE c.run_id = ? ORDER BY c.seq`, ZeroHash, re.summary.RunID)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify checkpoints of run %s: %w", re.summary.RunID, err)
	}
	defer rows.Close()
	var out []finding
	for rows.Next() {
		var seq int64
		var state, hash, eventHash string
		var current sql.NullString
		if err := rows.Scan(&seq, &state, &hash, &eventHash, &current); err != nil {
			return nil, fmt.Errorf("evidence: verify checkpoints of run %s: %w", re.summary.RunID, err)
		}
		if h, err := CheckpointHash(re.summary.RunID, seq, eventHash, re.summary.EnvelopeDigest, json.RawMessage(state)); err != nil || h != hash {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("checkpoint after event %d: hash mismatch", seq)})
		} else if current.String != eventHash {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("checkpoint after event %d: the event it follows has changed", seq)})
		}
	}
	return out, rows.Err()
}

// reconcileProblems names where a run's events, artifacts and usage do not
// reconcile with each other (evidence that verifies byte for byte but does
// not describe one consistent history): an event payload referencing (under
// a key "artifact" or "*_artifact") an artifact digest not linked to the run;
// usage recorded for a session without a usage verdict; a stored usage
// verdict that differs from what the run's recorded usage reconciles to.
func reconcileProblems(re *runEvidence) []string {
	var out []string
	linked := map[string]bool{}
	for _, l := range re.summary.Artifacts {
		linked[l.Digest] = true
	}
	var digests []string
	for d := range re.chain.refs {
		if !linked[d] {
			digests = append(digests, d)
		}
	}
	sort.Strings(digests)
	for _, d := range digests {
		out = append(out, fmt.Sprintf("event %d references artifact sha256:%s, which is not linked to the run", re.chain.refs[d][0], d))
	}
	recomputed := ReconcileUsageCalls(re.summary.UsageCalls, re.summary.Usage)
	stored := map[string]UsageVerdict{}
	for _, v := range re.summary.UsageVerdicts {
		stored[v.SessionID] = v
	}
	for _, rv := range recomputed {
		sv, ok := stored[rv.SessionID]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("usage of session %s recorded but never reconciled", rv.SessionID))
		case sv.Verdict != rv.Verdict:
			out = append(out, fmt.Sprintf("usage verdict of session %s is %s but its recorded usage reconciles to %s", rv.SessionID, sv.Verdict, rv.Verdict))
		}
	}
	return out
}

// finalizationFindings checks a run's status and finalization record
// against its evidence: an open run is live (unfinalized, to its own writer)
// or interrupted; an interrupted run is sealed or waiting for the next writer
// to seal it; a finalized or sealed run has an event count, a verdict, a
// terminal hash and an entry in the finalizations chain that all verify. A
// status that says open or interrupted while anything records a finalization
// is a status change on a finalized run: tampering, not a crash. live
// reports whether the caller is the writer that opened the run.
func finalizationFindings(re *runEvidence, live bool) []finding {
	out := finalizedEventFindings(re)
	s := re.summary
	var last *StatusChange
	if n := len(s.StatusChanges); n > 0 {
		last = &s.StatusChanges[n-1]
	}
	recorded := re.finalizationRecorded()
	switch {
	case re.status == StatusOpen && recorded:
		return append(out, finding{VerifyTampered, "run status is open, but the run was finalized (" + finalizationTraces(re) +
			"): a status change on a finalized run"})
	case re.status == StatusOpen && last != nil:
		return append(out, finding{VerifyTampered, fmt.Sprintf("run status is open, but status change %d says it became %s: %s", len(s.StatusChanges), last.To, last.Reason)})
	case re.status == StatusOpen && live:
		return append(out, finding{VerifyUnfinalized, "run is open, not finalized"})
	case re.status == StatusOpen:
		who := "its writer"
		if w := re.writer; w != nil {
			who = fmt.Sprintf("its writer (session %d)", w.WriterID)
		}
		return append(out, finding{VerifyInterrupted, fmt.Sprintf("interrupted: the run is open but no writer holds the store: %s ended without finalizing it; "+
			"its %d recorded events verify; the next writer seals it", who, re.chain.count)})
	case re.status == StatusInterrupted && (last == nil || last.To != StatusInterrupted):
		return append(out, finding{VerifyTampered, "run is interrupted but no status change records its interruption"})
	case re.status == StatusInterrupted && !recorded:
		return append(out, finding{VerifyInterrupted, fmt.Sprintf("%s at %s, not sealed yet (the next writer seals it); its %d recorded events verify",
			last.Reason, last.At.Format(time.RFC3339), re.chain.count)})
	case re.status != StatusInterrupted && re.status != StatusFinalized:
		return append(out, finding{VerifyTampered, fmt.Sprintf("run status %q is not a status", re.status)})
	}
	// Finalized, or sealed as interrupted.
	actual := re.chain.count
	switch {
	case !re.storedCount.Valid:
		out = append(out, finding{VerifyTampered, "event count missing"})
	case re.storedCount.Int64 != actual:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("event count %d != %d", re.storedCount.Int64, actual)})
	}
	if !re.finalizedAt.Valid {
		out = append(out, finding{VerifyTampered, "finalization time missing"})
	}
	if s.Verdict == nil {
		return append(out, finding{VerifyTampered, "verdict missing"})
	}
	version := s.TerminalVersion
	switch {
	case !re.terminal.Valid:
		out = append(out, finding{VerifyTampered, "terminal hash missing"})
	case version != TerminalV1 && version != TerminalV2 && version != TerminalV3 && version != TerminalV5:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("terminal hash version %d unknown", version)})
	default:
		if th, err := TerminalHash(re.terminalRecord(*s.Verdict, version)); err != nil || th != re.terminal.String {
			out = append(out, finding{VerifyTampered, "terminal hash mismatch"})
		}
	}
	out = append(out, finalizationEntryFindings(re)...)
	if version == TerminalV5 {
		out = append(out, timeFindings(re)...)
	}
	if re.status == StatusInterrupted {
		switch {
		case version != TerminalV5:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run is sealed as interrupted with terminal version %d; seals are version %d", version, TerminalV5)})
		case s.Verdict.Verdict != VerdictRejected || len(s.Verdict.Reasons) == 0 || s.Verdict.Reasons[0] != ReasonInterrupted:
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run is sealed as interrupted, but its verdict is %s (%s), not rejected for the reason %q",
				s.Verdict.Verdict, strings.Join(s.Verdict.Reasons, "; "), ReasonInterrupted)})
		}
		sealedBy := "a later writer"
		if re.finalization != nil && re.finalization.WriterID != nil {
			sealedBy = fmt.Sprintf("writer %d", *re.finalization.WriterID)
		}
		out = append(out, finding{VerifyInterrupted, fmt.Sprintf("%s; sealed by %s at %s: rejected, %d events, terminal hash verified",
			last.Reason, sealedBy, re.finalizedAt.Time.UTC().Format(time.RFC3339), actual)})
	}
	if s.Verdict.Verdict == VerdictAccepted {
		// Re-apply Finalize's rules: an accepted verdict the evidence does not
		// support was not written by Finalize.
		if re.status != StatusFinalized {
			out = append(out, finding{VerifyTampered, "verdict accepted on a run that is not finalized"})
		}
		if s.Envelope.Mode != ModeLive {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("verdict accepted contradicts envelope mode %q", s.Envelope.Mode)})
		}
		for _, p := range checkProblems(s.Checks) {
			out = append(out, finding{VerifyTampered, "verdict accepted contradicts " + p})
		}
		if version != TerminalV1 {
			for _, p := range reconcileProblems(re) {
				out = append(out, finding{VerifyTampered, "verdict accepted contradicts: " + p})
			}
		}
	}
	return out
}

// finalizationTraces names what records a finalization of the run.
func finalizationTraces(re *runEvidence) string {
	var parts []string
	if re.terminal.Valid {
		parts = append(parts, "a terminal hash")
	}
	if re.storedCount.Valid {
		parts = append(parts, "an event count")
	}
	if re.finalizedAt.Valid {
		parts = append(parts, "a finalization time")
	}
	if re.summary.Verdict != nil {
		parts = append(parts, "a verdict")
	}
	if re.finalization != nil {
		parts = append(parts, fmt.Sprintf("finalization %d", re.finalization.Ordinal))
	}
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized {
			parts = append(parts, fmt.Sprintf("a run_finalized event (seq %d)", e.seq))
			break
		}
	}
	return strings.Join(parts, ", ")
}

// finalizationEntryFindings compares a finalized or sealed run with its
// entry in the finalizations chain.
func finalizationEntryFindings(re *runEvidence) []finding {
	f := re.finalization
	if f == nil {
		return []finding{{VerifyTampered, "no entry in the finalizations chain records the run's finalization"}}
	}
	var diffs []string
	if f.Status != re.status {
		diffs = append(diffs, fmt.Sprintf("status %s (runs.status %s)", f.Status, re.status))
	}
	if f.TerminalHash != re.terminal.String {
		diffs = append(diffs, "terminal hash")
	}
	if !re.finalizedAt.Valid || !f.FinalizedAt.Equal(re.finalizedAt.Time) {
		diffs = append(diffs, "finalization time (runs.finalized_at)")
	}
	var out []finding
	if len(diffs) > 0 {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d differs from the runs row in %s", f.Ordinal, strings.Join(diffs, ", "))})
	}
	if h, err := FinalizationHash(f.PrevHash, *f); err != nil || h != f.Hash {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d: hash mismatch", f.Ordinal)})
	}
	switch v := re.summary.TerminalVersion; {
	case v == TerminalV5 && f.Backfilled:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d is marked backfilled, but the run was finalized under schema 5", f.Ordinal)})
	case v != TerminalV5 && !f.Backfilled:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("finalization %d was chained under schema 5, but the run's terminal version is %d, not %d",
			f.Ordinal, v, TerminalV5)})
	}
	return out
}

// timeFindings checks, for a run finalized under terminal version 5, that the
// times other tables record are the ones its hash chain covers:
// runs.finalized_at and verdicts.decided_at are the run_finalized event's
// time, and (for a run its writer admitted under schema 5) each check's
// recorded_at is its check_recorded event's time.
func timeFindings(re *runEvidence) []finding {
	var out []finding
	if re.finalizedAt.Valid && (!re.decidedAt.Valid || !re.decidedAt.Time.Equal(re.finalizedAt.Time)) {
		out = append(out, finding{VerifyTampered, "verdicts.decided_at differs from runs.finalized_at"})
	}
	if !re.chained() {
		return out
	}
	for _, e := range re.chain.storeEvents {
		if e.typ == EventRunFinalized && re.finalizedAt.Valid && !e.time.Equal(re.finalizedAt.Time) {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("runs.finalized_at differs from the time of its run_finalized event (seq %d)", e.seq)})
		}
	}
	if re.writer == nil || re.writer.Backfilled {
		return out
	}
	for _, e := range re.chain.storeEvents {
		if e.typ != EventCheckRecorded {
			continue
		}
		var p checkRecordedPayload
		if json.Unmarshal([]byte(e.payload), &p) != nil {
			continue
		}
		if at, ok := re.checkTimes[p.Name]; ok && !at.Equal(e.time) {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("check %s: recorded_at differs from the time of its check_recorded event (seq %d)", p.Name, e.seq)})
		}
	}
	return out
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
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	damage, standIns, err := s.damageScan(ctx)
	if err != nil {
		return nil, err
	}
	defer s.dropStandIns(context.WithoutCancel(ctx), standIns)
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
	checkers := map[string]BindingChecker{}
	for _, c := range req.Bindings {
		checkers[c.Source()] = c
	}
	out := make([]RunVerification, 0, len(storeLevel)+len(runIDs)+len(missing))
	out = append(out, storeLevel...)
	for _, id := range runIDs {
		extra := append(append([]string(nil), everyRun...), damagedRun[id]...)
		v, err := s.verifyRun(ctx, id, chain[id], extra, req, checkers)
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

// verifyRun verifies one run; store holds the store-wide findings about it
// (its place in the admissions and finalizations chains) and damage the
// damage scan found that concerns it.
func (s *Store) verifyRun(ctx context.Context, runID string, store []finding, damage []string, req VerifyRequest,
	checkers map[string]BindingChecker) (RunVerification, error) {
	re, err := s.loadRunEvidence(ctx, s.conn, runID)
	if err != nil {
		return RunVerification{}, err
	}
	findings, err := s.integrityFindings(ctx, s.conn, re)
	if err != nil {
		return RunVerification{}, err
	}
	for _, d := range damage {
		findings = append(findings, finding{VerifyDamaged, d})
	}
	findings = append(findings, store...)
	live := s.writerID != 0 && re.summary.WriterID == s.writerID
	findings = append(findings, finalizationFindings(re, live)...)
	bf, notes, err := s.bindingFindings(ctx, re, req.Bindings != nil, checkers)
	if err != nil {
		return RunVerification{}, err
	}
	findings = append(findings, bf...)
	if req.WorkingCopy != nil {
		notes = append(notes, s.workingCopyNotes(ctx, re, req.WorkingCopy)...)
	}
	v := RunVerification{RunID: runID, Status: VerifyOK, Events: re.chain.count, TerminalHash: re.terminal.String, Notes: notes}
	v.FirstBadSeq = re.chain.firstBad
	var details []string
	for _, f := range findings {
		if severity(f.status) > severity(v.Status) {
			v.Status = f.status
		}
		details = append(details, f.detail)
	}
	if len(details) == 0 {
		v.Detail = fmt.Sprintf("%d events, %d artifacts, terminal hash verified", re.chain.count, len(re.summary.Artifacts))
	} else {
		v.Detail = strings.Join(details, "; ")
	}
	return v, nil
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
