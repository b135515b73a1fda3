package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/filelock"
)

// TestLockPathHoldingSomethingElseIsRefused: a symbolic link or a FIFO at
// the usage database's lock path is refused at once (a FIFO used to block
// the open, a link was locked through), and left as it is.
func TestLockPathHoldingSomethingElseIsRefused(t *testing.T) {
	t.Parallel()
	up := newFakeUpstream(t)
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "gateway-usage.db")
			target := filepath.Join(dir, "elsewhere")
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(dbPath+".lock", 0o644)
			} else {
				err = os.Symlink(target, dbPath+".lock")
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			g, err := Start(ctx, Config{Upstream: up.srv.URL, DBPath: dbPath})
			if err == nil {
				_ = g.Close()
				t.Fatalf("a gateway started with a %s at its lock path", kind)
			}
			if !errors.Is(err, filelock.ErrUnusablePath) {
				t.Fatalf("Start = %v, want filelock.ErrUnusablePath", err)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the link's target was created (%v)", err)
			}
		})
	}
}
