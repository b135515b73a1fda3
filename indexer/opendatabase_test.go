package indexer_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestOpenDatabaseTellsForeignFilesFromOtherVersions: a file that is not a
// graph database (another SQLite database, a text file, an empty file) is
// refused as ErrNotGraphDatabase, never as a schema version to re-index;
// a graph database of another version keeps its SchemaVersionError.
func TestOpenDatabaseTellsForeignFilesFromOtherVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	foreign := filepath.Join(dir, "other.db")
	execSQL(t, foreign, "CREATE TABLE precious (x INTEGER); INSERT INTO precious VALUES (1)")
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database, but long enough to hold an SQLite header if it were one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	graph := sharedIndexOf(t, sharedFixture, nil, indexer.Options{Dir: "testdata/fixture", Tests: false}).DBPath
	older := filepath.Join(dir, "older.db")
	copyFile(t, graph, older)
	execSQL(t, older, "PRAGMA user_version = 2")

	for _, tc := range []struct {
		name, path, want string
	}{
		{"an SQLite database without a snapshots table", foreign, "has no snapshots table"},
		{"a text file", text, "is not an SQLite database"},
		{"an empty file", empty, "has no snapshots table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for op, open := range map[string]func() error{
				"OpenDatabase": func() error {
					db, err := indexer.OpenDatabase(ctx, tc.path)
					if err == nil {
						db.Close()
					}
					return err
				},
				"ReadSnapshot": func() error { _, err := indexer.ReadSnapshot(ctx, tc.path); return err },
			} {
				err := open()
				if !errors.Is(err, indexer.ErrNotGraphDatabase) || errors.Is(err, indexer.ErrSchemaVersion) {
					t.Fatalf("%s: err %v, want ErrNotGraphDatabase", op, err)
				}
				if msg := err.Error(); !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "re-index") {
					t.Errorf("%s: error %q should name %s and say it %s, without advice to re-index", op, msg, tc.path, tc.want)
				}
			}
		})
	}
	t.Run("a graph database of an older schema version", func(t *testing.T) {
		t.Parallel()
		_, err := indexer.OpenDatabase(ctx, older)
		var sv *indexer.SchemaVersionError
		if !errors.As(err, &sv) || sv.Found != 2 || errors.Is(err, indexer.ErrNotGraphDatabase) {
			t.Fatalf("err %v, want SchemaVersionError{Found: 2}", err)
		}
		if !strings.Contains(err.Error(), "older") || !strings.Contains(err.Error(), "re-index") {
			t.Errorf("error %q should say the version is older and to re-index", err)
		}
	})
	t.Run("a graph database of this version", func(t *testing.T) {
		t.Parallel()
		db, err := indexer.OpenDatabase(ctx, graph)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	})
}

func execSQL(t *testing.T, path, stmts string) {
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

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Another program's SQLite database in WAL mode is refused as not a graph database before SQLite
// opens it, so that reading it leaves no -wal or -shm file beside it.
func TestOpenDatabaseLeavesNoFilesBesideAWALDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "usage.db")
	execSQL(t, path, "PRAGMA journal_mode=WAL; CREATE TABLE requests (id INTEGER); INSERT INTO requests VALUES (1)")
	for _, side := range []string{"-wal", "-shm"} {
		_ = os.Remove(path + side) // what the writer left when it closed
	}
	db, err := indexer.OpenDatabase(context.Background(), path)
	if err == nil {
		db.Close()
	}
	if !errors.Is(err, indexer.ErrNotGraphDatabase) || !strings.Contains(err.Error(), "WAL mode") {
		t.Fatalf("%v, want ErrNotGraphDatabase naming WAL mode", err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Errorf("%s%s was created by a refused open", path, side)
		}
	}
}
