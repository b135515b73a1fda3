package evidence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"
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

// Event types the store writes into a run's hash chain itself, so that the
// chain covers the run's checks and verdict (schema v3). AppendEvent refuses
// them: only RecordCheck and Finalize write them.
const (
	// EventCheckRecorded is appended by RecordCheck in the transaction that
	// records the check. Payload: {"name", "required", "status",
	// "detail_sha256" (SHA-256 hex of the detail's UTF-8 bytes),
	// "evidence_sha256" (SHA-256 hex of the canonical evidence JSON, or null)}.
	EventCheckRecorded = "check_recorded"
	// EventRunFinalized is appended by Finalize as the run's last event,
	// before the terminal hash is computed. Payload: {"verdict",
	// "requested_verdict", "reasons"} as stored in the verdicts table.
	EventRunFinalized = "run_finalized"
)

// storeEventTypes are the event types only the store writes.
var storeEventTypes = map[string]bool{EventCheckRecorded: true, EventRunFinalized: true}

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

// EventSchema declares the payload fields an event type must carry. Types
// without a schema need only a JSON object payload.
type EventSchema struct {
	// Type is the event type, e.g. "tool_call".
	Type string
	// Doc says what the event records.
	Doc string
	// Required are top-level payload keys that must be present (a JSON null
	// value counts as present: e.g. provider_exchange's usage is null when
	// the response reported none — unknown, never zero).
	Required []string
}

// EventSchemas returns the schemas AppendEvent enforces, one per event type.
// The runtime and harness emit these types (runtime.Event, harness checks).
func EventSchemas() []EventSchema {
	return []EventSchema{
		{Type: "provider_exchange", Doc: "one provider request of a member and its response, as replay needs it",
			Required: []string{"seq", "status", "request_sha256", "response_sha256", "usage"}},
		{Type: "tool_call", Doc: "a tool call intent, recorded before dispatch",
			Required: []string{"call_id", "idempotency_key", "tool", "payload_sha256"}},
		{Type: "tool_result", Doc: "the outcome of a tool call",
			Required: []string{"call_id", "idempotency_key", "state"}},
		{Type: "member_started", Doc: "a member began", Required: []string{"formation"}},
		{Type: "member_completed", Doc: "a member replied done", Required: []string{"formation"}},
		{Type: "member_failed", Doc: "a member failed", Required: []string{"formation", "error"}},
		{Type: "check_completed", Doc: "an acceptance check ended", Required: []string{"check", "status"}},
		{Type: "checkpoint", Doc: "a durable run's state was checkpointed after this event", Required: []string{"state_sha256", "turns", "paused"}},
		{Type: "run_resumed", Doc: "this run continues another from its checkpoint",
			Required: []string{"resumes_run_id", "team_run_id", "checkpoint_seq", "checkpoint_hash"}},
		{Type: "member_restored", Doc: "a turn that ended before a resume, restored from the checkpoint", Required: []string{"invocation", "success", "input_sha256"}},
		{Type: "member_paused", Doc: "a member stopped at a call awaiting approval or reconciliation", Required: []string{"invocation", "idempotency_key", "state"}},
	}
}

// requiredPayloadKeys maps event type -> required payload keys.
func requiredPayloadKeys() map[string][]string {
	m := map[string][]string{}
	for _, s := range EventSchemas() {
		m[s.Type] = s.Required
	}
	return m
}

// topLevelKeys returns the raw (still escaped) member names of the RFC 8785
// canonical JSON object obj. Canonical JSON has no insignificant whitespace,
// so a name follows every '{' or ',' at depth 1.
func topLevelKeys(obj []byte) [][]byte {
	var keys [][]byte
	depth, inString, escaped := 0, false, false
	expectKey := false
	keyStart := -1
	for i, c := range obj {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if keyStart >= 0 {
					keys = append(keys, obj[keyStart:i])
					keyStart = -1
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if expectKey && depth == 1 {
				keyStart = i + 1
			}
			expectKey = false
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
	return keys
}

// missingKey returns the first of required that obj lacks at top level.
func missingKey(obj []byte, required []string) string {
	if len(required) == 0 {
		return ""
	}
	keys := topLevelKeys(obj)
	for _, r := range required {
		found := false
		for _, k := range keys {
			if string(k) == r {
				found = true
				break
			}
		}
		if !found {
			return r
		}
	}
	return ""
}

// prepareEvent validates ev and returns it as it will be stored, without
// seq and hashes. prefix ("" or "events[3].") qualifies field names.
func prepareEvent(runID string, ev Event, required map[string][]string, prefix string) (StoredEvent, error) {
	if !validEventType(ev.Type) {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"type", "%q is not 1..64 chars of [a-z_]", ev.Type)
	}
	if storeEventTypes[ev.Type] {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"type", "%q is written only by the store (RecordCheck, Finalize)", ev.Type)
	}
	for _, f := range []struct{ name, value string }{{"member_id", ev.MemberID}, {"session_id", ev.SessionID}} {
		if len(f.value) > maxIDLen || !utf8.ValidString(f.value) {
			return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+f.name, "longer than %d bytes or not UTF-8", maxIDLen)
		}
	}
	payload, reason := canonicalObject(ev.Payload)
	if reason != "" {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"payload", "%s", reason)
	}
	if k := missingKey(payload, required[ev.Type]); k != "" {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"payload."+k, "required in a %s event", ev.Type)
	}
	if ev.Parent < 0 {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"parent", "%d is negative", ev.Parent)
	}
	t := ev.Time
	if t.IsZero() {
		t = time.Now()
	}
	t = utcMicro(t)
	if t.Year() < 1 || t.Year() > 9999 {
		return StoredEvent{}, fieldErr(ErrInvalidEvent, prefix+"time", "%s is outside years 1..9999", t)
	}
	return StoredEvent{RunID: runID, Parent: ev.Parent, Type: ev.Type, MemberID: ev.MemberID,
		SessionID: ev.SessionID, Time: t, Payload: payload}, nil
}

