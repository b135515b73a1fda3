package indexer_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	t.Parallel()
	dir := lockModule(t)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The database inside the module, as `assay index` puts it by default:
	// the lock file beside it must not disturb the content key.
	dbPath := filepath.Join(dir, "assay-out", "graph.db")
	opts := indexer.Options{Dir: dir, DBPath: dbPath, Reuse: true, Tests: true, Env: []string{"GOPROXY=off"}}

	loading := make(chan struct{}, 2)
	release := make(chan struct{})
	opts = indexer.WithBeforeLoad(opts, func(d string) {
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
	if !r2.snap.Reused || r2.snap.ID != r1.snap.ID {
		t.Errorf("second: Reused %v ID %s (%s); want the first's snapshot %s reused",
			r2.snap.Reused, r2.snap.ID, r2.snap.FullReason, r1.snap.ID)
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
	if want := []string{"graph.db", "graph.db-lock", "graph.db-sha256"}; !slices.Equal(names, want) {
		t.Errorf("output directory holds %q, want %q (the database, the holder's lock file and the SHA-256 record)", names, want)
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
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"graph.db", "graph.db-sha256"}; !slices.Equal(names, want) {
		t.Errorf("beside the database after every index returned: %q, want %q", names, want)
	}
}

// TestLockPathHoldingSomethingElseIsRefused: the lock goes to <db>-lock;
// whatever else is there is left as it is and the index is refused: a
// symbolic link (the lock would write through it into its target), a FIFO
// (opening it would block, beyond Ctrl-C), a directory, a file with other
// content. An empty file or one holding a pid (left by a killed run) is
// taken over.
func TestLockPathHoldingSomethingElseIsRefused(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, lock string)
		ok    bool
	}{
		{"symlink to a precious file", func(t *testing.T, lock string) {
			target := filepath.Join(filepath.Dir(lock), "precious.txt")
			writeFiles(t, filepath.Dir(lock), map[string]string{"precious.txt": "precious\n"})
			if err := os.Symlink(target, lock); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"dangling symlink", func(t *testing.T, lock string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(lock), "created-by-assay"), lock); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"fifo", func(t *testing.T, lock string) {
			if err := syscall.Mkfifo(lock, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"directory", func(t *testing.T, lock string) {
			if err := os.Mkdir(lock, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"notes", func(t *testing.T, lock string) {
			writeFiles(t, filepath.Dir(lock), map[string]string{filepath.Base(lock): "my notes\n"})
		}, false},
		{"empty file", func(t *testing.T, lock string) {
			writeFiles(t, filepath.Dir(lock), map[string]string{filepath.Base(lock): ""})
		}, true},
		{"pid of a killed run", func(t *testing.T, lock string) {
			writeFiles(t, filepath.Dir(lock), map[string]string{filepath.Base(lock): "4242\n"})
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			db := filepath.Join(out, "graph.db")
			lock := db + "-lock"
			tc.setup(t, lock)
			before := listing(t, out)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			_, err := indexer.Index(ctx, indexer.Options{Dir: mod, DBPath: db, Reuse: true})
			if tc.ok {
				if err != nil {
					t.Fatalf("Index: %v", err)
				}
				if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the lock file is still there after the run: %v", err)
				}
				return
			}
			if !errors.Is(err, indexer.ErrInvalidOptions) || !errors.Is(err, indexer.ErrUnusableLockPath) || !strings.Contains(err.Error(), lock) {
				t.Fatalf("Index = %v, want a refusal naming %s", err, lock)
			}
			if strings.Contains(err.Error(), "invalid options") {
				t.Errorf("the refusal reads as an invalid option: %v", err)
			}
			if after := listing(t, out); !slices.Equal(before, after) {
				t.Errorf("the directory changed: before %q, after %q", before, after)
			}
			if b, err := os.ReadFile(filepath.Join(out, "precious.txt")); err == nil && string(b) != "precious\n" {
				t.Errorf("the symlink's target was written: %q", b)
			}
		})
	}
}

// listing names the entries of dir with their type and, for regular files,
// content.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		s := e.Name() + " " + e.Type().String()
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			s += " " + string(b)
		}
		out = append(out, s)
	}
	return out
}

