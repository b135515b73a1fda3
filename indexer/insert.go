package indexer

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
)

// Tx is the transaction Index writes a database in, as an enrichment's
// write function gets it (EnrichFunc): what is written through it is
// covered by the database's checks and SHA-256. InsertBatched inserts
// through it on the SQLite connection directly. Not safe for concurrent
// use; valid only during the write function's call.
type Tx struct {
	tx   *sql.Tx
	conn *sql.Conn // the connection tx runs on
}

// ExecContext runs a statement in the transaction (sql.Tx.ExecContext).
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction (sql.Tx.QueryContext).
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query for one row in the transaction
// (sql.Tx.QueryRowContext).
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement in the transaction
// (sql.Tx.PrepareContext).
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}

// Preparer is what InsertBatched inserts through: a *sql.Tx (or *sql.DB,
// *sql.Conn), or the *Tx Index writes in.
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// insertRows inserts rows with multi-row INSERT statements (up to
// insertBatch rows each): one cgo call per batch instead of per row.
// query is a single-row "INSERT ... VALUES (?, ...)" statement.
func insertRows[T any](ctx context.Context, tx *Tx, table, query string, rows []T, args func(T) []any) error {
	return InsertBatched(ctx, tx, table, query, len(rows), func(i int) []any { return args(rows[i]) })
}

// insertBatch bounds the rows of one multi-row INSERT; with at most 13
// columns it stays far below SQLite's variable limit.
const insertBatch = 256

// InsertBatched executes query, a single-row "INSERT ... VALUES (?, ...)"
// statement, for rows 0..n-1 (args(i) gives row i's values), as multi-row
// INSERT statements of up to insertBatch rows in tx. It is exported for
// packages that write tables into the graph database (metrics). When tx is
// the *Tx Index writes in, the statements run on its SQLite connection
// directly, without database/sql's conversion of every call's arguments;
// otherwise through tx. Values must be nil, string, int, int64, float64,
// bool or a sql.Null of string, int, int64 or float64. args may return
// the same slice every call: its values are copied before the next.
// Errors name table and the first row of the failing batch.
func InsertBatched(ctx context.Context, tx Preparer, table, query string, n int, args func(i int) []any) error {
	head, group, ok := strings.Cut(query, "VALUES")
	if !ok {
		return fmt.Errorf("insert into %s: query has no VALUES clause", table)
	}
	group = strings.TrimSpace(group)
	multiRow := func(k int) string {
		var b strings.Builder
		b.WriteString(head)
		b.WriteString("VALUES ")
		for i := 0; i < k; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(group)
		}
		return b.String()
	}
	// go-sqlite3 binds what it is given and leaves the rest NULL, and
	// database/sql counts only a batch's values: a short or long row
	// would shift every later value silently. Count each row's.
	cols := strings.Count(group, "?")
	if t, ok := tx.(*Tx); ok {
		return t.conn.Raw(func(dc any) error {
			return insertDriver(ctx, dc, table, multiRow, n, cols, args)
		})
	}
	prepare := func(k int) (*sql.Stmt, error) {
		stmt, err := tx.PrepareContext(ctx, multiRow(k))
		if err != nil {
			return nil, fmt.Errorf("prepare insert into %s: %w", table, err)
		}
		return stmt, nil
	}
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	var vals []any
	for start := 0; start < n; start += insertBatch {
		end := min(start+insertBatch, n)
		vals = vals[:0]
		for i := start; i < end; i++ {
			row := args(i)
			if len(row) != cols {
				return fmt.Errorf("insert into %s (row %d): %d values for %d columns", table, i, len(row), cols)
			}
			for _, v := range row {
				vals = append(vals, plainValue(v))
			}
		}
		stmt := full
		if end-start == insertBatch {
			if full == nil {
				var err error
				if full, err = prepare(insertBatch); err != nil {
					return err
				}
			}
			stmt = full
		} else {
			var err error
			if stmt, err = prepare(end - start); err != nil {
				return err
			}
			defer stmt.Close()
		}
		if _, err := stmt.ExecContext(ctx, vals...); err != nil {
			return fmt.Errorf("insert into %s (rows %d..%d): %w", table, start, end-1, err)
		}
	}
	return nil
}

