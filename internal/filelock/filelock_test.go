package filelock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hangGuard is how long a test waits for what must happen before it
// declares Acquire hung (never a measure of speed).
const hangGuard = time.Minute

// TestSomethingElseAtThePathIsRefused: whatever is at the lock path that is
// not a lock file is refused and left as it is; an empty file or a holder
// record left by a killed process is taken over.
func TestSomethingElseAtThePathIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string // "" when the lock is taken
	}{
		{"symlink to a precious file", func(t *testing.T, path string) {
			target := filepath.Join(filepath.Dir(path), "precious.txt")
			write(t, target, "precious\n")
			must(t, os.Symlink(target, path))
		}, "a symbolic link"},
		{"dangling symlink", func(t *testing.T, path string) {
			must(t, os.Symlink(filepath.Join(filepath.Dir(path), "created"), path))
		}, "a symbolic link"},
		{"fifo", func(t *testing.T, path string) { must(t, syscall.Mkfifo(path, 0o644)) }, "a FIFO"},
		{"directory", func(t *testing.T, path string) { must(t, os.Mkdir(path, 0o755)) }, "a directory"},
		{"hard link", func(t *testing.T, path string) {
			victim := filepath.Join(filepath.Dir(path), "victim.pid")
			write(t, victim, "1\n")
			must(t, os.Link(victim, path))
		}, "hard link"},
		{"notes", func(t *testing.T, path string) { write(t, path, "my notes\n") }, "not a lock file"},
		{"a large file", func(t *testing.T, path string) { write(t, path, strings.Repeat("1", 5000)) }, "not a lock file"},
		{"empty file", func(t *testing.T, path string) { write(t, path, "") }, ""},
		{"pid of a killed process", func(t *testing.T, path string) { write(t, path, "4242\n") }, ""},
		{"pid and command of a killed process", func(t *testing.T, path string) { write(t, path, "4242 assay matrix run\n") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "db.lock")
			tc.setup(t, path)
			before := snapshotDir(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			l, err := Acquire(ctx, path, Options{})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if b, _ := os.ReadFile(path); string(b) != strconv.Itoa(os.Getpid())+"\n" {
					t.Errorf("lock file holds %q, want this process's pid", b)
				}
				must(t, l.Release())
				return
			}
			if !errors.Is(err, ErrUnusablePath) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Acquire = %v, want ErrUnusablePath naming %s and saying %q", err, path, tc.want)
			}
			if after := snapshotDir(t, dir); after != before {
				t.Errorf("the directory changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestWhatAppearsAfterTheCheckIsRefused: a FIFO or symbolic link put at the
// path between the check and the open is refused at once: opening a FIFO
// read-only would wait for a writer, and a link would be followed.
func TestWhatAppearsAfterTheCheckIsRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "db.lock")
			target := filepath.Join(dir, "elsewhere")
			opts := Options{afterCheck: func(path string) {
				if kind == "fifo" {
					must(t, syscall.Mkfifo(path, 0o644))
				} else {
					must(t, os.Symlink(target, path))
				}
			}}
			done := make(chan error, 1)
			go func() {
				l, err := Acquire(context.Background(), path, opts)
				if err == nil {
					_ = l.Release()
				}
				done <- err
			}()
			select {
			case err := <-done:
				want := map[string]string{"fifo": "a FIFO", "symlink": "a symbolic link"}[kind]
				if !errors.Is(err, ErrUnusablePath) || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want ErrUnusablePath saying %q", err, want)
				}
			case <-time.After(hangGuard):
				if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
					f.Close() // unblock the open so that the test can end
				}
				t.Fatalf("Acquire still waiting on a %s at the lock path", kind)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the link's target was created (err %v)", err)
			}
		})
	}
}