// TestStaleTemporariesAreRemoved: a run killed while writing leaves its
// temporary database; the next run holding the lock removes it.
func TestStaleTemporariesAreRemoved(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	out := t.TempDir()
	db := filepath.Join(out, "graph.db")
	writeFiles(t, out, map[string]string{".graph.db.tmp-123": "half written", ".graph.db.tmp-123-journal": "j", ".graph.db.tmp-sha256-7": "x",
		".graph.db.tmp-x.tmp-999": "another database's", "keep.txt": "mine"})
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{".graph.db.tmp-x.tmp-999", "graph.db", "graph.db-sha256", "keep.txt"}; !slices.Equal(names, want) {
		t.Errorf("directory after the run: %q, want %q", names, want)
	}
}

// TestBadDirAndDatabasePathsAreRefused: a directory whose name is not UTF-8
// (the go command's JSON cannot name its files) and a database path ending
// in a separator are refused before anything is written.
func TestBadDirAndDatabasePathsAreRefused(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	bad := filepath.Join(base, "weird \xff\xfe")
	writeFiles(t, bad, map[string]string{"go.mod": "module example.com/w\n\ngo 1.22\n", "p/p.go": "package p\n"})
	out := filepath.Join(base, "out")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: bad, DBPath: filepath.Join(out, "graph.db")}); !errors.Is(err, indexer.ErrInvalidOptions) || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("non-UTF-8 dir: %v", err)
	}
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: lockModule(t), DBPath: out + string(filepath.Separator)}); !errors.Is(err, indexer.ErrInvalidOptions) {
		t.Errorf("database path ending in a separator: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run left %s: %v", out, err)
	}
}

// TestEditedOrDamagedDatabaseIsNotReused: a database is reused only while
// it is byte for byte what its index wrote. An edit made with SQLite, bytes overwritten, or a
// missing SHA-256 record make the next index a full one that says why.
func TestEditedOrDamagedDatabaseIsNotReused(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	db := filepath.Join(t.TempDir(), "graph.db")
	first, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	again, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil || !again.Reused {
		t.Fatalf("an untouched database is not reused: %+v, %v", again, err)
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T)
		reason string
	}{
		{"edited with SQLite", func(t *testing.T) {
			h, err := sql.Open("sqlite3", "file:"+db)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			if _, err := h.Exec("UPDATE snapshots SET coverage = 0.5"); err != nil {
				t.Fatal(err)
			}
		}, "is not the"},
		{"bytes overwritten", func(t *testing.T) {
			f, err := os.OpenFile(db, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0xAA, 0xAA, 0xAA, 0xAA}, 4096+100); err != nil {
				t.Fatal(err)
			}
		}, "is not the"},
		{"record removed", func(t *testing.T) {
			if err := os.Remove(db + "-sha256"); err != nil {
				t.Fatal(err)
			}
		}, "no SHA-256 record"},
	} {
		tc.damage(t)
		s, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Reused || !strings.Contains(s.FullReason, tc.reason) {
			t.Errorf("%s: reused %v, full reason %q; want an index saying %q", tc.name, s.Reused, s.FullReason, tc.reason)
		}
		if s.ID != first.ID || s.Coverage != first.Coverage || fileSHA256(t, db) != s.DBSHA256 {
			t.Errorf("%s: the new index differs: id %s coverage %v (first %s %v)", tc.name, s.ID, s.Coverage, first.ID, first.Coverage)
		}
	}
}

// TestReadOnlyDirectoryStillReuses: where no lock file can be made (a
// read-only directory), an unchanged tree still reuses the database there;
// a changed one fails, saying why it could not just reuse.
func TestReadOnlyDirectoryStillReuses(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	out := filepath.Join(t.TempDir(), "out")
	db := filepath.Join(out, "graph.db")
	first, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Permissions do not stop root; an immutable directory does.
		if b, err := exec.Command("chattr", "+i", out).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s read-only as root (chattr +i: %v %s)", out, err, b)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", out).Run() })
	} else {
		if err := os.Chmod(out, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(out, 0o755) })
	}
	s, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil || !s.Reused || s.DBSHA256 != first.DBSHA256 {
		t.Fatalf("unchanged tree, read-only directory: %+v, %v; want the database reused", s, err)
	}
	writeFiles(t, mod, map[string]string{"a/a.go": "package a\n\nfunc A() int { return 2 }\n"})
	_, err = indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err == nil || !strings.Contains(err.Error(), "could only have been reused") {
		t.Fatalf("changed tree, read-only directory: %v; want an error saying the database could only be reused", err)
	}
	if got := fileSHA256(t, db); got != first.DBSHA256 {
		t.Errorf("the database changed: %s, was %s", got, first.DBSHA256)
	}
}

