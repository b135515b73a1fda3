package indexer_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/indexer"
)

// Indexing replaces DBPath; it must refuse to replace anything that is not a graph database, and
// leave that file exactly as it was.
func TestIndexRefusesToReplaceOtherFiles(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "keep.go")
	if err := os.WriteFile(text, []byte("package keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE precious (x INTEGER); INSERT INTO precious VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, path := range []string{text, other, dir} {
		before, _ := os.ReadFile(path)
		_, err := indexer.Index(context.Background(), indexer.Options{Dir: "testdata/fixture", DBPath: path})
		if !errors.Is(err, indexer.ErrNotGraphDatabase) {
			t.Fatalf("%s: err %v, want ErrNotGraphDatabase", path, err)
		}
		after, _ := os.ReadFile(path)
		if string(before) != string(after) {
			t.Fatalf("%s changed although indexing was refused", path)
		}
	}
	// A graph database is replaced as before.
	graph := filepath.Join(dir, "graph.db")
	for i := 0; i < 2; i++ {
		if _, err := indexer.Index(context.Background(), indexer.Options{Dir: "testdata/fixture", DBPath: graph}); err != nil {
			t.Fatalf("index %d into a graph database: %v", i, err)
		}
	}
}
