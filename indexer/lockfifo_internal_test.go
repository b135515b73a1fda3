package indexer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockRefusesWhatAppearsAfterTheCheck: something put at the lock path
// between checkLockFile and the lock's open (a FIFO, a symbolic link) is
// refused with an error at once; opening a FIFO read-only used to wait for
// a writer forever, and a link was followed.
func TestLockRefusesWhatAppearsAfterTheCheck(t *testing.T) {
	// The hook is package-wide: not parallel.
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "graph.db")
			target := filepath.Join(dir, "elsewhere")
			hook := func(path string) {
				var err error
				if kind == "fifo" {
					err = syscall.Mkfifo(path, 0o644)
				} else {
					err = os.Symlink(target, path)
				}
				if err != nil {
					t.Error(err)
				}
			}
			testHookAfterLockCheck.Store(&hook)
			defer testHookAfterLockCheck.Store(nil)
			done := make(chan error, 1)
			go func() {
				l, err := lockDatabase(context.Background(), dbPath, nil)
				if err == nil {
					l.release(true)
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatalf("a %s at the lock path was locked", kind)
				}
				want := map[string]string{"fifo": "not a regular file", "symlink": "is a symbolic link"}[kind]
				if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: err = %v, want ErrInvalidOptions saying %q", kind, err, want)
				}
			case <-time.After(10 * time.Second):
				// Unblock the open so that the test can end.
				if f, err := os.OpenFile(lockPath(dbPath), os.O_WRONLY, 0); err == nil {
					f.Close()
				}
				t.Fatalf("lockDatabase still waiting after 10 s on a %s at the lock path", kind)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the link's target %s was created (err %v)", target, err)
			}
		})
	}
}
