package metrics

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

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
//
// The descriptors run concurrently (GOMAXPROCS at a time) over the shared,
// read-only Input; the facts several of them share (parsed sources, call
// graph facts) are built before they start. The result does not depend on
// the order in which they finish.
func Compute(ctx context.Context, q Queryer, opts Options) ([]Value, error) {
	in, err := Load(ctx, q, opts)
	if err != nil {
		return nil, err
	}
	return computeInput(ctx, in)
}

// protect runs f and returns what it panicked with, or "" when it
// returned: the goroutines that compute metrics turn a panic into an error
// of the index that asked for them, instead of a crash of its process.
func protect(f func()) (panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// computeInput runs the registry over in (see Compute).
func computeInput(ctx context.Context, in *Input) ([]Value, error) {
	// The sources first: measured from the indexer's syntax trees, which
	// are dropped once measured.
	if _, err := in.sourcesOnce(ctx); err != nil {
		return nil, err
	}
	in.callFacts()
	reg := Registry()
	results := make([][]Value, len(reg))
	errs := make([]error, len(reg))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(in.parallelism(), len(reg)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(reg) {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[i] = fmt.Errorf("metrics: %w", err)
					continue
				}
				var vals []Value
				var err error
				if msg := protect(func() { vals, err = reg[i].Compute(ctx, in) }); msg != "" {
					err = fmt.Errorf("internal error: %s", msg)
				}
				if err != nil {
					errs[i] = fmt.Errorf("metrics: compute %s: %w", reg[i].Name, err)
					continue
				}
				results[i] = vals
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first in registry order
		}
	}
	out := slices.Concat(results...)
	sortValues(out, in.seq)
	return out, nil
}

// sortValues sorts vals by (metric, subject). With seq (see Input.seq),
// subjects compare by their node seqs, which order them as their ids do.
func sortValues(vals []Value, seq func(string) (int64, bool)) {
	byID := func(a, b Value) int {
		return cmp.Or(strings.Compare(a.Metric, b.Metric), strings.Compare(a.Subject, b.Subject))
	}
	if seq == nil {
		slices.SortFunc(vals, byID)
		return
	}
	// Sorting small keys and moving each value once is cheaper than
	// swapping the values themselves.
	type keyed struct {
		metric string
		seq    int64
		i      int
	}
	ks := make([]keyed, len(vals))
	for i, v := range vals {
		s, ok := seq(v.Subject)
		if !ok {
			slices.SortFunc(vals, byID)
			return
		}
		ks[i] = keyed{v.Metric, s, i}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(strings.Compare(a.metric, b.metric), cmp.Compare(a.seq, b.seq))
	})
	sorted := make([]Value, len(vals))
	for i, k := range ks {
		sorted[i] = vals[k.i]
	}
	copy(vals, sorted)
}

// schema creates the metric tables (a CHECK of one of a few values is an
// OR of equalities, not IN: see indexer's schemaDDL). metric_descriptors has one row per
// registry entry (name, title, scope, kind, method, source, doc);
// metric_value_rows one row per value, its subject a nodes.seq (value is
// NULL exactly when kind is 'unavailable', and then reason says why);
// metric_context the one
// snapshot id and build context every value was computed with. The view
// metric_values joins them into one row per value with every column a
// Value has. A value's scope and method are its descriptor's, and its
// snapshot and build context are the database's, so storing them once
// loses nothing and keeps the database (and its integrity check, hash and
// sync) smaller.
var schema = []string{
	`CREATE TABLE metric_descriptors (
		name   TEXT PRIMARY KEY,
		title  TEXT NOT NULL,
		scope  TEXT NOT NULL CHECK (scope = 'package' OR scope = 'type' OR scope = 'func'),
		kind   TEXT NOT NULL,
		method TEXT NOT NULL,
		source TEXT NOT NULL,
		doc    TEXT NOT NULL
	)`,
	`CREATE TABLE metric_context (
		snapshot_id   TEXT NOT NULL REFERENCES snapshots(id),
		build_context TEXT NOT NULL
	)`,
	`CREATE TABLE metric_value_rows (
		metric   TEXT NOT NULL REFERENCES metric_descriptors(name),
		subject  INTEGER NOT NULL REFERENCES nodes(seq),
		value    REAL,
		kind     TEXT NOT NULL CHECK (kind = 'measured' OR kind = 'proxy' OR kind = 'unavailable'),
		reason   TEXT,
		detail   TEXT,
		coverage REAL NOT NULL CHECK (coverage >= 0 AND coverage <= 1),
		origin   TEXT NOT NULL,
		variant  TEXT NOT NULL,
		PRIMARY KEY (metric, subject),
		CHECK ((kind = 'unavailable') = (value IS NULL)),
		CHECK (kind != 'unavailable' OR reason IS NOT NULL)
	) WITHOUT ROWID`,
	`CREATE VIEW metric_values AS
		SELECT r.metric AS metric, n.id AS subject, d.scope AS scope, r.value AS value, r.kind AS kind, d.method AS method,
			r.reason AS reason, r.detail AS detail, r.coverage AS coverage, c.snapshot_id AS snapshot_id,
			c.build_context AS build_context, r.origin AS origin, r.variant AS variant
		FROM metric_value_rows r JOIN nodes n ON n.seq = r.subject JOIN metric_descriptors d ON d.name = r.metric
		CROSS JOIN metric_context c`,
}

