package evidence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// startWriter records this writer session and seals every run an earlier
// writer left unfinished. Holding the exclusive lock proves no other writer
// is live, so an open run has nobody left to finish it: it was interrupted
// (its writer crashed, was killed, or closed without finalizing). Each such
// run is recorded interrupted in run_status_changes, then sealed
// (sealInterrupted): finalized rejected with the reason "interrupted", its
// terminal hash fixed and chained into finalizations, keeping status
// interrupted. Its recorded events stay as they were; the seal appends the
// run_finalized event that records the verdict. The session row is chained
// to the previous session and pins the admissions and finalizations chains
// as found. Must be called with s.mu held; everything happens in one
// transaction.
func (s *Store) startWriter(ctx context.Context) error {
	host, _ := os.Hostname()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	defer tx.Rollback()
	w := Writer{PID: int64(os.Getpid()), Command: s.command, Host: host, OpenedAt: utcMicro(time.Now()), PrevHash: ZeroHash}
	if !utf8.ValidString(w.Command) {
		w.Command = strings.ToValidUTF8(w.Command, "\uFFFD")
	}
	if !utf8.ValidString(w.Host) {
		w.Host = strings.ToValidUTF8(w.Host, "\uFFFD")
	}
	var last sql.NullInt64
	var prevHash, prevClose sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT writer_id, hash, close_hash FROM writers ORDER BY writer_id DESC LIMIT 1`).Scan(&last, &prevHash, &prevClose)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	default:
		w.PrevHash = prevHash.String
		if prevClose.Valid && prevClose.String != "" {
			w.PrevHash = prevClose.String
		}
		if !isDigest(w.PrevHash) {
			return fmt.Errorf("evidence: start writer on %s: stored hash of writer %d is not SHA-256 hex; run assay verify", s.path, last.Int64)
		}
	}
	w.WriterID = last.Int64 + 1
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT min(value) FROM meta WHERE key = 'created_at'), '')`).Scan(&w.StoreCreatedAt); err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	adm, fin, err := logHeads(ctx, tx)
	if err != nil {
		return err
	}
	w.AdmissionsAtOpen, w.FinalizationsAtOpen = &adm, &fin
	if w.Hash, err = WriterHash(w.PrevHash, w); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO writers (writer_id, pid, command, host, opened_at, backfilled,
			admissions_at_open, admissions_head_at_open, finalizations_at_open, finalizations_head_at_open, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, false, ?, ?, ?, ?, ?, ?)`,
		w.WriterID, w.PID, w.Command, w.Host, w.OpenedAt, adm.Size, adm.Head, fin.Size, fin.Head, w.PrevHash, w.Hash); err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	orphans, err := unfinishedRuns(ctx, tx)
	if err != nil {
		return fmt.Errorf("evidence: recover open runs in %s: %w", s.path, err)
	}
	s.writerID = w.WriterID // the status changes and seals below are this session's
	var sealed []string
	for _, o := range orphans {
		reason := o.reason
		if o.status == StatusOpen {
			if err := recordStatusChange(ctx, tx, o.runID, StatusOpen, StatusInterrupted, "interrupted: "+reason, w.WriterID, w.OpenedAt); err != nil {
				s.writerID = 0
				return err
			}
		}
		if err := s.sealInterrupted(ctx, tx, o.runID, reason); err != nil {
			s.writerID = 0
			return err
		}
		sealed = append(sealed, o.runID)
	}
	if err := tx.Commit(); err != nil {
		s.writerID = 0
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	s.writerHash = w.Hash
	s.recovered = sealed
	return nil
}

// unfinishedRun is a run startWriter seals: its status and why it is unfinished.
type unfinishedRun struct {
	runID, status, reason string
}

// unfinishedRuns lists, in creation order, the runs no writer is left to
// finish: status open (every writer before this one has ended), or
// interrupted without a seal (recorded by a writer of schema 2 to 4). A run
// showing any trace of a finalization (terminal hash, event count,
// finalization time, a verdict, a finalizations entry, a run_finalized event)
// is not among them: it was finalized and its status changed since, which
// Verify reports as tampering; sealing it would launder the change.
func unfinishedRuns(ctx context.Context, q queryer) ([]unfinishedRun, error) {
	rows, err := q.QueryContext(ctx, `SELECT r.run_id, r.status, w.writer_id, w.pid, w.command, w.closed_at IS NOT NULL,
			(SELECT c.reason FROM run_status_changes c WHERE c.run_id = r.run_id ORDER BY c.ordinal DESC LIMIT 1)
		FROM runs r LEFT JOIN writers w ON w.writer_id = r.writer_id
		WHERE r.status IN ('open', 'interrupted') AND r.terminal_hash IS NULL AND r.event_count IS NULL AND r.finalized_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.run_id = r.run_id)
			AND NOT EXISTS (SELECT 1 FROM finalizations f WHERE f.run_id = r.run_id)
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = r.run_id AND e.type = 'run_finalized')
		ORDER BY r.ordinal`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []unfinishedRun
	for rows.Next() {
		var o unfinishedRun
		var wid, pid sql.NullInt64
		var cmd, last sql.NullString
		var closed sql.NullBool
		if err := rows.Scan(&o.runID, &o.status, &wid, &pid, &cmd, &closed, &last); err != nil {
			return nil, err
		}
		switch {
		case o.status == StatusInterrupted:
			o.reason = strings.TrimPrefix(last.String, "interrupted: ")
			if o.reason == "" {
				o.reason = "recorded interrupted without a reason"
			}
		case wid.Valid:
			how := "ended without closing the store (crashed or killed)"
			if closed.Bool {
				how = "closed the store without finalizing the run"
			}
			o.reason = fmt.Sprintf("writer %d (pid %d, %s) %s", wid.Int64, pid.Int64, cmd.String, how)
		default:
			o.reason = "opened before writer sessions were recorded (schema v1); no writer is live to finish it"
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// recordClose writes this session's closing record: the time, the
// admissions and finalizations chains as the session leaves them, and the
// closing hash chained to the session's hash.
func (s *Store) recordClose(ctx context.Context) error {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	defer tx.Rollback()
	w := Writer{WriterID: s.writerID, Hash: s.writerHash}
	closed := utcMicro(time.Now())
	w.ClosedAt = &closed
	adm, fin, err := logHeads(ctx, tx)
	if err != nil {
		return err
	}
	w.AdmissionsAtClose, w.FinalizationsAtClose = &adm, &fin
	if w.CloseHash, err = WriterCloseHash(w); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE writers SET closed_at = ?, admissions_at_close = ?, admissions_head_at_close = ?,
			finalizations_at_close = ?, finalizations_head_at_close = ?, close_hash = ? WHERE writer_id = ?`,
		closed, adm.Size, adm.Head, fin.Size, fin.Head, w.CloseHash, s.writerID); err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	return nil
}

