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
	VerifyTampered       = "tampered"        // hash chain, sequence, event count, envelope, terminal hash, check/verdict events or admissions do not verify, or the run was deleted
	VerifyCorruptPayload = "corrupt_payload" // an artifact's payload no longer hashes to its digest
	VerifyMissingPayload = "missing_payload" // an artifact's payload is gone
	VerifyUnfinalized    = "unfinalized"     // the evidence verifies so far, but the run is not finalized
	VerifyOK             = "ok"              // finalized and everything verifies
)

// RunVerification is Verify's finding for one run. Status is the most severe
// finding; Detail lists every finding.
type RunVerification struct {
	RunID       string `json:"run_id"`
	Status      string `json:"status"`        // "ok" | "tampered" | "unfinalized" | "missing_payload" | "corrupt_payload"
	FirstBadSeq int64  `json:"first_bad_seq"` // first sequence number whose hash (or sequence) does not verify; 0 when n/a
	Detail      string `json:"detail"`        // what failed, e.g. "event 3: hash mismatch; terminal hash mismatch; event count 5 != 6"
	Events      int64  `json:"events"`        // events stored for the run
	// TerminalHash is the stored terminal hash ("" when unfinalized); with
	// Status "ok" it is what a manifest records.
	TerminalHash string `json:"terminal_hash"`
	// Manifest is CheckManifest's outcome ("match", "differs", "missing",
	// "unlisted"); "" when no manifest was checked.
	Manifest string `json:"manifest,omitempty"`
}

