package indexer_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestFullReasonNamesTheChange: when a database's snapshot was taken with
// another configuration, the full index says which of its recorded fields
// changed (the root directory, the build tags), not a list of what might
// have.
func TestFullReasonNamesTheChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := os.CopyFS(d, os.DirFS("testdata/fixture")); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(t.TempDir(), "graph.db")
	opts := indexer.Options{Dir: a, DBPath: db, Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}
	if _, err := indexer.Index(ctx, opts); err != nil {
		t.Fatal(err)
	}
	opts.Dir = b
	snap, err := indexer.Index(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "root directory " + a + " -> " + b; snap.Reused || !strings.Contains(snap.FullReason, want) {
		t.Errorf("another directory: reused %v, full reason %q; want it to say %q", snap.Reused, snap.FullReason, want)
	}
	opts.Tags = []string{"extra"}
	snap, err = indexer.Index(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "build tags [] -> [extra]"; !strings.Contains(snap.FullReason, want) || strings.Contains(snap.FullReason, "root directory") {
		t.Errorf("other tags: full reason %q; want only %q", snap.FullReason, want)
	}
}

// TestConfigChangeQuotesWhatItCannotPrint: a recorded value with a
// terminal escape or a newline is shown quoted, not written raw.
func TestConfigChangeQuotesWhatItCannotPrint(t *testing.T) {
	got := indexer.ConfigChange(indexer.Snapshot{Dir: "/a\x1b[2J\n"}, indexer.Snapshot{Dir: "/b"})
	if strings.ContainsAny(got, "\x1b\n") || !strings.Contains(got, `"/a\x1b[2J\n" -> /b`) {
		t.Errorf("configChange = %q", got)
	}
}
