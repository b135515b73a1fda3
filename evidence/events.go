package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Event is an event to append. Seq, hashes and (when zero) Time are assigned
// by the store.
type Event struct {
	Type      string          // required, [a-z_]+, e.g. "member_started", "tool_call"
	MemberID  string          // member that emitted it; "" for run-level events
	SessionID string          // member session id; "" when none
	Parent    int64           // causal parent's seq within the run; 0 = none; must be < the new seq
	Time      time.Time       // converted to UTC and truncated to microseconds; zero -> now
	Payload   json.RawMessage // required JSON object; stored as its RFC 8785 canonical form
}

// StoredEvent is an event as stored in a run's trace.
type StoredEvent struct {
	RunID     string
	Seq       int64 // 1-based, gap-free within the run
	Parent    int64 // causal parent's seq; 0 = none
	Type      string
	MemberID  string
	SessionID string
	Time      time.Time       // UTC, microsecond precision
	Payload   json.RawMessage // RFC 8785 canonical JSON object
	PrevHash  string          // SHA-256 hex; ZeroHash for seq 1
	Hash      string          // SHA-256 hex, see EventHash
}

// maxIDLen bounds member and session ids.
const maxIDLen = 256

func validEventType(t string) bool {
	if t == "" || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

// AppendEvent appends ev to run runID's hash-chained trace and returns it as
// stored. It is safe for concurrent use: appends to one run are serialized, so
// sequence numbers are gap-free and monotonic and each event's PrevHash is its
// predecessor's Hash.
//
// Errors: *FieldError wrapping ErrInvalidEvent naming the field ("type",
// "payload", "parent", "time", "member_id", "session_id"); ErrNoRun;
// ErrFinalized; ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) AppendEvent(ctx context.Context, runID string, ev Event) (StoredEvent, error) {
	if !validEventType(ev.Type) {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, "type", "%q is not 1..64 chars of [a-z_]", ev.Type)
	}
	for _, f := range []struct{ name, value string }{{"member_id", ev.MemberID}, {"session_id", ev.SessionID}} {
		if len(f.value) > maxIDLen || !utf8.ValidString(f.value) {
			return StoredEvent{}, fieldErr(ErrInvalidEvent, f.name, "longer than %d bytes or not UTF-8", maxIDLen)
		}
	}
	payload, reason := canonicalObject(ev.Payload)
	if reason != "" {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, "payload", "%s", reason)
	}
	if ev.Parent < 0 {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, "parent", "%d is negative", ev.Parent)
	}
	t := ev.Time
	if t.IsZero() {
		t = time.Now()
	}
	t = utcMicro(t)
	if t.Year() < 1 || t.Year() > 9999 {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, "time", "%s is outside years 1..9999", t)
	}
	if err := s.beginWrite(); err != nil {
		return StoredEvent{}, err
	}
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return StoredEvent{}, fmt.Errorf("evidence: append event to run %s: %w", runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return StoredEvent{}, err
	}
	last, prev := int64(0), ZeroHash
	err = tx.QueryRowContext(ctx, `SELECT seq, hash FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID).Scan(&last, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return StoredEvent{}, fmt.Errorf("evidence: append event to run %s: %w", runID, err)
	}
	se := StoredEvent{
		RunID: runID, Seq: last + 1, Parent: ev.Parent, Type: ev.Type, MemberID: ev.MemberID,
		SessionID: ev.SessionID, Time: t, Payload: payload, PrevHash: prev,
	}
	if se.Parent >= se.Seq {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, "parent", "%d is not before the new event's seq %d", se.Parent, se.Seq)
	}
	if se.Hash, err = EventHash(prev, se); err != nil {
		return StoredEvent{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (run_id, seq, parent, type, member_id, session_id, time, payload, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		se.RunID, se.Seq, se.Parent, se.Type, se.MemberID, se.SessionID, se.Time, string(se.Payload), se.PrevHash, se.Hash); err != nil {
		return StoredEvent{}, fmt.Errorf("evidence: append event %d to run %s: %w", se.Seq, runID, err)
	}
	if err := tx.Commit(); err != nil {
		return StoredEvent{}, fmt.Errorf("evidence: append event %d to run %s: %w", se.Seq, runID, err)
	}
	return se, nil
}

// Events returns run runID's trace ordered by seq, exactly as stored (it does
// not verify; see Verify). Errors: ErrNoRun; ErrClosed.
func (s *Store) Events(ctx context.Context, runID string) ([]StoredEvent, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE run_id = ?`, runID).Scan(&n); err != nil {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, ErrNoRun)
	}
	return loadEvents(ctx, s.db, runID)
}

func loadEvents(ctx context.Context, q queryer, runID string) ([]StoredEvent, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, parent, type, member_id, session_id, time, CAST(payload AS VARCHAR), prev_hash, hash
		FROM events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []StoredEvent
	for rows.Next() {
		e := StoredEvent{RunID: runID}
		var payload string
		if err := rows.Scan(&e.Seq, &e.Parent, &e.Type, &e.MemberID, &e.SessionID, &e.Time, &payload, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("evidence: events of run %s: %w", runID, err)
		}
		e.Time = e.Time.UTC()
		e.Payload = json.RawMessage(payload)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, err)
	}
	return out, nil
}
