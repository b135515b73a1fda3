package evidence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// QueryResult is the result of a read-only SQL query for `assay sql`.
type QueryResult struct {
	Columns []string // column names in result order
	// Rows holds the values as database/sql scans them into `any` from the
	// DuckDB driver: nil, bool, int8..int64, uint8..uint64, float32/float64,
	// string, []byte, time.Time, *big.Int (HUGEINT), duckdb.Decimal,
	// duckdb.Interval, []any (LIST), map[string]any (STRUCT, JSON objects) ...
	Rows [][]any
}

// Query runs exactly one SQL statement on the store's read-only connection
// and returns all its rows. The store must have been opened ReadOnly.
//
// Writes are refused by DuckDB itself, not by parsing the SQL: the database is
// attached with access_mode=read_only, and the connection runs with
// enable_external_access=false and lock_configuration=true, so INSERT, CREATE,
// COPY ... TO, ATTACH, INSTALL and LOAD all fail and cannot be re-enabled.
//
// Errors: ErrNotReadOnly when the store is open for writing; a *QueryError
// (ErrBadQuery) for a statement refused or failing as a statement: more than
// one statement (also ErrMultipleStatements), only comments (also ErrNoStatement), DuckDB's error (*duckdb.Error)
// for a malformed statement, a write, a failed conversion; DuckDB's error
// alone when the store failed to read (I/O, out of memory, an internal or
// fatal error); ctx's error when cancelled (DuckDB interrupts the query);
// ErrClosed.
func (s *Store) Query(ctx context.Context, query string) (*QueryResult, error) {
	if !s.readOnly {
		return nil, fmt.Errorf("evidence: %s: %w", s.path, ErrNotReadOnly)
	}
	if strings.TrimSpace(query) == "" {
		return nil, fieldErr(ErrInvalidArgument, "query", "empty")
	}
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	conn := s.conn
	// Preparing without a context is how the DuckDB driver refuses more than
	// one statement; DuckDB's own errors (syntax, binding) pass through.
	err := conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		st, err := c.Prepare(query)
		if err != nil {
			var de *duckdb.Error
			if errors.As(err, &de) {
				return err
			}
			// The driver's refusals name its own API ("try using PrepareContext"), which is no
			// help to the one who wrote the query: say what is wrong with the query instead. Its
			// "empty query" (unexported) is a query of comments only.
			if strings.Contains(err.Error(), "empty query") {
				return &QueryError{Err: ErrNoStatement}
			}
			return &QueryError{Err: ErrMultipleStatements}
		}
		if st.NumInput() != 0 {
			_ = st.Close()
			return &QueryError{Err: ErrQueryParameters}
		}
		return st.Close()
	})
	if err != nil {
		return nil, queryErr(err)
	}
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, queryErr(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, queryErr(err)
	}
	res := &QueryResult{Columns: cols, Rows: [][]any{}}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, queryErr(err)
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return nil, queryErr(err)
	}
	return res, nil
}

// queryErr tells a statement refused or failing as a statement (a
// *QueryError) from the store failing to run it: DuckDB's I/O, connection,
// memory, interruption, internal and fatal errors, and errors that are not
// DuckDB's (the context's), pass through wrapped as they are.
func queryErr(err error) error {
	var qe *QueryError
	if errors.As(err, &qe) {
		return err
	}
	var de *duckdb.Error
	if !errors.As(err, &de) {
		return fmt.Errorf("evidence: query: %w", err)
	}
	switch de.Type {
	case duckdb.ErrorTypeIO, duckdb.ErrorTypeConnection, duckdb.ErrorTypeOutOfMemory, duckdb.ErrorTypeInterrupt,
		duckdb.ErrorTypeInternal, duckdb.ErrorTypeFatal:
		return fmt.Errorf("evidence: query: %w", err)
	}
	return &QueryError{Err: err}
}
