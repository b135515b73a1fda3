package indexer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeysPanicIsAnError: a panic on the goroutine that hashes a cold
// index's reuse keys (alongside the graph build) is an "internal error" of
// the Index call, not a crash of the process, and no database is written.
func TestKeysPanicIsAnError(t *testing.T) {
	f := func() { panic("keys hook") }
	testHookKeys.Store(&f)
	defer testHookKeys.Store(nil)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/fixture")); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "graph.db")
	_, err := Index(context.Background(), Options{Dir: dir, DBPath: db, Tests: true, Reuse: true, Env: []string{"GOPROXY=off"}})
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "keys hook") {
		t.Fatalf("Index with a panic while hashing the keys: err = %v, want an internal error naming it", err)
	}
	if _, serr := os.Stat(db); !os.IsNotExist(serr) {
		t.Fatalf("a database was written at %s despite the error (stat: %v)", db, serr)
	}
}