// TestFilesNamedLikeTheDatabaseAreSources: only the database's exact
// companions are its own; a Go file or package directory whose name starts
// with the database's is a source like any other, and reuse sees it.
func TestFilesNamedLikeTheDatabaseAreSources(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	db := filepath.Join(mod, "a", "graph.db")
	first, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, mod, map[string]string{"a/graph.db-x.go": "package a\n\nfunc Hidden() int { return A() }\n"})
	s, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Reused || s.Counts.Funcs != first.Counts.Funcs+1 {
		t.Errorf("a new source file named graph.db-x.go: reused %v, funcs %d (were %d)", s.Reused, s.Counts.Funcs, first.Counts.Funcs)
	}
	writeFiles(t, mod, map[string]string{"a/graph.db-pkg/p.go": "package pkg\n\nfunc P() {}\n"})
	s2, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db, Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Reused || s2.Counts.Packages <= s.Counts.Packages {
		t.Errorf("a new package directory graph.db-pkg: reused %v, packages %d (were %d)", s2.Reused, s2.Counts.Packages, s.Counts.Packages)
	}
}

// TestOddSHA256RecordsAreNotTrusted: a FIFO, a symbolic link to an endless
// file, a huge file or one with control characters at <db>-sha256 neither
// hangs nor exhausts memory: the database is indexed again in full, and the
// record written anew.
func TestOddSHA256RecordsAreNotTrusted(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	cold := index(t, indexer.Options{Dir: mod, Reuse: true})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, rec string)
	}{
		{"fifo", func(t *testing.T, rec string) {
			if err := syscall.Mkfifo(rec, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to /dev/zero", func(t *testing.T, rec string) {
			if err := os.Symlink("/dev/zero", rec); err != nil {
				t.Fatal(err)
			}
		}},
		{"huge", func(t *testing.T, rec string) {
			writeFiles(t, filepath.Dir(rec), map[string]string{filepath.Base(rec): strings.Repeat("a", 1<<20)})
		}},
		{"control characters", func(t *testing.T, rec string) {
			writeFiles(t, filepath.Dir(rec), map[string]string{filepath.Base(rec): "\x1b[2J\rassay: nothing changed"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A copy of the one cold index: the bytes a cold index at db gives.
			db := copyShared(t, cold)
			rec := db + "-sha256"
			if err := os.Remove(rec); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, rec)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			s, err := indexer.Index(ctx, indexer.Options{Dir: mod, DBPath: db, Reuse: true})
			if err != nil {
				t.Fatal(err)
			}
			if s.Reused || !strings.Contains(s.FullReason, "SHA-256 record") || strings.ContainsAny(s.FullReason, "\x1b\r") {
				t.Errorf("reused %v, full reason %q", s.Reused, s.FullReason)
			}
			if b, err := os.ReadFile(rec); err != nil || string(b) != s.DBSHA256+"\n" {
				t.Errorf("record after the run: %q, %v", b, err)
			}
		})
	}
}

// TestHardLinkAtTheLockPathIsRefused: writing the pid into a hard link
// would write into the other file it names.
func TestHardLinkAtTheLockPathIsRefused(t *testing.T) {
	t.Parallel()
	mod := lockModule(t)
	out := t.TempDir()
	victim := filepath.Join(out, "victim.pid")
	writeFiles(t, out, map[string]string{"victim.pid": "1\n"})
	db := filepath.Join(out, "graph.db")
	if err := os.Link(victim, db+"-lock"); err != nil {
		t.Fatal(err)
	}
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: mod, DBPath: db}); !errors.Is(err, indexer.ErrInvalidOptions) || !strings.Contains(err.Error(), "hard link") {
		t.Fatalf("Index = %v, want a refusal of the hard link", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "1\n" {
		t.Errorf("the linked file was written: %q", b)
	}
}
