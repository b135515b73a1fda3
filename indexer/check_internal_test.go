package indexer

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckClosedDatabaseRefuses: the checks that run on every written
// database fail on a foreign key violation and on a corrupted index, and
// pass on the same database before it was damaged.
func TestCheckClosedDatabaseRefuses(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, stmts ...string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "g.db")
		db, err := sql.Open("sqlite3", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, s := range stmts {
			if _, err := db.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
		return path
	}
	schema := []string{
		"PRAGMA page_size = 4096",
		"CREATE TABLE p (id TEXT PRIMARY KEY)",
		"CREATE TABLE c (id INTEGER PRIMARY KEY, p TEXT REFERENCES p(id), v TEXT)",
		"CREATE INDEX c_v ON c(v)",
		"INSERT INTO p VALUES ('a')",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO c SELECT i, 'a', printf('value %08d', i) FROM n",
	}

	good := create(t, schema...)
	if err := checkClosedDatabase(ctx, good); err != nil {
		t.Fatalf("undamaged database refused: %v", err)
	}

	orphan := create(t, append(schema, "INSERT INTO c VALUES (9999, 'missing', 'x')")...)
	err := checkClosedDatabase(ctx, orphan)
	if !errors.Is(err, ErrDatabaseCheck) || !strings.Contains(err.Error(), "foreign_key_check") {
		t.Fatalf("foreign key violation: got %v, want ErrDatabaseCheck from foreign_key_check", err)
	}

	// Overwrite the middle of the index's pages with a valid-looking but
	// wrong payload: the index no longer matches its table.
	broken := create(t, schema...)
	db, err := sql.Open("sqlite3", "file:"+broken+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var root int64
	if err := db.QueryRow("SELECT rootpage FROM sqlite_schema WHERE name = 'c_v'").Scan(&root); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.OpenFile(broken, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The root page of a multi-page index is an interior page; damage the
	// page after it (a leaf of the index): its cells point nowhere valid.
	page := make([]byte, 4096)
	if _, err := f.ReadAt(page, root*4096); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < len(page); i++ {
		page[i] ^= 0x5a
	}
	if _, err := f.WriteAt(page, root*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = checkClosedDatabase(ctx, broken)
	if !errors.Is(err, ErrDatabaseCheck) || !strings.Contains(err.Error(), "integrity_check") {
		t.Fatalf("damaged index page: got %.200v, want ErrDatabaseCheck from integrity_check", err)
	}
}
