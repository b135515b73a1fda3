package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
)

// Checkpoints returns every checkpoint of run runID in seq order, each verified as LoadCheckpoint
// verifies one: its hash over its state, the event it follows and the run's envelope digest, and
// that event's hash unchanged since it was saved. It reads them in one query, for a reader of all
// of a run's states (replay compares them); it binds no resuming request (LoadCheckpoint does).
// Works on a read-only store.
//
// Errors: ErrNoRun; *CheckpointError (ErrCheckpointCorrupt) naming the first checkpoint that does
// not verify; ErrClosed.
func (s *Store) Checkpoints(ctx context.Context, runID string) ([]Checkpoint, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var envelopeDigest string
	err := s.conn.QueryRowContext(ctx, `SELECT envelope_digest FROM runs WHERE run_id = ?`, runID).Scan(&envelopeDigest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("evidence: run %s: %w", runID, ErrNoRun)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: checkpoints of %s: %w", runID, err)
	}
	rows, err := s.conn.QueryContext(ctx, `SELECT c.seq, CAST(c.state AS VARCHAR), c.hash, coalesce(c.event_hash, ''), c.created_at,
			coalesce(e.hash, '')
		FROM checkpoints c LEFT JOIN events e ON e.run_id = c.run_id AND e.seq = c.seq
		WHERE c.run_id = ? ORDER BY c.seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: checkpoints of %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Checkpoint
	for rows.Next() {
		cp := Checkpoint{RunID: runID}
		var state, eventHash string
		if err := rows.Scan(&cp.Seq, &state, &cp.Hash, &cp.EventHash, &cp.CreatedAt, &eventHash); err != nil {
			return nil, fmt.Errorf("evidence: checkpoints of %s: %w", runID, err)
		}
		cp.CreatedAt, cp.State = cp.CreatedAt.UTC(), json.RawMessage(state)
		if h, err := CheckpointHash(runID, cp.Seq, cp.EventHash, envelopeDigest, cp.State); err != nil || h != cp.Hash {
			return nil, &CheckpointError{RunID: runID, Seq: cp.Seq, Detail: "hash does not match its state, event and envelope"}
		}
		if cp.Seq == 0 {
			eventHash = ZeroHash
		}
		if eventHash != cp.EventHash {
			return nil, &CheckpointError{RunID: runID, Seq: cp.Seq, Detail: fmt.Sprintf("event %d it follows is gone or has changed", cp.Seq)}
		}
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: checkpoints of %s: %w", runID, err)
	}
	return out, nil
}