// chainHead is the cached end of a run's hash chain (the writer holds the
// lock, so nobody else appends).
type chainHead struct {
	seq  int64
	hash [32]byte
}

// AppendEvent appends ev to run runID's hash-chained trace and returns it as
// stored. It is AppendEvents with one event; field names in errors are not
// prefixed ("payload", not "events[0].payload").
func (s *Store) AppendEvent(ctx context.Context, runID string, ev Event) (StoredEvent, error) {
	p, err := prepareEvent(runID, ev, s.required, "")
	if err != nil {
		return StoredEvent{}, err
	}
	out, err := s.appendPrepared(ctx, runID, []StoredEvent{p})
	if err != nil {
		return StoredEvent{}, err
	}
	return out[0], nil
}

// AppendEvents appends evs, in order, to run runID's hash-chained trace in one
// transaction and returns them as stored: either all are stored or none.
// Sequence numbers continue the run's gap-free 1-based sequence; each event's
// PrevHash is its predecessor's Hash (EventHash). Payloads are stored in
// RFC 8785 canonical form.
//
// Every event is validated before anything is written: the type is 1..64
// chars of [a-z_] and not one the store reserves (EventCheckRecorded,
// EventRunFinalized); member and session ids are UTF-8 of at most 256 bytes; the
// payload is a JSON object carrying the keys its type's EventSchema requires;
// parent is 0 or an earlier seq of the run; time is in years 1..9999.
//
// It is safe for concurrent use: appends serialize on the store, and the
// chain head is cached per run (the writer lock guarantees no other writer),
// so a batch costs one status lookup, hashing, and one DuckDB Appender flush.
//
// Errors: *FieldError wrapping ErrInvalidEvent naming "events[i].<field>"
// (e.g. "events[3].payload.call_id"); ErrNoRun; ErrFinalized; ErrRunNotOpen
// (interrupted); ErrReadOnly; ErrClosed; ctx's error.
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []Event) ([]StoredEvent, error) {
	if len(evs) == 0 {
		return []StoredEvent{}, nil
	}
	prepared := make([]StoredEvent, len(evs))
	for i, ev := range evs {
		p, err := prepareEvent(runID, ev, s.required, fmt.Sprintf("events[%d].", i))
		if err != nil {
			return nil, err
		}
		prepared[i] = p
	}
	return s.appendPrepared(ctx, runID, prepared)
}

