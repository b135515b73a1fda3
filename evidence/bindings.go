package evidence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// Binding binds a run to records kept outside the store that its verdict
// rests on, such as the gateway's records of the requests its members made
// (gateway-usage.db) or the effect service's receipts of what it committed:
// where they are, how many there were and the SHA-256 of their canonical
// form, both as the source's BindingChecker defines them. Terminal hash
// version 5 covers a run's bindings; Verify recomputes each with its
// checker, so a file that is edited, loses rows or is deleted is reported.
type Binding struct {
	// Source names the kind of records and the BindingChecker that reads
	// them: 1..64 chars of [a-z_], e.g. "gateway", "receipts".
	Source string `json:"source"`
	// Locator is a JSON object telling the checker which records: e.g.
	// {"file": "gateway-usage.db", "after": 10, "up_to": 25,
	// "session_prefix": "run-x-"}. Stored in RFC 8785 canonical form.
	Locator json.RawMessage `json:"locator"`
	// Records is how many records the locator selected (>= 0).
	Records int64 `json:"records"`
	// SHA256 is the SHA-256 hex (64 lowercase chars) of the records'
	// canonical form, as the checker defines it.
	SHA256 string `json:"sha256"`
	// RecordedAt is when the binding was recorded (UTC, microseconds); set
	// by the store.
	RecordedAt time.Time `json:"recorded_at"`

	runID string // the run, as loaded
}

// BindingChecker recomputes the bindings of one source from the records as
// they are now. Implementations live with the code that owns the records
// (harness: the gateway's usage database, the effect service's receipts).
type BindingChecker interface {
	// Source is the Binding.Source it recomputes.
	Source() string
	// Recompute returns how many records locator selects now and the SHA-256
	// hex of their canonical form. An error wrapping fs.ErrNotExist means
	// the file holding them is gone; any other error, that it cannot be read
	// as such records.
	Recompute(ctx context.Context, runID string, locator json.RawMessage) (records int64, sha256 string, err error)
}

// BindExternal records binding b for run runID, which must be open. A run
// has at most one binding per source, and a binding is never replaced.
//
// Errors: *FieldError (ErrInvalidArgument) naming "source", "locator",
// "records" or "sha256"; ErrBindingExists; ErrNoRun; ErrFinalized;
// ErrRunNotOpen; ErrReadOnly; ErrClosed.
func (s *Store) BindExternal(ctx context.Context, runID string, b Binding) error {
	if !validEventType(b.Source) {
		return fieldErr(ErrInvalidArgument, "source", "%q is not 1..64 chars of [a-z_]", b.Source)
	}
	locator, reason := canonicalObject(b.Locator)
	if reason != "" {
		return fieldErr(ErrInvalidArgument, "locator", "%s", reason)
	}
	if b.Records < 0 {
		return fieldErr(ErrInvalidArgument, "records", "%d is negative", b.Records)
	}
	if !isDigest(b.SHA256) {
		return fieldErr(ErrInvalidArgument, "sha256", "%q is not SHA-256 hex (64 lowercase chars)", b.SHA256)
	}
	return s.inRunTx(ctx, runID, "bind "+b.Source+" records", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM run_bindings WHERE run_id = ? AND source = ?`, runID, b.Source).Scan(&n); err != nil {
			return fmt.Errorf("evidence: bind %s records to run %s: %w", b.Source, runID, err)
		}
		if n > 0 {
			return fmt.Errorf("evidence: run %s binding %s: %w", runID, b.Source, ErrBindingExists)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_bindings (run_id, source, locator, records, sha256, recorded_at) VALUES (?, ?, ?, ?, ?, ?)`,
			runID, b.Source, string(locator), b.Records, b.SHA256, utcMicro(time.Now())); err != nil {
			return fmt.Errorf("evidence: bind %s records to run %s: %w", b.Source, runID, err)
		}
		return nil
	})
}

// Bindings returns the bindings of the named runs (every run's when none is
// named) by run id, each list ordered by source; a run without bindings has
// no entry. Works on a read-only store. Errors: ErrClosed; database errors.
func (s *Store) Bindings(ctx context.Context, runIDs ...string) (map[string][]Binding, error) {
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[string][]Binding{}
	if len(runIDs) == 0 {
		runIDs = []string{""}
	}
	for _, id := range runIDs {
		bs, err := loadBindings(ctx, s.conn, id)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			out[b.runID] = append(out[b.runID], b)
		}
	}
	return out, nil
}

