package indexer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// TestInsertBatchedBothPaths inserts the same rows through the driver
// connection (the *Tx Index writes in) and through database/sql (a
// *sql.Tx), at row counts around the batch size, and
// compares what each table holds with what was given.
func TestInsertBatchedBothPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, n := range []int{0, 1, insertBatch - 1, insertBatch, insertBatch + 1, 2*insertBatch + 3} {
		for _, viaDriver := range []bool{true, false} {
			t.Run(fmt.Sprintf("n=%d/driver=%v", n, viaDriver), func(t *testing.T) {
				t.Parallel()
				tx := openTestTx(t, viaDriver)
				if _, err := tx.ExecContext(ctx, `CREATE TABLE r (i INTEGER, s TEXT, f REAL, ns TEXT, b INTEGER)`); err != nil {
					t.Fatal(err)
				}
				err := InsertBatched(ctx, tx, "r", `INSERT INTO r (i, s, f, ns, b) VALUES (?, ?, ?, ?, ?)`, n, func(i int) []any {
					return []any{i, fmt.Sprintf("row %d", i), float64(i) / 4, nonEmpty(strings.Repeat("x", i%3)), boolInt(i%2 == 0)}
				})
				if err != nil {
					t.Fatal(err)
				}
				rows, err := tx.QueryContext(ctx, `SELECT i, s, f, ns, b FROM r ORDER BY rowid`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				got := 0
				for rows.Next() {
					var i, b int
					var s string
					var f float64
					var ns sql.NullString
					if err := rows.Scan(&i, &s, &f, &ns, &b); err != nil {
						t.Fatal(err)
					}
					want := strings.Repeat("x", got%3)
					if i != got || s != fmt.Sprintf("row %d", got) || f != float64(got)/4 || ns.Valid != (want != "") || ns.String != want || b != boolInt(got%2 == 0) {
						t.Fatalf("row %d: got (%d, %q, %v, %v, %d)", got, i, s, f, ns, b)
					}
					got++
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if got != n {
					t.Fatalf("%d rows in the table, %d inserted", got, n)
				}
			})
		}
	}
}

// TestInsertBatchedRefusesNonSQLiteValues: a value the driver cannot bind
// is an error naming the table and the row, not a silent NULL.
func TestInsertBatchedRefusesNonSQLiteValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := openTestTx(t, true)
	if _, err := tx.ExecContext(ctx, `CREATE TABLE r (i INTEGER)`); err != nil {
		t.Fatal(err)
	}
	err := InsertBatched(ctx, tx, "r", `INSERT INTO r (i) VALUES (?)`, 3, func(i int) []any {
		if i == 2 {
			return []any{int32(7)}
		}
		return []any{i}
	})
	if err == nil || !strings.Contains(err.Error(), "insert into r (row 2)") || !strings.Contains(err.Error(), "int32") {
		t.Fatalf("err = %v, want a refusal of row 2's int32", err)
	}
}

// testTx is what the tests do with a transaction: *Tx and *sql.Tx alike.
type testTx interface {
	Preparer
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// openTestTx opens a database in a temporary directory and a transaction
// on one connection: as Index's *Tx when viaDriver, else the *sql.Tx. The
// test's cleanup rolls the transaction back, then closes the connection
// and the database (a connection does not close while a transaction is
// open).
func openTestTx(t *testing.T, viaDriver bool) testTx {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite3", sqliteuri.File(filepath.Join(t.TempDir(), "t.db"), ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if viaDriver {
		return &Tx{tx: tx, conn: conn}
	}
	return tx
}

// TestInsertBatchedRefusesShortRows: go-sqlite3 leaves parameters it is
// not given NULL, so a row with a value missing would shift every later
// value into the wrong column and still succeed. The driver path counts.
func TestInsertBatchedRefusesShortRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := openTestTx(t, true)
	if _, err := tx.ExecContext(ctx, `CREATE TABLE r (a INTEGER, b INTEGER, c TEXT)`); err != nil {
		t.Fatal(err)
	}
	err := InsertBatched(ctx, tx, "r", `INSERT INTO r (a, b, c) VALUES (?, ?, ?)`, 300, func(i int) []any {
		if i == 100 {
			return []any{i}
		}
		return []any{i, i + 1, "row"}
	})
	if err == nil || !strings.Contains(err.Error(), "insert into r (row 100): 1 values for 3 columns") {
		t.Fatalf("err = %v, want a refusal of row 100", err)
	}
}

// TestInsertBatchedStopsWhenCancelled: a cancelled context ends the
// inserts with its error before the next batch.
func TestInsertBatchedStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	tx := openTestTx(t, true)
	if _, err := tx.ExecContext(ctx, `CREATE TABLE r (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	err := InsertBatched(ctx, tx, "r", `INSERT INTO r (a) VALUES (?)`, 3*insertBatch, func(i int) []any {
		if i == insertBatch+1 {
			cancel()
		}
		return []any{i}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestInsertBatchedReportsConstraintViolations: the driver path runs each
// batch as a query whose first step does the insert; a row that breaks a
// constraint in a later batch must still fail the call, naming the batch,
// and leave no row of that batch behind.
func TestInsertBatchedReportsConstraintViolations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, viaDriver := range []bool{true, false} {
		t.Run(fmt.Sprintf("driver=%v", viaDriver), func(t *testing.T) {
			t.Parallel()
			tx := openTestTx(t, viaDriver)
			if _, err := tx.ExecContext(ctx, `CREATE TABLE r (a INTEGER PRIMARY KEY, b TEXT NOT NULL CHECK (b != 'bad'))`); err != nil {
				t.Fatal(err)
			}
			bad := insertBatch + 7
			err := InsertBatched(ctx, tx, "r", `INSERT INTO r (a, b) VALUES (?, ?)`, 2*insertBatch, func(i int) []any {
				if i == bad {
					return []any{i, "bad"}
				}
				return []any{i, "ok"}
			})
			want := fmt.Sprintf("insert into r (rows %d..%d)", insertBatch, 2*insertBatch-1)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "CHECK constraint failed") {
				t.Fatalf("err = %v, want %q with the CHECK failure", err, want)
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM r`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != insertBatch {
				t.Fatalf("%d rows after the failed batch, want the first batch's %d", n, insertBatch)
			}
		})
	}
}

// TestInsertBatchedRefusesRowsOfAnotherLength: a row with a value missing
// and another with one too many make a batch of the right number of
// values, every value between them in the wrong column; both paths refuse
// the first row whose length is not the statement's.
func TestInsertBatchedRefusesRowsOfAnotherLength(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, viaDriver := range []bool{true, false} {
		tx := openTestTx(t, viaDriver)
		if _, err := tx.ExecContext(ctx, `CREATE TABLE r (a INTEGER, b INTEGER, c TEXT)`); err != nil {
			t.Fatal(err)
		}
		err := InsertBatched(ctx, tx, "r", `INSERT INTO r (a, b, c) VALUES (?, ?, ?)`, 10, func(i int) []any {
			switch i {
			case 3:
				return []any{i, i + 1}
			case 6:
				return []any{i, i + 1, "row", "extra"}
			}
			return []any{i, i + 1, "row"}
		})
		if err == nil || !strings.Contains(err.Error(), "insert into r (row 3): 2 values for 3 columns") {
			t.Errorf("driver %v: err = %v, want a refusal of row 3", viaDriver, err)
		}
	}
}
