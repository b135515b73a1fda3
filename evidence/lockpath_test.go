package evidence

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/filelock"
)

// TestLockPathHoldingSomethingElseIsRefused: a FIFO, a symbolic link or a
// file that is not a lock file at <store>.lock is refused (a FIFO used to
// block Open; a link was written through) and left as it is, for a writer
// and a reader alike.
func TestLockPathHoldingSomethingElseIsRefused(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"fifo", "symlink", "notes"} {
		for _, ro := range []bool{false, true} {
			t.Run(kind, func(t *testing.T) {
				t.Parallel()
				path := storePath(t)
				mustClose(t, mustOpen(t, path, OpenOptions{}))
				lock := path + ".lock"
				if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
				target := path + ".elsewhere"
				var err error
				switch kind {
				case "fifo":
					err = syscall.Mkfifo(lock, 0o644)
				case "symlink":
					err = os.Symlink(target, lock)
				default:
					err = os.WriteFile(lock, []byte("my notes\n"), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				s, err := Open(ctx, path, OpenOptions{ReadOnly: ro, Command: "assay test"})
				if err == nil {
					s.Close()
					t.Fatalf("Open (read-only %v) succeeded with a %s at the lock path", ro, kind)
				}
				if !errors.Is(err, filelock.ErrUnusablePath) {
					t.Fatalf("Open (read-only %v) = %v, want filelock.ErrUnusablePath", ro, err)
				}
				if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the link's target was created (%v)", err)
				}
				if kind == "notes" {
					if b, _ := os.ReadFile(lock); string(b) != "my notes\n" {
						t.Errorf("the file at the lock path was changed: %q", b)
					}
				}
			})
		}
	}
}
