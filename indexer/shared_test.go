package indexer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/internal/testroot"
)

// Indexing a module is most of what these tests cost (the go command lists
// it and compiles export data): a module that several tests only read is
// indexed once per test binary, by the first test that asks, and its
// database is shared. A test that writes to it, or indexes it again with
// Reuse, works on its own copy (copyShared). TestMain checks that no test
// changed a shared database.

// sharedIndex is one module indexed once, with the options of its name.
type sharedIndex struct {
	opts  string // what the options were, to refuse a name used for two
	once  sync.Once
	snap  indexer.Snapshot
	procs int // GOMAXPROCS while it was indexed
	err   error
}

var shared = struct {
	mu     sync.Mutex
	dir    string // made on first use, removed by TestMain
	byName map[string]*sharedIndex
}{byName: map[string]*sharedIndex{}}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		var files []testroot.Shared
		for name, s := range shared.byName {
			if s.err == nil {
				files = append(files, testroot.Shared{Name: "database " + name, Path: s.snap.DBPath, SHA256: s.snap.DBSHA256})
			}
		}
		code = testroot.Unchanged(code, files)
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedIndexOf returns the snapshot of opts indexed into a database shared
// by the whole test binary under name. With files, the module is written
// first into a directory of its own and opts.Dir is taken relative to it.
// Every caller of one name must pass the same files and options (the
// functions Enrich and Progress excepted: name them in name); the database
// must not be written: copy it with copyShared first.
func sharedIndexOf(t *testing.T, name string, files map[string]string, opts indexer.Options) indexer.Snapshot {
	t.Helper()
	snap, _ := sharedIndexAt(t, name, files, opts)
	return snap
}

// sharedIndexAt is sharedIndexOf, also returning the GOMAXPROCS the index
// ran at.
func sharedIndexAt(t *testing.T, name string, files map[string]string, opts indexer.Options) (indexer.Snapshot, int) {
	t.Helper()
	desc := fmt.Sprintf("%v %s %q %v %v %q %q %q %q %q", sortedFiles(files), opts.Dir, opts.Patterns, opts.Tests, opts.Reuse,
		opts.Env, opts.Tags, opts.GOOS, opts.ToolVersion, opts.EnrichID)
	shared.mu.Lock()
	if shared.dir == "" {
		d, err := os.MkdirTemp("", "indexer-shared-")
		if err != nil {
			shared.mu.Unlock()
			t.Fatal(err)
		}
		shared.dir = d
	}
	s := shared.byName[name]
	if s == nil {
		s = &sharedIndex{opts: desc}
		shared.byName[name] = s
	}
	base := filepath.Join(shared.dir, fmt.Sprint(len(shared.byName)))
	shared.mu.Unlock()
	if s.opts != desc {
		t.Fatalf("shared index %s asked for with other options:\n%s\nwas\n%s", name, desc, s.opts)
	}
	s.once.Do(func() {
		if files != nil {
			src := filepath.Join(base, "src")
			writeFiles(t, src, files)
			opts.Dir = filepath.Join(src, opts.Dir)
		}
		opts.DBPath = filepath.Join(base, "out", "graph.db")
		s.procs = runtime.GOMAXPROCS(0)
		s.snap, s.err = indexer.Index(context.Background(), opts)
	})
	if s.err != nil {
		t.Fatalf("shared index %s: %v", name, s.err)
	}
	return s.snap, s.procs
}

// The shared indexes read by more than one test.
const (
	// sharedIndexerAndMetrics: this repository's indexer and metrics
	// packages, tests included, with the metrics.
	sharedIndexerAndMetrics = "indexer and metrics, with the metrics"
	// sharedRelations: testdata/relations (cgo), tests included, with the
	// metrics.
	sharedRelations = "relations, with the metrics"
	// sharedFixtureTests: testdata/fixture, tests included, tool version
	// test-1 (fixtureTestsOptions).
	sharedFixtureTests = "fixture, tests included"
	// sharedFixture: testdata/fixture, no tests, no other option.
	sharedFixture = "fixture"
	// sharedBroken: testdata/broken (load errors), tests included.
	sharedBroken = "broken, tests included"
)

func fixtureTestsOptions() indexer.Options {
	return indexer.Options{Dir: "testdata/fixture", Tests: true, ToolVersion: "test-1"}
}

func indexerAndMetricsOptions() indexer.Options {
	return withMetricsEnrich(indexer.Options{Dir: "..", Patterns: []string{"./indexer", "./metrics"}, Tests: true})
}

func relationsOptions() indexer.Options {
	return withMetricsEnrich(indexer.Options{Dir: "testdata/relations", Tests: true})
}

func sortedFiles(files map[string]string) [][2]string {
	var out [][2]string
	for name, content := range files {
		out = append(out, [2]string{name, content})
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	return out
}

// copyShared copies the database of snap (a shared one, or any other) and
// its SHA-256 record into a directory of t's and returns the copy's path:
// the same bytes an index of the same options into that path gives
// (TestIndexIsReproducible).
func copyShared(t *testing.T, snap indexer.Snapshot) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "out", "graph.db")
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, snap.DBPath, to)
	copyFile(t, snap.DBPath+"-sha256", to+"-sha256")
	return to
}