// ErrValueMismatch is returned (wrapped, naming the value) by Write when a
// value's scope or method is not its descriptor's, or its snapshot or build
// context differs from the other values': the storage keeps them once, so
// such a value cannot be stored faithfully.
var ErrValueMismatch = errors.New("metrics: value does not match its descriptor or snapshot")

// Write creates the metric tables in tx and inserts the registry's
// descriptors and vals. Errors: ErrValueMismatch (wrapped) for a value
// that does not match its descriptor or the other values' snapshot and
// build context, for a metric not in the registry, or for a subject that
// is not a node of the graph; wrapped SQLite errors.
func Write(ctx context.Context, tx *sql.Tx, vals []Value) error {
	return write(ctx, tx, vals, nil)
}

// txWriter is what the values are written through: a *sql.Tx, or the
// *indexer.Tx an index writes in (indexer.InsertBatched inserts on its
// connection directly).
type txWriter interface {
	Queryer
	indexer.Preparer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// write is Write with each subject's nodes.seq given by seq (nil: read
// from the nodes table in tx).
func write(ctx context.Context, tx txWriter, vals []Value, seq func(id string) (int64, bool)) error {
	reg := map[string]*Descriptor{}
	for _, d := range Registry() {
		reg[d.Name] = d
	}
	for i := range vals {
		v := &vals[i]
		d := reg[v.Metric]
		switch {
		case d == nil:
			return fmt.Errorf("%w: %s of %s: no such metric in the registry", ErrValueMismatch, v.Metric, v.Subject)
		case v.Scope != d.Scope || v.Method != d.Method.String():
			return fmt.Errorf("%w: %s of %s: scope %s method %s, descriptor %s %s", ErrValueMismatch, v.Metric, v.Subject,
				v.Scope, v.Method, d.Scope, d.Method)
		case v.SnapshotID != vals[0].SnapshotID || v.BuildContext != vals[0].BuildContext:
			return fmt.Errorf("%w: %s of %s: snapshot %s %q, first value %s %q", ErrValueMismatch, v.Metric, v.Subject,
				v.SnapshotID, v.BuildContext, vals[0].SnapshotID, vals[0].BuildContext)
		}
	}
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
	if len(vals) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO metric_context (snapshot_id, build_context) VALUES (?, ?)`,
		vals[0].SnapshotID, vals[0].BuildContext); err != nil {
		return fmt.Errorf("metrics: insert metric context: %w", err)
	}
	if seq == nil {
		seqOf := map[string]int64{}
		if err := scanRows(ctx, tx, `SELECT id, seq FROM nodes`, func(rows *sql.Rows) error {
			var id string
			var s int64
			if err := rows.Scan(&id, &s); err != nil {
				return err
			}
			seqOf[id] = s
			return nil
		}); err != nil {
			return err
		}
		seq = func(id string) (int64, bool) {
			s, ok := seqOf[id]
			return s, ok
		}
	}
	subjects := make([]int64, len(vals))
	for i, v := range vals {
		s, ok := seq(v.Subject)
		if !ok {
			return fmt.Errorf("%w: %s of %s: no such node in the graph", ErrValueMismatch, v.Metric, v.Subject)
		}
		subjects[i] = s
	}
	// The values as SQLite takes them, in one slice reused for every row
	// (InsertBatched copies them).
	row := make([]any, 9)
	err := indexer.InsertBatched(ctx, tx, "metric_value_rows", `INSERT INTO metric_value_rows (metric, subject, value, kind, reason, detail,
		coverage, origin, variant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, len(vals), func(i int) []any {
		v := &vals[i]
		row[0], row[1], row[2] = v.Metric, subjects[i], nil
		if v.Value != nil {
			row[2] = *v.Value
		}
		row[3], row[4], row[5], row[6], row[7], row[8] = string(v.Kind), textOrNull(v.Reason), textOrNull(v.Detail), v.Coverage, v.Origin, v.Variant
		return row
	})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// textOrNull is s as SQLite takes it, "" as NULL.
func textOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Enrich returns the hook indexer.Options.Enrich takes: it computes every
// metric from the in-memory graph of the index (see FromGraph) while the
// indexer inserts it, and returns the function that writes the values into
// the indexer's transaction, so that the database's SHA-256 covers them.
// The values are those Compute gives from the written database. Use
// RegistryID() as indexer.Options.EnrichID.
func Enrich(opts Options) indexer.EnrichFunc {
	return func(ctx context.Context, g *indexer.GraphView) (func(context.Context, *indexer.Tx) error, error) {
		in := FromGraph(g, opts)
		g.Syntax = nil // in holds the trees until the sources are measured
		// The database inserts take one core meanwhile.
		in.workers = max(1, runtime.GOMAXPROCS(0)-1)
		vals, err := computeInput(ctx, in)
		if err != nil {
			return nil, err
		}
		// The indexer numbered the nodes: no need to read them back.
		return func(ctx context.Context, tx *indexer.Tx) error { return write(ctx, tx, vals, g.NodeSeq) }, nil
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
		return nil, fmt.Errorf("%w: %s (`assay index` computes them unless given --metrics=false)", ErrNoMetrics, path)
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
