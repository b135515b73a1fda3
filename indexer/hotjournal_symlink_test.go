package indexer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestHotJournalBesideTheLinkedDatabase: a graph database named through a
// symbolic link has its rollback journal beside the file the link names
// (SQLite resolves the link and looks there); a reader refuses it with
// ErrHotJournal naming that journal, where it used to fail with SQLite's
// "attempt to write a readonly database".
func TestHotJournalBesideTheLinkedDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "graph.db")
	index(t, indexer.Options{Dir: "testdata/fixture", DBPath: db, Reuse: true})
	link := filepath.Join(t.TempDir(), "linked.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	journal := db + "-journal"
	if err := os.WriteFile(journal, []byte("half of another program's transaction"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := indexer.OpenDatabase(ctx, link)
	if !errors.Is(err, indexer.ErrHotJournal) || !strings.Contains(err.Error(), journal) {
		t.Fatalf("OpenDatabase through a link, journal beside its target: err = %v, want ErrHotJournal naming %s", err, journal)
	}
}
