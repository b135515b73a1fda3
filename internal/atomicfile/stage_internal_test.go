package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// A crash after the new content is written and synced but before the rename (stage without
// install) leaves the old file intact; the staged file holds the whole new content.
func TestCrashBetweenWriteAndRenameLeavesTheOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp, err := stage(path, []byte("new content"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(tmp) != filepath.Dir(path) {
		t.Fatalf("staged in %s, not in the target's directory %s (a rename across file systems is not atomic)", filepath.Dir(tmp), filepath.Dir(path))
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old" {
		t.Fatalf("before the rename path holds %q (%v), want the old content", b, err)
	}
	if b, err := os.ReadFile(tmp); err != nil || string(b) != "new content" {
		t.Fatalf("staged file holds %q (%v), want the whole new content", b, err)
	}
	if err := install(tmp, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new content" {
		t.Fatalf("after the rename path holds %q (%v)", b, err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("staged file still there after install: %v", err)
	}
}