// insertDriver is InsertBatched on the driver connection dc (go-sqlite3's):
// one argument slice serves every batch, and no per-call conversion runs.
// multiRow(k) is the INSERT statement for k rows. Statements run through
// the driver's Query, not Exec: go-sqlite3 (v1.14.53) binds a query's
// arguments and takes its first step in one cgo call, where Exec crosses
// into C once per bound value; an INSERT is done at that first step.
func insertDriver(ctx context.Context, dc any, table string, multiRow func(k int) string, n, cols int, args func(i int) []any) error {
	conn, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("insert into %s: driver connection %T cannot prepare statements", table, dc)
	}
	prepare := func(k int) (driver.StmtQueryContext, func(), error) {
		stmt, err := conn.PrepareContext(ctx, multiRow(k))
		if err != nil {
			return nil, nil, fmt.Errorf("prepare insert into %s: %w", table, err)
		}
		query, ok := stmt.(driver.StmtQueryContext)
		if !ok {
			stmt.Close()
			return nil, nil, fmt.Errorf("insert into %s: driver statement %T cannot run with a context", table, stmt)
		}
		return query, func() { stmt.Close() }, nil
	}
	var full driver.StmtQueryContext
	var vals []driver.NamedValue
	for start := 0; start < n; start += insertBatch {
		// The index's transaction is not rolled back by database/sql when ctx
		// ends (see fillDatabase): stop here, with ctx's error.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
		end := min(start+insertBatch, n)
		vals = vals[:0]
		for i := start; i < end; i++ {
			row := args(i)
			if len(row) != cols {
				return fmt.Errorf("insert into %s (row %d): %d values for %d columns", table, i, len(row), cols)
			}
			for _, v := range row {
				dv, err := driverValue(v)
				if err != nil {
					return fmt.Errorf("insert into %s (row %d): %w", table, i, err)
				}
				vals = append(vals, driver.NamedValue{Ordinal: len(vals) + 1, Value: dv})
			}
		}
		stmt := full
		if end-start == insertBatch && full != nil {
			stmt = full
		} else {
			s, closeStmt, err := prepare(end - start)
			if err != nil {
				return err
			}
			defer closeStmt()
			stmt = s
			if end-start == insertBatch {
				full = s
			}
		}
		rows, err := stmt.QueryContext(ctx, vals)
		if err == nil {
			err = rows.Close()
		}
		if err != nil {
			return fmt.Errorf("insert into %s (rows %d..%d): %w", table, start, end-1, err)
		}
	}
	return nil
}

// driverValue is plainValue for a driver: it refuses what is not a
// driver.Value once plain.
func driverValue(v any) (driver.Value, error) {
	switch v := plainValue(v).(type) {
	case nil:
		return nil, nil
	case string, int64, float64, bool, []byte:
		return v, nil
	default:
		return nil, fmt.Errorf("value of type %T is not an SQLite value", v)
	}
}

// sqlText is s as SQLite takes it: the string, or nil for NULL.
func sqlText(s sql.Null[string]) any {
	if !s.Valid {
		return nil
	}
	return s.V
}

// plainValue turns the nullable and integer types the rows use into the
// driver values they stand for (nil, int64, float64, string), so that
// database/sql passes them on without a conversion through driver.Valuer
// and reflection per value. Other values are returned unchanged.
func plainValue(v any) any {
	switch v := v.(type) {
	case sql.Null[string]:
		if !v.Valid {
			return nil
		}
		return v.V
	case sql.Null[int]:
		if !v.Valid {
			return nil
		}
		return int64(v.V)
	case sql.Null[int64]:
		if !v.Valid {
			return nil
		}
		return v.V
	case sql.Null[float64]:
		if !v.Valid {
			return nil
		}
		return v.V
	case int:
		return int64(v)
	}
	return v
}
