package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// CheckpointInfo is a checkpoint without its state, as listed in RunSummary
// and covered by the terminal hash.
type CheckpointInfo struct {
	Seq       int64     // the event seq the checkpoint follows (0 = before any event)
	EventHash string    // hash of event Seq (ZeroHash for 0)
	Hash      string    // CheckpointHash
	CreatedAt time.Time // UTC
}

// Checkpoint is formation state saved at a boundary of a run, linked to the
// event it follows.
type Checkpoint struct {
	RunID string
	CheckpointInfo
	State json.RawMessage // JSON object in RFC 8785 canonical form
}

// ResumeRequest is what a resuming request is bound to; LoadCheckpoint refuses
// a checkpoint whose run's envelope differs in any of these fields. The
// invocation id is not among them: a resume is a new invocation.
type ResumeRequest struct {
	Tenant         string
	ManifestDigest string
	Mode           string
	PolicyDigest   string
	DatasetDigest  string
	// Case is the catalog case of the resuming request; compared only when
	// both the run and the request name one (schema v6; the manifest digest
	// covers the catalog case either way). The harness always names it.
	Case string
	// Task and Repeat are the team task and repeat index of the resuming
	// request (schema v7), compared like Case: only when both the run and
	// the request record one (a non-empty task, a repeat index above 0).
	Task   string
	Repeat int
}

type checkpointObject struct {
	RunID          string          `json:"run_id"`
	Seq            int64           `json:"seq"`
	EventHash      string          `json:"event_hash"`
	EnvelopeDigest string          `json:"envelope_digest"`
	State          json.RawMessage `json:"state"`
}

// CheckpointHash returns a checkpoint's hash: SHA-256 hex of the RFC 8785 form
// of {"run_id", "seq", "event_hash", "envelope_digest", "state"}, binding the
// state to the run, the event it follows (by that event's chain hash) and the
// envelope the run was admitted under.
func CheckpointHash(runID string, seq int64, eventHash, envelopeDigest string, state json.RawMessage) (string, error) {
	b, err := canonical(checkpointObject{RunID: runID, Seq: seq, EventHash: eventHash, EnvelopeDigest: envelopeDigest, State: state})
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize checkpoint %s/%d: %w", runID, seq, err)
	}
	return sha256Hex(b), nil
}

// SaveCheckpoint stores state (a JSON object) as run runID's checkpoint after
// event seq (0 = before any event; otherwise an event of the run). A
// checkpoint is saved once per seq and never overwritten.
//
// Errors: *FieldError (ErrInvalidArgument) naming "state" or "seq";
// ErrCheckpointExists; ErrNoRun; ErrFinalized; ErrRunNotOpen; ErrReadOnly;
// ErrClosed.
func (s *Store) SaveCheckpoint(ctx context.Context, runID string, seq int64, state json.RawMessage) (Checkpoint, error) {
	canon, reason := canonicalObject(state)
	if reason != "" {
		return Checkpoint{}, fieldErr(ErrInvalidArgument, "state", "%s", reason)
	}
	if seq < 0 {
		return Checkpoint{}, fieldErr(ErrInvalidArgument, "seq", "%d is negative", seq)
	}
	if err := s.beginWrite(ctx); err != nil {
		return Checkpoint{}, err
	}
	defer s.mu.Unlock()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return Checkpoint{}, err
	}
	eventHash := ZeroHash
	if seq > 0 {
		err := tx.QueryRowContext(ctx, `SELECT hash FROM events WHERE run_id = ? AND seq = ?`, runID, seq).Scan(&eventHash)
		if errors.Is(err, sql.ErrNoRows) {
			return Checkpoint{}, fieldErr(ErrInvalidArgument, "seq", "run %s has no event %d", runID, seq)
		}
		if err != nil {
			return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints WHERE run_id = ? AND seq = ?`, runID, seq).Scan(&n); err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
	}
	if n > 0 {
		return Checkpoint{}, fmt.Errorf("evidence: run %s checkpoint after event %d: %w", runID, seq, ErrCheckpointExists)
	}
	var envelope string
	if err := tx.QueryRowContext(ctx, `SELECT envelope_digest FROM runs WHERE run_id = ?`, runID).Scan(&envelope); err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
	}
	h, err := CheckpointHash(runID, seq, eventHash, envelope, canon)
	if err != nil {
		return Checkpoint{}, err
	}
	now := utcMicro(time.Now())
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (run_id, seq, state, hash, created_at, event_hash) VALUES (?, ?, ?, ?, ?, ?)`,
		runID, seq, string(canon), h, now, eventHash); err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
	}
	if err := tx.Commit(); err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: save checkpoint %s/%d: %w", runID, seq, err)
	}
	return Checkpoint{RunID: runID, CheckpointInfo: CheckpointInfo{Seq: seq, EventHash: eventHash, Hash: h, CreatedAt: now}, State: canon}, nil
}

