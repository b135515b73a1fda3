package reference

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/assay-audit/assay/internal/sqliteuri"
	"github.com/assay-audit/assay/runtime/effect"
)

// EffectsReader reads an effects database directly, without a server: the
// receipt lookup that still works after the provider that served the effects
// is gone (assay reconcile, assay resume). It implements effect.Backend and
// is safe for concurrent use.
type EffectsReader struct {
	path string
	db   *sql.DB
}

// OpenEffectsReader opens the effects database at path read-only. It returns
// ErrNoEffectsDB (wrapped, matching fs.ErrNotExist) when there is no file,
// and ErrNotEffectsDB (wrapped) for a file that is not an effects database.
func OpenEffectsReader(ctx context.Context, path string) (*EffectsReader, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("reference: effects database %q: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reference: %w at %s", ErrNoEffectsDB, abs)
	} else if err != nil {
		return nil, fmt.Errorf("reference: effects database %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=ro&_busy_timeout=10000"))
	if err != nil {
		return nil, fmt.Errorf("reference: open effects database %s: %w", abs, err)
	}
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return nil, errors.Join(fmt.Errorf("reference: %s: %w: %v", abs, ErrNotEffectsDB, err), db.Close())
	}
	if version != effectsSchemaVersion {
		return nil, errors.Join(fmt.Errorf("reference: %s: %w: schema version %d (this assay reads %d)", abs, ErrNotEffectsDB,
			version, effectsSchemaVersion), db.Close())
	}
	return &EffectsReader{path: abs, db: db}, nil
}

// Path is the database's absolute path.
func (r *EffectsReader) Path() string { return r.path }

// Receipt returns the service's receipt for key (with its PUT count),
// found=false when the key has none, or an error when the database could not
// be read.
func (r *EffectsReader) Receipt(ctx context.Context, key string) (EffectReceipt, bool, error) {
	return receiptOf(ctx, r.db, r.path, key)
}

// Receipts returns every receipt the service committed, ordered by key, or an error
// when the database could not be read: what an auditor reads to find effects no recorded intent
// accounts for.
func (r *EffectsReader) Receipts(ctx context.Context) ([]EffectReceipt, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts ORDER BY idempotency_key`)
	if err != nil {
		return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
	}
	defer rows.Close()
	var out []EffectReceipt
	for rows.Next() {
		rc, err := scanReceipt(rows)
		if err != nil {
			return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
	}
	return out, nil
}

// Value returns the value committed under name and the idempotency key of
// the PUT that committed it, found=false when nothing was committed under it.
func (r *EffectsReader) Value(ctx context.Context, name string) (value, key string, found bool, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT value, idempotency_key FROM effect_values WHERE name = ?`, name).Scan(&value, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("effects database %s: value %s: %w", r.path, name, err)
	}
	return value, key, true, nil
}

// Lookup implements effect.Backend: the receipt of q.IdempotencyKey, found
// only when the service committed the effect. The service knows effects by
// their own key only, so q.BatchKey is not consulted.
func (r *EffectsReader) Lookup(ctx context.Context, q effect.Query) (effect.Receipt, bool, error) {
	rc, found, err := r.Receipt(ctx, q.IdempotencyKey)
	if err != nil || !found {
		return effect.Receipt{}, false, err
	}
	return rc.Receipt(), true, nil
}

// Close closes the database.
func (r *EffectsReader) Close() error { return r.db.Close() }
