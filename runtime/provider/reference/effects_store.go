package reference

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// effectStore is the read-write effects database of a serving process.
type effectStore struct {
	path string
	db   *sql.DB
}

// openEffectStore opens (creating) the effects database at path, or an
// in-memory one when path is "".
func openEffectStore(ctx context.Context, path string) (*effectStore, error) {
	dsn := "file::memory:?_txlock=immediate"
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("reference: effects database %q: %w", path, err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("reference: effects database directory for %s: %w", abs, err)
		}
		path = abs
		dsn = sqliteuri.File(abs, "mode=rwc&_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate")
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("reference: open effects database %s: %w", path, err)
	}
	// One connection: an in-memory database lives in it, and one writer per
	// process needs no more. Other processes are serialised by SQLite's lock.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s := &effectStore{path: path, db: db}
	if err := s.migrate(ctx); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
}

const effectsSchema = `
CREATE TABLE IF NOT EXISTS effect_receipts (
	idempotency_key TEXT PRIMARY KEY,
	name            TEXT NOT NULL,
	payload_sha256  TEXT NOT NULL,
	reference       TEXT NOT NULL,
	committed_at    TEXT NOT NULL,
	puts            INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS effect_values (
	name            TEXT PRIMARY KEY,
	value           TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	committed_at    TEXT NOT NULL
);`

func (s *effectStore) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		if notADatabase(err) {
			return fmt.Errorf("reference: %s: %w: %v", s.path, ErrNotEffectsDB, err)
		}
		return fmt.Errorf("reference: effects database %s: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("reference: effects database %s: %w: %v", s.path, ErrNotEffectsDB, err)
	}
	switch version {
	case effectsSchemaVersion:
	case 0:
		var tables int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
			return fmt.Errorf("reference: effects database %s: %w: %v", s.path, ErrNotEffectsDB, err)
		}
		if tables > 0 {
			return fmt.Errorf("reference: %s: %w: it holds other tables", s.path, ErrNotEffectsDB)
		}
		if _, err := tx.ExecContext(ctx, effectsSchema); err != nil {
			return fmt.Errorf("reference: effects database %s: create schema: %w", s.path, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, effectsSchemaVersion)); err != nil {
			return fmt.Errorf("reference: effects database %s: %w", s.path, err)
		}
	default:
		return fmt.Errorf("reference: %s: %w: schema version %d (this assay reads %d)", s.path, ErrNotEffectsDB, version, effectsSchemaVersion)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reference: effects database %s: %w", s.path, err)
	}
	return nil
}

// notADatabase reports SQLite's SQLITE_NOTADB: the file is not a database.
func notADatabase(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrNotADB
}

func (s *effectStore) close() error { return s.db.Close() }

const receiptColumns = `idempotency_key, name, payload_sha256, reference, committed_at, puts`

// scanReceipt reads one receipt row.
func scanReceipt(row interface{ Scan(...any) error }) (EffectReceipt, error) {
	var rc EffectReceipt
	var at string
	if err := row.Scan(&rc.IdempotencyKey, &rc.Name, &rc.PayloadSHA256, &rc.Reference, &at, &rc.Puts); err != nil {
		return EffectReceipt{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return EffectReceipt{}, fmt.Errorf("receipt %s: committed_at %q: %w", rc.IdempotencyKey, at, err)
	}
	rc.Time, rc.Committed = t, true
	return rc, nil
}

// putResult is what one PUT did.
type putResult struct {
	receipt EffectReceipt
	// created: this PUT committed the effect. conflict: the key has a receipt
	// for another payload.
	created, conflict bool
}

// put commits a under key once: the first PUT inserts the receipt and the
// value; later ones only count. The whole decision is one write transaction,
// so concurrent PUTs (from any process) commit once.
func (s *effectStore) put(ctx context.Context, key string, a remotePutArgs, now time.Time) (putResult, error) {
	payload := a.payloadSHA256()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return putResult{}, fmt.Errorf("effects database %s: begin: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	rc, err := scanReceipt(tx.QueryRowContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts WHERE idempotency_key = ?`, key))
	var res putResult
	switch {
	case errors.Is(err, sql.ErrNoRows):
		at := now.UTC().Format(time.RFC3339Nano)
		rc = EffectReceipt{IdempotencyKey: key, Committed: true, Reference: "ref-" + shortHash(16, key, payload),
			Puts: 1, Name: a.Name, PayloadSHA256: payload}
		rc.Time, _ = time.Parse(time.RFC3339Nano, at)
		if _, err := tx.ExecContext(ctx, `INSERT INTO effect_receipts (`+receiptColumns+`) VALUES (?, ?, ?, ?, ?, 1)`,
			key, a.Name, payload, rc.Reference, at); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: record receipt %s: %w", s.path, key, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO effect_values (name, value, idempotency_key, committed_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, idempotency_key = excluded.idempotency_key, committed_at = excluded.committed_at`,
			a.Name, a.Value, key, at); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: commit %s: %w", s.path, a.Name, err)
		}
		res.created = true
	case err != nil:
		return putResult{}, fmt.Errorf("effects database %s: read receipt %s: %w", s.path, key, err)
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE effect_receipts SET puts = puts + 1 WHERE idempotency_key = ?`, key); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: count PUT of %s: %w", s.path, key, err)
		}
		rc.Puts++
		res.conflict = rc.PayloadSHA256 != payload
	}
	if err := tx.Commit(); err != nil {
		return putResult{}, fmt.Errorf("effects database %s: commit: %w", s.path, err)
	}
	res.receipt = rc
	return res, nil
}

// receipt returns key's receipt, found=false when it has none.
func receiptOf(ctx context.Context, db *sql.DB, path, key string) (EffectReceipt, bool, error) {
	rc, err := scanReceipt(db.QueryRowContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return EffectReceipt{}, false, nil
	}
	if err != nil {
		return EffectReceipt{}, false, fmt.Errorf("effects database %s: receipt %s: %w", path, key, err)
	}
	return rc, true, nil
}
