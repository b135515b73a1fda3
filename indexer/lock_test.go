package indexer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/assay-audit/assay/indexer"
)

// lockModule writes a small module of two packages into a fresh directory.
func lockModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/lock\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() int { return 1 }\n",
		"b/b.go": "package b\n\nimport \"example.com/lock/a\"\n\nfunc B() int { return a.A() + 1 }\n",
	})
	return dir
}

// hangGuard is how long a test waits for something that must happen before
// it declares the index hung (never a measure of speed).
const hangGuard = 2 * time.Minute

// TestConcurrentIndexesOfOneDatabase: a second Index of the same database,
// started while the first is loading, waits for it (saying so once), then
// reuses what the first wrote; the SHA-256 both report is the file's. Two
// indexes never load at the same time.
func TestConcurrentIndexesOfOneDatabase(t *testing.T) {
	// Not parallel: the load hook is process-wide.
	dir := lockModule(t)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The database inside the module, as `assay index` puts it by default:
	// the lock file beside it must not disturb the file-system reuse check.
	dbPath := filepath.Join(dir, "assay-out", "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}

	loading := make(chan struct{}, 2)
	release := make(chan struct{})
	t.Cleanup(func() { indexer.SetTestHookBeforeLoad(nil) })
	indexer.SetTestHookBeforeLoad(func(d string) {
		if d == abs {
			loading <- struct{}{}
			<-release
		}
	})

	type result struct {
		snap indexer.Snapshot
		err  error
	}
	first := make(chan result, 1)
	go func() {
		s, err := indexer.Index(context.Background(), opts)
		first <- result{s, err}
	}()
	select {
	case <-loading: // the first index holds the lock and is loading
	case r := <-first:
		t.Fatalf("first index returned before loading: %v", r.err)
	case <-time.After(hangGuard):
		t.Fatal("first index never reached the load")
	}

	var mu sync.Mutex
	var stages []string
	waiting := make(chan struct{}, 1)
	o := opts
	o.Progress = func(s string) {
		mu.Lock()
		stages = append(stages, s)
		mu.Unlock()
		if strings.HasPrefix(s, "waiting for another index of "+dbPath) {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
	}
	second := make(chan result, 1)
	go func() {
		s, err := indexer.Index(context.Background(), o)
		second <- result{s, err}
	}()
	select {
	case <-waiting:
	case <-loading:
		close(release)
		t.Fatal("the second index loaded while the first was loading into the same database")
	case r := <-second:
		close(release)
		t.Fatalf("the second index returned while the first held the database: %+v %v", r.snap, r.err)
	case <-time.After(hangGuard):
		close(release)
		t.Fatal("the second index neither waited nor loaded")
	}
	close(release)

	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("first: %v; second: %v", r1.err, r2.err)
	}
	if r1.snap.Reused {
		t.Errorf("the first index reused a database that did not exist")
	}
	if !r2.snap.Reused || r2.snap.ReusedBy != "files" || r2.snap.ID != r1.snap.ID {
		t.Errorf("second: Reused %v ReusedBy %q ID %s; want the first's snapshot %s reused by the file-system check",
			r2.snap.Reused, r2.snap.ReusedBy, r2.snap.ID, r1.snap.ID)
	}
	sum := fileSHA256(t, dbPath)
	if r1.snap.DBSHA256 != sum || r2.snap.DBSHA256 != sum {
		t.Errorf("reported SHA-256 %s and %s, the file's is %s", r1.snap.DBSHA256, r2.snap.DBSHA256, sum)
	}
	mu.Lock()
	n := 0
	for _, s := range stages {
		if strings.HasPrefix(s, "waiting for another index") {
			n++
		}
	}
	mu.Unlock()
	if n != 1 {
		t.Errorf("%d waiting messages, want 1: %q", n, stages)
	}
	// Both runs released the lock: a third index takes it at once.
	var third []string
	o.Progress = func(s string) { third = append(third, s) }
	if s := index(t, o); !s.Reused {
		t.Errorf("third index: not reused")
	}
	if slices.ContainsFunc(third, func(s string) bool { return strings.HasPrefix(s, "waiting") }) {
		t.Errorf("the third index waited for a lock nobody holds: %q", third)
	}
}

// TestIndexWaitingForTheLockHonoursCancel: an index waiting for the lock
// another process holds returns when its context is cancelled, with an
// error wrapping context.Canceled, and leaves the database as it was.
func TestIndexWaitingForTheLockHonoursCancel(t *testing.T) {
	t.Parallel()
	dir := lockModule(t)
	outDir := t.TempDir()
	dbPath := filepath.Join(outDir, "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Tests: true, Env: []string{"GOPROXY=off"}}
	index(t, opts)
	before := fileSHA256(t, dbPath)
	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}

	// Another holder of the documented lock file (flock(2) locks of two
	// open files conflict within one process as across processes).
	holder := flock.New(dbPath + "-lock")
	if ok, err := holder.TryLock(); err != nil || !ok {
		t.Fatalf("take the lock: %v %v", ok, err)
	}
	defer holder.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stages []string
	o := opts
	o.Reuse = true
	o.Progress = func(s string) {
		stages = append(stages, s)
		if strings.HasPrefix(s, "waiting for another index") {
			cancel()
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := indexer.Index(ctx, o)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(hangGuard):
		t.Fatal("Index did not return after its context was cancelled while it waited for the lock")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Index error = %v, want context.Canceled", err)
	}
	if len(stages) != 1 {
		t.Errorf("stages %q, want only the waiting message", stages)
	}
	after, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileSHA256(t, dbPath); got != before || !after.ModTime().Equal(fi.ModTime()) || !os.SameFile(fi, after) {
		t.Errorf("the database changed under a cancelled wait (sha256 %s, was %s)", got, before)
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"graph.db", "graph.db-lock"}; !slices.Equal(names, want) {
		t.Errorf("output directory holds %q, want %q (the database and the holder's lock file)", names, want)
	}
}

// TestConcurrentWritersOfOneDatabase: three indexes of one database at
// once, none reusing, into a directory none of them found: each waits for
// the lock file the one before removes, none fails, and afterwards only the
// database is in the directory.
func TestConcurrentWritersOfOneDatabase(t *testing.T) {
	t.Parallel()
	dir := lockModule(t)
	dbPath := filepath.Join(t.TempDir(), "out", "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Tests: true, Env: []string{"GOPROXY=off"}}
	type result struct {
		sum string
		err error
	}
	results := make(chan result, 3)
	for range 3 {
		go func() {
			s, err := indexer.Index(context.Background(), opts)
			results <- result{s.DBSHA256, err}
		}()
	}
	want := ""
	for range 3 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		want = r.sum
	}
	if got := fileSHA256(t, dbPath); got != want {
		t.Errorf("the file hashes to %s, the index that returned last reported %s", got, want)
	}
	entries, err := os.ReadDir(filepath.Dir(dbPath))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("beside the database after every index returned: %q, want only graph.db", names)
	}
}