// recordStatusChange changes a run's status and records why, without an event.
func recordStatusChange(ctx context.Context, tx *sql.Tx, runID, from, to, reason string, writerID int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ? WHERE run_id = ? AND status = ?`, to, runID, from); err != nil {
		return fmt.Errorf("evidence: run %s: %s -> %s: %w", runID, from, to, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_status_changes (run_id, ordinal, from_status, to_status, reason, writer_id, changed_at)
		SELECT ?, coalesce(max(ordinal), 0) + 1, ?, ?, ?, ?, ? FROM run_status_changes WHERE run_id = ?`,
		runID, from, to, reason, writerID, at, runID); err != nil {
		return fmt.Errorf("evidence: run %s: record %s -> %s: %w", runID, from, to, err)
	}
	return nil
}

// StartSession starts this writer's session now rather than at its first
// write: it records the session (chained to the previous one) and seals
// every run an earlier writer left unfinished (see Recovered). It does
// nothing when the session has started. Errors: ErrReadOnly; ErrClosed;
// database errors.
func (s *Store) StartSession(ctx context.Context) error {
	if err := s.beginWrite(ctx); err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Recovered returns the runs this writer session found unfinished and sealed
// as interrupted (in creation order); nil for a reader, and for a writer
// before its first write (startWriter).
func (s *Store) Recovered() []string { return append([]string(nil), s.recovered...) }
