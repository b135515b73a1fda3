package metrics_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/internal/testroot"
	"github.com/assay-audit/assay/metrics"
)

// Indexing a module is most of what these tests cost (the go command lists
// and compiles for export data): a module indexed with the metrics is
// indexed once per test binary and its database shared, read-only, by
// every test that only reads it. A test that writes to it works on its own
// copy (copyDB). TestMain checks that no test changed a shared database.

// sharedIndex is one module indexed with the metrics (Options{}), once.
type sharedIndex struct {
	out  string // the directory its database is written in
	once sync.Once
	snap indexer.Snapshot
	err  error
}

var shared = struct {
	mu    sync.Mutex
	dir   string // made on first use, removed by TestMain
	byDir map[string]*sharedIndex
}{byDir: map[string]*sharedIndex{}}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		var files []testroot.Shared
		for dir, s := range shared.byDir {
			if s.err == nil {
				files = append(files, testroot.Shared{Name: "database of " + dir, Path: s.snap.DBPath, SHA256: s.snap.DBSHA256})
			}
		}
		code = testroot.Unchanged(code, files)
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedEnrichedIndex returns the snapshot of dir (a module, all its
// packages, tests included) indexed with the metrics (metrics.Options{})
// into a database shared by the whole test binary. The database must not
// be written: copy it with copyDB first.
func sharedEnrichedIndex(t *testing.T, dir string) indexer.Snapshot {
	t.Helper()
	shared.mu.Lock()
	if shared.dir == "" {
		d, err := os.MkdirTemp("", "metrics-shared-")
		if err != nil {
			shared.mu.Unlock()
			t.Fatal(err)
		}
		shared.dir = d
	}
	s := shared.byDir[dir]
	if s == nil {
		s = &sharedIndex{out: filepath.Join(shared.dir, fmt.Sprint(len(shared.byDir)))}
		shared.byDir[dir] = s
	}
	shared.mu.Unlock()
	s.once.Do(func() {
		s.snap, s.err = indexer.Index(context.Background(), indexer.Options{
			Dir: dir, Tests: true, DBPath: filepath.Join(s.out, "graph.db"),
			Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID(),
		})
	})
	if s.err != nil {
		t.Fatalf("Index %s (shared): %v", dir, s.err)
	}
	return s.snap
}

// copyDB copies the database at path into a new file under t.TempDir and
// returns its path.
func copyDB(t *testing.T, path string) string {
	t.Helper()
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