func severity(status string) int {
	switch status {
	case VerifyTampered:
		return 4
	case VerifyCorruptPayload:
		return 3
	case VerifyMissingPayload:
		return 2
	case VerifyUnfinalized:
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
	admission   *Admission     // nil when the run has none
}

// chained reports whether the run's checks and verdict are in its hash chain
// (check_recorded, run_finalized): true for every run admitted under schema
// v3, whose admission is not Backfilled. A run without an admission is
// treated as chained, so deleting its admission does not excuse it.
func (re *runEvidence) chained() bool {
	return re.admission == nil || !re.admission.Backfilled
}

func (s *Store) loadRunEvidence(ctx context.Context, q queryer, runID string) (*runEvidence, error) {
	re := &runEvidence{}
	err := q.QueryRowContext(ctx, `SELECT status, ordinal, event_count, terminal_hash, finalized_at,
			(SELECT count(*) FROM envelopes e WHERE e.run_id = r.run_id) > 0,
			(SELECT v.requested_verdict FROM verdicts v WHERE v.run_id = r.run_id)
		FROM runs r WHERE run_id = ?`, runID).Scan(&re.status, &re.ordinal, &re.storedCount, &re.terminal, &re.finalizedAt,
		&re.hasEnvelope, &re.requested)
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
	return re, nil
}

// lastHash is the stored hash of the last event, ZeroHash for an empty trace.
func (re *runEvidence) lastHash() string {
	if re.chain.count == 0 {
		return ZeroHash
	}
	return re.chain.lastHash
}

func (re *runEvidence) terminalRecord(v Verdict, version int) TerminalRecord {
	admission := re.summary.AdmissionHash
	if admission == "" {
		// A run without an admission is reported tampered; its terminal
		// record still has a definite value.
		admission = ZeroHash
	}
	return TerminalRecord{
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
				res.storeEvents = append(res.storeEvents, storeEvent{seq: r.ev.Seq, typ: r.ev.Type, payload: r.payload})
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

// finalizationFindings checks a run's finalization record against its
// evidence. live reports whether a writer may still be writing the store
// (the caller is that writer).
func finalizationFindings(re *runEvidence, writerLive bool) []finding {
	out := finalizedEventFindings(re)
	s := re.summary
	if re.status != StatusFinalized {
		if re.terminal.Valid || re.storedCount.Valid || re.finalizedAt.Valid || s.Verdict != nil {
			out = append(out, finding{VerifyTampered, fmt.Sprintf("run status is %s but it carries a finalization record", re.status)})
		}
		var last *StatusChange
		if n := len(s.StatusChanges); n > 0 {
			last = &s.StatusChanges[n-1]
		}
		switch {
		case re.status == StatusInterrupted && (last == nil || last.To != StatusInterrupted):
			out = append(out, finding{VerifyTampered, "run is interrupted but no status change records its interruption"})
		case re.status == StatusInterrupted:
			out = append(out, finding{VerifyUnfinalized, fmt.Sprintf("run was %s at %s; its %d recorded events stay as they were",
				last.Reason, last.At.Format(time.RFC3339), re.chain.count)})
		case re.status == StatusOpen && !writerLive:
			out = append(out, finding{VerifyUnfinalized, "run is open but no writer holds the store: it was interrupted (the next writer records it so)"})
		default:
			out = append(out, finding{VerifyUnfinalized, fmt.Sprintf("run is %s, not finalized", re.status)})
		}
		return out
	}
	actual := re.chain.count
	switch {
	case !re.storedCount.Valid:
		out = append(out, finding{VerifyTampered, "event count missing"})
	case re.storedCount.Int64 != actual:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("event count %d != %d", re.storedCount.Int64, actual)})
	}
	if s.Verdict == nil {
		out = append(out, finding{VerifyTampered, "verdict missing"})
		return out
	}
	version := s.TerminalVersion
	switch {
	case !re.terminal.Valid:
		out = append(out, finding{VerifyTampered, "terminal hash missing"})
	case version != TerminalV1 && version != TerminalV2 && version != TerminalV3:
		out = append(out, finding{VerifyTampered, fmt.Sprintf("terminal hash version %d unknown", version)})
	default:
		if th, err := TerminalHash(re.terminalRecord(*s.Verdict, version)); err != nil || th != re.terminal.String {
			out = append(out, finding{VerifyTampered, "terminal hash mismatch"})
		}
	}
	if s.Verdict.Verdict == VerdictAccepted {
		// Re-apply Finalize's rules: an accepted verdict the evidence does not
		// support was not written by Finalize.
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

// Verify recomputes each named run's (every run's, in creation order, when
// none is named) envelope digest, admission, hash chain, sequence continuity,
// event count, terminal hash, checks and verdict against the chained
// check_recorded and run_finalized events, verdict consistency and artifact
// digests, and reports one RunVerification per run. It also checks the
// store-wide admissions chain (gaps and broken links are reported on the run
// whose admission breaks it) and reports, as a tampered RunVerification of
// its own, every run id missing from runs that another table (events,
// verdicts, admissions, ...) or a run's corrects_run_id still names: a
// deleted run. With runs named, only findings about those runs are reported;
// a named run that is missing from runs but leaves such traces is reported
// tampered rather than refused. It works on a read-only store and changes
// nothing.
//
// Detection is against accidental corruption and against edits that do not
// also recompute every downstream hash: the hashes are unkeyed, so someone
// able to rewrite the whole file consistently (every later admission, a run's
// events and its terminal hash), or to delete the most recently admitted runs
// together with their admissions, is out of its reach. A manifest kept
// elsewhere (BuildManifest, CheckManifest) covers that.
//
// Errors: ErrNoRun when a named run neither exists nor leaves traces;
// ErrClosed; database errors.
func (s *Store) Verify(ctx context.Context, runIDs ...string) ([]RunVerification, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	chain, missing, err := s.storeFindings(ctx)
	if err != nil {
		return nil, err
	}
	missingByID := map[string]RunVerification{}
	for _, m := range missing {
		missingByID[m.RunID] = m
	}
	named := len(runIDs) > 0
	if !named {
		rows, err := s.conn.QueryContext(ctx, `SELECT run_id FROM runs ORDER BY ordinal`)
		if err != nil {
			return nil, fmt.Errorf("evidence: verify: list runs: %w", err)
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
	out := make([]RunVerification, 0, len(runIDs)+len(missing))
	for _, id := range runIDs {
		v, err := s.verifyRun(ctx, id, chain[id])
		if errors.Is(err, ErrNoRun) && named {
			if m, ok := missingByID[id]; ok {
				out = append(out, m)
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if !named {
		out = append(out, missing...)
	}
	return out, nil
}

// verifyRun verifies one run; store holds the store-wide findings about it
// (its place in the admissions chain).
func (s *Store) verifyRun(ctx context.Context, runID string, store []finding) (RunVerification, error) {
	re, err := s.loadRunEvidence(ctx, s.conn, runID)
	if err != nil {
		return RunVerification{}, err
	}
	findings, err := s.integrityFindings(ctx, s.conn, re)
	if err != nil {
		return RunVerification{}, err
	}
	findings = append(findings, store...)
	findings = append(findings, finalizationFindings(re, !s.readOnly)...)
	v := RunVerification{RunID: runID, Status: VerifyOK, Events: re.chain.count, TerminalHash: re.terminal.String}
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