// TestHolderAndWaiting: a second exclusive Acquire is told who holds the
// lock (pid and command), at once without a wait and after its wait ran
// out with one; a shared Acquire is turned away too; a waiter hears once
// that it waits, gets the lock when the holder releases it, and stops
// waiting when its context ends.
func TestHolderAndWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.lock")
	first, err := Acquire(ctx, path, Options{Command: "assay matrix\nrun"})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {Shared: true}, {Wait: 30 * time.Millisecond, Retry: 5 * time.Millisecond}} {
		_, err := Acquire(ctx, path, opts)
		var held *HeldError
		if !errors.As(err, &held) || !errors.Is(err, ErrHeld) || held.PID != os.Getpid() || held.Command != "assay matrix run" {
			t.Fatalf("Acquire(%+v) = %v, want a *HeldError naming pid %d (assay matrix run)", opts, err, os.Getpid())
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	waiting := 0
	done := make(chan error, 1)
	go func() {
		_, err := Acquire(cctx, path, Options{Wait: Forever, Retry: 5 * time.Millisecond, Waiting: func(h *HeldError) {
			waiting++
			cancel()
		}})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || waiting != 1 {
			t.Fatalf("cancelled waiter: err %v after %d waiting calls, want context.Canceled after 1", err, waiting)
		}
	case <-time.After(hangGuard):
		t.Fatal("a cancelled waiter still waits")
	}

	got := make(chan *Lock, 1)
	go func() {
		l, err := Acquire(ctx, path, Options{Wait: Forever, Retry: 5 * time.Millisecond, Waiting: func(*HeldError) {
			if err := first.Release(); err != nil {
				t.Error(err)
			}
		}})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case l := <-got:
		if l != nil {
			must(t, l.Release())
		}
	case <-time.After(hangGuard):
		t.Fatal("the waiter did not get the lock once it was released")
	}
	if b, err := os.ReadFile(path); err != nil || len(b) != 0 {
		t.Errorf("after release the lock file holds %q (%v), want it empty", b, err)
	}
}

// TestRemovedFileIsLockedAgain: a holder that removes its lock file on
// release leaves a waiter that locked the removed file; the waiter must
// lock the file now at the path, or two holders would each hold a lock on
// another file.
func TestRemovedFileIsLockedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.lock")
	for round := range 20 {
		first, err := Acquire(ctx, path, Options{RemoveOnRelease: true})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lock, 1)
		go func() {
			l, err := Acquire(ctx, path, Options{Wait: Forever, Retry: time.Millisecond, RemoveOnRelease: true,
				Waiting: func(*HeldError) { must(t, first.Release()) }})
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		second := <-got
		if second == nil {
			t.Fatal("no lock")
		}
		// A third contender must be turned away: the second holds the file
		// at the path.
		if _, err := Acquire(ctx, path, Options{}); !errors.Is(err, ErrHeld) {
			t.Fatalf("round %d: a third Acquire = %v while the second holds the lock, want ErrHeld", round, err)
		}
		must(t, second.Release())
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the lock file is still there after a removing release (%v)", round, err)
		}
	}
}

// TestSharedLockWritesNothing: readers share the lock and leave the file as
// they found it (an evidence reader changes no byte beside the store), even
// a record a killed writer left; the next exclusive holder replaces it.
func TestSharedLockWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db.lock")
	write(t, path, "4242 assay matrix run\n")
	r1, err := Acquire(ctx, path, Options{Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Acquire(ctx, path, Options{Shared: true})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "4242 assay matrix run\n" {
		t.Errorf("a reader changed the lock file: %q", b)
	}
	if _, err := Acquire(ctx, path, Options{}); !errors.Is(err, ErrHeld) {
		t.Errorf("a writer while readers hold the lock: %v, want ErrHeld", err)
	}
	must(t, r1.Release())
	must(t, r2.Release())
	if b, _ := os.ReadFile(path); string(b) != "4242 assay matrix run\n" {
		t.Errorf("a reader's release changed the lock file: %q", b)
	}
	w, err := Acquire(ctx, path, Options{Command: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.HasSuffix(string(b), " writer\n") {
		t.Errorf("the writer did not replace the stale record: %q", b)
	}
	must(t, w.Release())
}

// TestMissingFileInAReadOnlyDirectory: a lock file that cannot be created
// is ErrCannotCreate, so that a reader may go on without it.
func TestMissingFileInAReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root may create files in a read-only directory")
	}
	dir := t.TempDir()
	must(t, os.Chmod(dir, 0o555))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	if _, err := Acquire(context.Background(), filepath.Join(dir, "db.lock"), Options{Shared: true}); !errors.Is(err, ErrCannotCreate) {
		t.Fatalf("Acquire = %v, want ErrCannotCreate", err)
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(body), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshotDir describes dir's entries: names, types and regular files'
// contents.
func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.Name() + " " + e.Type().String())
		if e.Type().IsRegular() {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(" " + strconv.Quote(string(data)))
		}
		b.WriteString("; ")
	}
	return b.String()
}
