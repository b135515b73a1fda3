package indexer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestHotJournalIsRefused: a rollback journal another program left next
// to a graph database (SQLite would apply it at the next write) makes
// readers (also through a symbolic link to the database) and Index refuse
// the database with ErrHotJournal naming the journal, with or without
// reuse, leaving the database and the journal as they were; an empty
// journal (which SQLite ignores) changes nothing.
func TestHotJournalIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A copy of the shared index: the bytes an index into db gives.
	db := copyShared(t, sharedIndexOf(t, sharedFixture, nil, indexer.Options{Dir: "testdata/fixture", Tests: false}))
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	journal := db + "-journal"
	content := []byte("half of another program's transaction")
	if err := os.WriteFile(journal, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, reuse := range []bool{true, false} {
		_, err := indexer.Index(ctx, indexer.Options{Dir: "testdata/fixture", DBPath: db, Reuse: reuse})
		if !errors.Is(err, indexer.ErrHotJournal) || !strings.Contains(err.Error(), journal) {
			t.Fatalf("Index (reuse %v) with a journal beside the database: err = %v, want ErrHotJournal naming %s", reuse, err, journal)
		}
	}
	if _, err := indexer.OpenDatabase(ctx, db); !errors.Is(err, indexer.ErrHotJournal) {
		t.Fatalf("OpenDatabase with a journal beside the database: err = %v, want ErrHotJournal", err)
	}
	// Named through a symbolic link, the database's journal is the one
	// beside the file the link names, where SQLite looks for it.
	link := filepath.Join(t.TempDir(), "linked.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	if _, err := indexer.OpenDatabase(ctx, link); !errors.Is(err, indexer.ErrHotJournal) || !strings.Contains(err.Error(), journal) {
		t.Fatalf("OpenDatabase through a link, journal beside its target: err = %v, want ErrHotJournal naming %s", err, journal)
	}
	after, _ := os.ReadFile(db)
	got, _ := os.ReadFile(journal)
	if !bytes.Equal(before, after) || !bytes.Equal(got, content) {
		t.Fatalf("the refused runs changed the database (%v) or the journal (%v)", !bytes.Equal(before, after), !bytes.Equal(got, content))
	}

	if err := os.WriteFile(journal, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	snap := index(t, indexer.Options{Dir: "testdata/fixture", DBPath: db, Reuse: true})
	if !snap.Reused {
		t.Fatalf("with an empty journal: not reused (%s)", snap.FullReason)
	}
	d, err := indexer.OpenDatabase(ctx, db)
	if err != nil {
		t.Fatalf("OpenDatabase with an empty journal: %v", err)
	}
	d.Close()
}
