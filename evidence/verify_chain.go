package evidence

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

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
