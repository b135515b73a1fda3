package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestGraphReadersTellForeignFilesFromOtherVersions: `assay metrics --db`
// and `assay graph ... --db` on a file that is not a graph database say so
// (bad input, exit 2, one line) instead of advising to re-index it; a graph
// database of another schema version still names the versions.
func TestGraphReadersTellForeignFilesFromOtherVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	foreign := filepath.Join(dir, "other.db")
	sqlExec(t, foreign, "CREATE TABLE precious (x INTEGER); INSERT INTO precious VALUES (1)")
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("package notes, not a database of any kind at all, long enough for a header\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	older := filepath.Join(dir, "older.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: "../../indexer/testdata/fixture", DBPath: older}); err != nil {
		t.Fatal(err)
	}
	sqlExec(t, older, "PRAGMA user_version = 2")

	for _, db := range []struct {
		name, path, want, not string
	}{
		{"another SQLite database", foreign, "not a graph database", "re-index"},
		{"a text file", text, "not a graph database", "re-index"},
		{"a graph database of an older schema", older, "schema version 2, older", "not a graph database"},
	} {
		for _, args := range [][]string{
			{"metrics", "--db", db.path},
			{"graph", "callers", "F", "--db", db.path},
			{"graph", "symbols", "a.go", "--db", db.path},
		} {
			t.Run(db.name+"/"+strings.Join(args[:len(args)-2], " "), func(t *testing.T) {
				t.Parallel()
				before, err := os.ReadFile(db.path)
				if err != nil {
					t.Fatal(err)
				}
				r := runCLI(t, args...)
				if r.code != 2 {
					t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				oneLine(t, r, db.want)
				if !strings.Contains(r.stderr, db.path) || strings.Contains(r.stderr, db.not) {
					t.Errorf("stderr %q should name %s and not say %q", r.stderr, db.path, db.not)
				}
				if after, _ := os.ReadFile(db.path); string(after) != string(before) {
					t.Errorf("%s changed although it was only read", db.path)
				}
			})
		}
	}
}

func sqlExec(t *testing.T, path, stmts string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmts); err != nil {
		t.Fatal(err)
	}
}