// loadBindings returns the bindings of runID ("" = all runs), by run and source.
func loadBindings(ctx context.Context, q queryer, runID string) ([]Binding, error) {
	rows, err := q.QueryContext(ctx, `SELECT run_id, source, CAST(locator AS VARCHAR), records, sha256, recorded_at FROM run_bindings
		WHERE ? = '' OR run_id = ? ORDER BY run_id, source`, runID, runID)
	if err != nil {
		return nil, fmt.Errorf("evidence: bindings of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Binding
	for rows.Next() {
		var b Binding
		var loc string
		if err := rows.Scan(&b.runID, &b.Source, &loc, &b.Records, &b.SHA256, &b.RecordedAt); err != nil {
			return nil, fmt.Errorf("evidence: bindings of run %s: %w", runID, err)
		}
		b.Locator, b.RecordedAt = json.RawMessage(loc), b.RecordedAt.UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// bindingFindings recomputes each binding of the run with its source's
// checker: records gone (the file, or rows) are VerifyMissingPayload,
// records that changed VerifyCorruptPayload. With checked set, a source no
// checker covers is noted. Must be called with s.mu held.
func (s *Store) bindingFindings(ctx context.Context, re *runEvidence, checked bool, checkers map[string]BindingChecker) ([]finding, []string, error) {
	bs, err := loadBindings(ctx, s.conn, re.summary.RunID)
	if err != nil {
		return nil, nil, err
	}
	var out []finding
	var notes []string
	for _, b := range bs {
		c, ok := checkers[b.Source]
		if !ok {
			if checked {
				notes = append(notes, fmt.Sprintf("%s records (%d, sha256 %.12s): not compared, nothing here reads them", b.Source, b.Records, b.SHA256))
			}
			continue
		}
		n, sum, err := c.Recompute(ctx, re.summary.RunID, b.Locator)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case errors.Is(err, fs.ErrNotExist):
			out = append(out, finding{VerifyMissingPayload, fmt.Sprintf("%s records: %v (the run is bound to %d records, sha256 %s)", b.Source, err, b.Records, b.SHA256)})
		case err != nil:
			out = append(out, finding{VerifyCorruptPayload, fmt.Sprintf("%s records cannot be read: %v (the run is bound to %d records, sha256 %s)", b.Source, err, b.Records, b.SHA256)})
		case n < b.Records:
			out = append(out, finding{VerifyMissingPayload, fmt.Sprintf("%s records: %d of the %d the run is bound to remain (sha256 %s, bound %s): records were deleted",
				b.Source, n, b.Records, sum, b.SHA256)})
		case n != b.Records || sum != b.SHA256:
			out = append(out, finding{VerifyCorruptPayload, fmt.Sprintf("%s records differ from those the run is bound to: now %d records, sha256 %s; bound %d, sha256 %s",
				b.Source, n, sum, b.Records, b.SHA256)})
		}
	}
	return out, notes, nil
}

// workingCopyNotes compares each artifact the run links with the file fn
// names for it, noting files that differ or are gone. Must be called with
// s.mu held.
func (s *Store) workingCopyNotes(ctx context.Context, re *runEvidence, fn WorkingCopyFunc) []string {
	root := re.summary.RunID
	for id, steps := re.summary.CorrectsRunID, 0; id != "" && steps < 10000; steps++ {
		root = id
		var next sql.NullString
		if err := s.conn.QueryRowContext(ctx, `SELECT corrects_run_id FROM runs WHERE run_id = ?`, id).Scan(&next); err != nil {
			break
		}
		id = next.String
	}
	var notes []string
	for _, l := range re.summary.Artifacts {
		path, ok := fn(root, re.summary, l)
		if !ok {
			continue
		}
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			notes = append(notes, fmt.Sprintf("working copy differs: %s is gone (artifact %s, sha256 %s, is the evidence)", path, l.Name, l.Digest))
		case err != nil:
			notes = append(notes, fmt.Sprintf("working copy differs: %s cannot be read: %v (artifact %s, sha256 %s, is the evidence)", path, err, l.Name, l.Digest))
		default:
			sum := sha256.Sum256(data)
			if got := hex.EncodeToString(sum[:]); got != l.Digest {
				notes = append(notes, fmt.Sprintf("working copy differs: %s has sha256 %s, artifact %s has %s (the artifact is the evidence)", path, got, l.Name, l.Digest))
			}
		}
	}
	return notes
}