// appendPrepared chains, hashes and stores validated events.
func (s *Store) appendPrepared(ctx context.Context, runID string, evs []StoredEvent) ([]StoredEvent, error) {
	if err := s.beginWrite(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("evidence: append events to run %s: %w", runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return nil, err
	}
	head, err := s.chainHeadTx(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	next := head
	for i := range evs {
		e := &evs[i]
		e.Seq = next.seq + 1
		if e.Parent >= e.Seq {
			field := "parent"
			if len(evs) > 1 {
				field = fmt.Sprintf("events[%d].parent", i)
			}
			return nil, fieldErr(ErrInvalidEvent, field, "%d is not before the new event's seq %d", e.Parent, e.Seq)
		}
		e.PrevHash = hex.EncodeToString(next.hash[:])
		sum, err := s.hasher.eventHash(&next.hash, *e, e.Payload)
		if err != nil {
			return nil, err
		}
		e.Hash = hex.EncodeToString(sum[:])
		next = chainHead{seq: e.Seq, hash: sum}
	}
	// The DuckDB Appender writes a JSON column through encoding/json, which
	// escapes <, >, & and U+2028/U+2029 and would store a payload other than
	// its canonical form; such rows go through INSERT in the same transaction.
	var viaInsert []int
	err = s.conn.Raw(func(dc any) error {
		conn, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		a, err := duckdb.NewAppenderFromConn(conn, "", "events")
		if err != nil {
			return err
		}
		for i := range evs {
			e := &evs[i]
			if bytes.ContainsAny(e.Payload, "<>&\u2028\u2029") {
				viaInsert = append(viaInsert, i)
				continue
			}
			if err := a.AppendRow(e.RunID, e.Seq, e.Parent, e.Type, e.MemberID, e.SessionID, e.Time,
				json.RawMessage(e.Payload), e.PrevHash, e.Hash); err != nil {
				_ = a.Close()
				return err
			}
		}
		return a.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("evidence: append events %d..%d to run %s: %w", evs[0].Seq, next.seq, runID, err)
	}
	for _, i := range viaInsert {
		e := &evs[i]
		if _, err := tx.ExecContext(ctx, `INSERT INTO events (run_id, seq, parent, type, member_id, session_id, time, payload, prev_hash, hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.RunID, e.Seq, e.Parent, e.Type, e.MemberID, e.SessionID, e.Time, string(e.Payload), e.PrevHash, e.Hash); err != nil {
			return nil, fmt.Errorf("evidence: append event %d to run %s: %w", e.Seq, runID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("evidence: append events %d..%d to run %s: %w", evs[0].Seq, next.seq, runID, err)
	}
	s.chains[runID] = next
	return evs, nil
}

// chainHeadTx returns the end of run runID's hash chain: the writer's cached
// head, or the last stored event read in tx. Must be called with s.mu held.
func (s *Store) chainHeadTx(ctx context.Context, tx *sql.Tx, runID string) (chainHead, error) {
	if head, ok := s.chains[runID]; ok {
		return head, nil
	}
	var head chainHead
	var prev string
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID).Scan(&head.seq, &prev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return chainHead{}, fmt.Errorf("evidence: append events to run %s: %w", runID, err)
	default:
		b, derr := hex.DecodeString(prev)
		if derr != nil || len(b) != sha256.Size {
			return chainHead{}, fmt.Errorf("evidence: run %s: stored hash of event %d is not SHA-256 hex; run assay verify", runID, head.seq)
		}
		copy(head.hash[:], b)
	}
	return head, nil
}

// appendStoreEvent appends one event the store writes itself
// (EventCheckRecorded, EventRunFinalized), at time at, to run runID's chain inside tx, and
// returns it with the chain's new head. The caller caches the head in
// s.chains only after tx commits. Must be called with s.mu held.
func (s *Store) appendStoreEvent(ctx context.Context, tx *sql.Tx, runID, typ string, payload any, at time.Time) (StoredEvent, chainHead, error) {
	head, err := s.chainHeadTx(ctx, tx, runID)
	if err != nil {
		return StoredEvent{}, chainHead{}, err
	}
	canon, err := canonical(payload)
	if err != nil {
		return StoredEvent{}, chainHead{}, fmt.Errorf("evidence: run %s: canonicalize %s payload: %w", runID, typ, err)
	}
	e := StoredEvent{RunID: runID, Seq: head.seq + 1, Type: typ, Time: utcMicro(at), Payload: canon,
		PrevHash: hex.EncodeToString(head.hash[:])}
	sum, err := s.hasher.eventHash(&head.hash, e, canon)
	if err != nil {
		return StoredEvent{}, chainHead{}, err
	}
	e.Hash = hex.EncodeToString(sum[:])
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (run_id, seq, parent, type, member_id, session_id, time, payload, prev_hash, hash)
		VALUES (?, ?, 0, ?, '', '', ?, ?, ?, ?)`, runID, e.Seq, typ, e.Time, string(canon), e.PrevHash, e.Hash); err != nil {
		return StoredEvent{}, chainHead{}, fmt.Errorf("evidence: run %s: append %s event %d: %w", runID, typ, e.Seq, err)
	}
	return e, chainHead{seq: e.Seq, hash: sum}, nil
}

// Events returns run runID's trace ordered by seq, exactly as stored (it does
// not verify; see Verify). Errors: ErrNoRun; ErrClosed.
func (s *Store) Events(ctx context.Context, runID string) ([]StoredEvent, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var n int
	if err := s.conn.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE run_id = ?`, runID).Scan(&n); err != nil {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("evidence: events of run %s: %w", runID, ErrNoRun)
	}
	return loadEvents(ctx, s.conn, runID)
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

// EventsOfRuns returns the traces of runIDs, each ordered by seq, exactly as
// stored (it does not verify), read in one query: what a report over many
// runs needs instead of one Events call per run. A run id without events, or
// not in the store, has no entry. Errors: ErrClosed; the database's.
func (s *Store) EventsOfRuns(ctx context.Context, runIDs []string) (map[string][]StoredEvent, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string][]StoredEvent{}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := s.conn.QueryContext(ctx, `SELECT run_id, seq, parent, type, member_id, session_id, time, CAST(payload AS VARCHAR), prev_hash, hash
		FROM events WHERE list_contains(?, run_id) ORDER BY run_id, seq`, runIDs)
	if err != nil {
		return nil, fmt.Errorf("evidence: events of %d runs: %w", len(runIDs), err)
	}
	defer rows.Close()
	for rows.Next() {
		var e StoredEvent
		var payload string
		if err := rows.Scan(&e.RunID, &e.Seq, &e.Parent, &e.Type, &e.MemberID, &e.SessionID, &e.Time, &payload, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("evidence: events of %d runs: %w", len(runIDs), err)
		}
		e.Time = e.Time.UTC()
		e.Payload = json.RawMessage(payload)
		out[e.RunID] = append(out[e.RunID], e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: events of %d runs: %w", len(runIDs), err)
	}
	return out, nil
}
