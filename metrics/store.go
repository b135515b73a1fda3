package metrics

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/assay-audit/assay/indexer"
)

// ErrNoMetrics is returned (wrapped, naming the database) by Read when the
// graph database holds no metric values (it was written without Enrich).
var ErrNoMetrics = errors.New("metrics: the graph database holds no metric values")

// ErrSnapshotMismatch is returned (wrapped, naming both ids) by Read when
// the database's snapshot is not the one asked for.
var ErrSnapshotMismatch = errors.New("metrics: snapshot not in the graph database")

// Compute loads the graph through q and runs every descriptor of the
// registry, returning their values sorted by (metric, subject). Errors are
// Load's, a descriptor's (wrapped with its name), or ctx's.
func Compute(ctx context.Context, q Queryer, opts Options) ([]Value, error) {
	in, err := Load(ctx, q, opts)
	if err != nil {
		return nil, err
	}
	var out []Value
	for _, d := range Registry() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		vals, err := d.Compute(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("metrics: compute %s: %w", d.Name, err)
		}
		out = append(out, vals...)
	}
	slices.SortFunc(out, func(a, b Value) int {
		if c := strings.Compare(a.Metric, b.Metric); c != 0 {
			return c
		}
		return strings.Compare(a.Subject, b.Subject)
	})
	return out, nil
}

// schema creates the metric tables: metric_descriptors (one row per
// registry entry: name, title, scope, kind, method, source, doc) and
// metric_values (one row per value; value is NULL exactly when kind is
// 'unavailable', and then reason says why).
var schema = []string{
	`CREATE TABLE metric_descriptors (
		name   TEXT PRIMARY KEY,
		title  TEXT NOT NULL,
		scope  TEXT NOT NULL,
		kind   TEXT NOT NULL,
		method TEXT NOT NULL,
		source TEXT NOT NULL,
		doc    TEXT NOT NULL
	)`,
	`CREATE TABLE metric_values (
		metric        TEXT NOT NULL REFERENCES metric_descriptors(name),
		subject       TEXT NOT NULL REFERENCES nodes(id),
		scope         TEXT NOT NULL CHECK (scope IN ('package', 'type', 'func')),
		value         REAL,
		kind          TEXT NOT NULL CHECK (kind IN ('measured', 'proxy', 'unavailable')),
		method        TEXT NOT NULL,
		reason        TEXT,
		detail        TEXT,
		coverage      REAL NOT NULL CHECK (coverage >= 0 AND coverage <= 1),
		snapshot_id   TEXT NOT NULL REFERENCES snapshots(id),
		build_context TEXT NOT NULL,
		origin        TEXT NOT NULL,
		variant       TEXT NOT NULL,
		PRIMARY KEY (metric, subject),
		CHECK ((kind = 'unavailable') = (value IS NULL)),
		CHECK (kind != 'unavailable' OR reason IS NOT NULL)
	) WITHOUT ROWID`,
}

// Write creates the metric tables in tx and inserts the registry's
// descriptors and vals.
func Write(ctx context.Context, tx *sql.Tx, vals []Value) error {
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("metrics: create tables: %w", err)
		}
	}
	for _, d := range Registry() {
		if _, err := tx.ExecContext(ctx, `INSERT INTO metric_descriptors (name, title, scope, kind, method, source, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			d.Name, d.Title, string(d.Scope), string(d.Kind), d.Method.String(), d.Source, d.Doc); err != nil {
			return fmt.Errorf("metrics: insert descriptor %s: %w", d.Name, err)
		}
	}
	err := indexer.InsertBatched(ctx, tx, "metric_values", `INSERT INTO metric_values (metric, subject, scope, value, kind, method, reason, detail, coverage,
		snapshot_id, build_context, origin, variant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, len(vals), func(i int) []any {
		v := vals[i]
		var val sql.Null[float64]
		if v.Value != nil {
			val = sql.Null[float64]{V: *v.Value, Valid: true}
		}
		return []any{v.Metric, v.Subject, string(v.Scope), val, string(v.Kind), v.Method,
			nullString(v.Reason), nullString(v.Detail), v.Coverage, v.SnapshotID, v.BuildContext, v.Origin, v.Variant}
	})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

func nullString(s string) sql.Null[string] { return sql.Null[string]{V: s, Valid: s != ""} }

// Enrich returns the hook indexer.Options.Enrich takes: it computes every
// metric over the graph just written, inside the same transaction, and
// writes the values, so that the database's SHA-256 covers them. Use
// RegistryID() as indexer.Options.EnrichID.
func Enrich(opts Options) func(context.Context, *sql.Tx, indexer.Snapshot) error {
	return func(ctx context.Context, tx *sql.Tx, _ indexer.Snapshot) error {
		vals, err := Compute(ctx, tx, opts)
		if err != nil {
			return err
		}
		return Write(ctx, tx, vals)
	}
}

// Filter selects the values Read returns. Zero fields select everything.
type Filter struct {
	// SnapshotID, when set, must be the database's snapshot.
	SnapshotID string
	// Scope keeps values of one scope.
	Scope Scope
	// Metrics keeps values of these metrics.
	Metrics []string
}

// Read returns the metric values stored in the graph database at path,
// sorted by (metric, subject). Errors: indexer.OpenDatabase's (missing
// file, other schema version); ErrSnapshotMismatch when f.SnapshotID is
// not the database's snapshot; ErrNoMetrics when no values were written.
func Read(ctx context.Context, path string, f Filter) ([]Value, error) {
	db, err := indexer.OpenDatabase(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var snap string
	if err := db.QueryRowContext(ctx, "SELECT id FROM snapshots").Scan(&snap); err != nil {
		return nil, fmt.Errorf("metrics: read snapshot of %s: %w", path, err)
	}
	if f.SnapshotID != "" && f.SnapshotID != snap && !strings.HasPrefix(snap, f.SnapshotID) {
		return nil, fmt.Errorf("%w: asked for %s, %s holds %s", ErrSnapshotMismatch, f.SnapshotID, path, snap)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'metric_values'").Scan(&n); err != nil {
		return nil, fmt.Errorf("metrics: inspect %s: %w", path, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s (index it with `assay index`)", ErrNoMetrics, path)
	}
	q := `SELECT metric, subject, scope, value, kind, method, coalesce(reason, ''), coalesce(detail, ''), coverage,
		snapshot_id, build_context, origin, variant FROM metric_values`
	var where []string
	var args []any
	if f.Scope != "" {
		where = append(where, "scope = ?")
		args = append(args, string(f.Scope))
	}
	if len(f.Metrics) > 0 {
		where = append(where, "metric IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(f.Metrics)), ", ")+")")
		for _, m := range f.Metrics {
			args = append(args, m)
		}
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY metric, subject"
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("metrics: query %s: %w", path, err)
	}
	defer rows.Close()
	var out []Value
	for rows.Next() {
		var v Value
		var val sql.Null[float64]
		var scope, kind string
		if err := rows.Scan(&v.Metric, &v.Subject, &scope, &val, &kind, &v.Method, &v.Reason, &v.Detail, &v.Coverage,
			&v.SnapshotID, &v.BuildContext, &v.Origin, &v.Variant); err != nil {
			return nil, fmt.Errorf("metrics: scan %s: %w", path, err)
		}
		v.Scope, v.Kind = Scope(scope), Kind(kind)
		if val.Valid {
			x := val.V
			v.Value = &x
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metrics: read %s: %w", path, err)
	}
	return out, nil
}
