package evidence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small store opens with one DuckDB thread, a store of SmallStoreBytes or more with DuckDB's
// default; the reader's access mode is kept either way.
func TestSmallStoresOpenWithOneThread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "threads"})
	var threads string
	if err := s.conn.QueryRowContext(ctx, `SELECT current_setting('threads')::VARCHAR`).Scan(&threads); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	if threads != "1" {
		t.Fatalf("a new store runs %s DuckDB threads, want 1", threads)
	}
	if got := (&Store{path: path, readOnly: true}).dsn(); got != path+"?access_mode=read_only&threads=1" {
		t.Fatalf("small store reader dsn %q", got)
	}

	big := filepath.Join(t.TempDir(), "big.duckdb")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(SmallStoreBytes); err != nil { // sparse: no disk is used
		t.Fatal(err)
	}
	f.Close()
	if got := (&Store{path: big}).dsn(); strings.Contains(got, "threads") {
		t.Fatalf("a store of %d bytes opens with %q, want DuckDB's default threads", SmallStoreBytes, got)
	}
	if got := (&Store{path: big, readOnly: true}).dsn(); got != big+"?access_mode=read_only" {
		t.Fatalf("big store reader dsn %q", got)
	}
}
