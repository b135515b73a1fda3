package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadSmall: a small regular file is read; a symbolic link, a FIFO (at
// once, not blocking for a writer), a directory and a file over the bound
// are refused.
func TestReadSmall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(path("ok"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadSmall(path("ok"), 32); err != nil || string(b) != "4242\n" {
		t.Fatalf("ReadSmall(ok) = %q, %v", b, err)
	}
	if err := os.WriteFile(path("big"), []byte(strings.Repeat("a", 33)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(path("ok"), path("link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"big": "33 bytes, more than 32", "fifo": "not a regular file", "dir": "not a regular file"} {
		done := make(chan error, 1)
		go func() { _, err := ReadSmall(path(name), 32); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("ReadSmall(%s) = %v, want %q", name, err, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("ReadSmall(%s) still blocked", name)
		}
	}
	if _, err := ReadSmall(path("link"), 32); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("ReadSmall(link) = %v, want ELOOP", err)
	}
}