// LoadCheckpoint returns run runID's checkpoint after event seq (the latest
// one when seq < 0) for a request resuming it, after verifying that
//   - its hash still matches its state, run, event and the run's envelope
//     digest (CheckpointHash), and the event it follows still has the hash
//     recorded with it, and
//   - the run's envelope matches req in tenant, manifest digest, mode, policy
//     digest, dataset digest and (when both name one) case; never in
//     invocation id.
//
// Any run status may be resumed from (an interrupted run is the usual one).
// Works on a read-only store.
//
// Errors: ErrNoCheckpoint; *CheckpointError (ErrCheckpointCorrupt) naming
// what does not verify; *EnvelopeMismatchError (ErrEnvelopeMismatch) naming
// each differing field; ErrNoRun; ErrClosed.
func (s *Store) LoadCheckpoint(ctx context.Context, runID string, seq int64, req ResumeRequest) (Checkpoint, error) {
	if err := s.beginRead(); err != nil {
		return Checkpoint{}, err
	}
	defer s.mu.Unlock()
	runs, err := loadRuns(ctx, s.conn, runID)
	if err != nil {
		return Checkpoint{}, err
	}
	if len(runs) == 0 {
		return Checkpoint{}, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	run := runs[0]
	cp := Checkpoint{RunID: runID}
	var state string
	q := `SELECT seq, CAST(state AS VARCHAR), hash, coalesce(event_hash, ''), created_at FROM checkpoints WHERE run_id = ? AND seq = ?`
	args := []any{runID, seq}
	if seq < 0 {
		q = `SELECT seq, CAST(state AS VARCHAR), hash, coalesce(event_hash, ''), created_at FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`
		args = args[:1]
	}
	err = s.conn.QueryRowContext(ctx, q, args...).Scan(&cp.Seq, &state, &cp.Hash, &cp.EventHash, &cp.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, fmt.Errorf("evidence: run %s checkpoint %d: %w", runID, seq, ErrNoCheckpoint)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("evidence: load checkpoint %s/%d: %w", runID, seq, err)
	}
	cp.CreatedAt, cp.State = cp.CreatedAt.UTC(), json.RawMessage(state)
	corrupt := func(detail string) error {
		return &CheckpointError{RunID: runID, Seq: cp.Seq, Detail: detail}
	}
	if h, err := CheckpointHash(runID, cp.Seq, cp.EventHash, run.EnvelopeDigest, cp.State); err != nil || h != cp.Hash {
		return Checkpoint{}, corrupt("hash does not match its state, event and envelope")
	}
	if d, err := run.Envelope.Digest(); err != nil || d != run.EnvelopeDigest {
		return Checkpoint{}, corrupt("the run's envelope no longer matches its digest")
	}
	eventHash := ZeroHash
	if cp.Seq > 0 {
		err := s.conn.QueryRowContext(ctx, `SELECT hash FROM events WHERE run_id = ? AND seq = ?`, runID, cp.Seq).Scan(&eventHash)
		if errors.Is(err, sql.ErrNoRows) {
			return Checkpoint{}, corrupt(fmt.Sprintf("event %d it follows is gone", cp.Seq))
		}
		if err != nil {
			return Checkpoint{}, fmt.Errorf("evidence: load checkpoint %s/%d: %w", runID, cp.Seq, err)
		}
	}
	if eventHash != cp.EventHash {
		return Checkpoint{}, corrupt(fmt.Sprintf("event %d it follows has changed", cp.Seq))
	}
	env := run.Envelope
	var fields []string
	for _, f := range []struct{ name, run, req string }{
		{"tenant", env.Tenant, req.Tenant}, {"manifest_digest", env.ManifestDigest, req.ManifestDigest},
		{"mode", env.Mode, req.Mode}, {"policy_digest", env.PolicyDigest, req.PolicyDigest},
		{"dataset_digest", env.DatasetDigest, req.DatasetDigest}, {"case", env.Case, req.Case},
		{"task", env.Task, req.Task}, {"repeat", repeatLabel(env.Repeat), repeatLabel(req.Repeat)},
	} {
		if (f.name == "case" || f.name == "task" || f.name == "repeat") && (f.run == "" || f.req == "") {
			continue
		}
		if f.run != f.req {
			fields = append(fields, fmt.Sprintf("%s (run %q, request %q)", f.name, f.run, f.req))
		}
	}
	if len(fields) > 0 {
		return Checkpoint{}, &EnvelopeMismatchError{RunID: runID, Fields: fields}
	}
	return cp, nil
}

// loadCheckpointInfos returns the checkpoints of runID ("" = all runs) by run id, ordered by seq.
func loadCheckpointInfos(ctx context.Context, q queryer, runID string) (map[string][]CheckpointInfo, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, seq, coalesce(event_hash, ''), hash, created_at
		FROM checkpoints WHERE ? = '' OR run_id = ? ORDER BY run_id, seq`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: load checkpoints: %w", err)
	}
	defer rows.Close()
	out := map[string][]CheckpointInfo{}
	for rows.Next() {
		var id string
		var c CheckpointInfo
		if err := rows.Scan(&id, &c.Seq, &c.EventHash, &c.Hash, &c.CreatedAt); err != nil {
			return nil, fmt.Errorf("evidence: load checkpoints: %w", err)
		}
		c.CreatedAt = c.CreatedAt.UTC()
		out[id] = append(out[id], c)
	}
	return out, rows.Err()
}

// CheckpointError reports a checkpoint that does not verify. It unwraps to
// ErrCheckpointCorrupt.
type CheckpointError struct {
	RunID  string
	Seq    int64
	Detail string // e.g. "hash does not match its state, event and envelope"
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("checkpoint of run %s after event %d does not verify: %s", e.RunID, e.Seq, e.Detail)
}

// Unwrap returns ErrCheckpointCorrupt.
func (e *CheckpointError) Unwrap() error { return ErrCheckpointCorrupt }

// EnvelopeMismatchError reports that a resuming request is not bound to what
// the checkpoint's run was admitted under. It unwraps to ErrEnvelopeMismatch.
type EnvelopeMismatchError struct {
	RunID  string
	Fields []string // each differing field with both values
}

func (e *EnvelopeMismatchError) Error() string {
	return fmt.Sprintf("the request's envelope differs from run %s's in %s", e.RunID, strings.Join(e.Fields, ", "))
}

// Unwrap returns ErrEnvelopeMismatch.
func (e *EnvelopeMismatchError) Unwrap() error { return ErrEnvelopeMismatch }

// repeatLabel is a repeat index as LoadCheckpoint compares it: "" for 0 (not
// a repeat run, or not recorded).
func repeatLabel(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
