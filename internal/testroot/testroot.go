// Package testroot gives a test binary one temporary directory for the fixtures its tests share
// (a matrix run, a written store), made once and copied by the tests that change them.
package testroot

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/internal/digest"
)

// Main is a TestMain's body: it creates a temporary directory named by pattern (os.MkdirTemp), sets
// *root to it, runs the tests, removes the directory and returns m.Run's exit code (3 when the
// directory cannot be created).
func Main(m *testing.M, pattern string, root *string) int {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testroot:", err)
		return 3
	}
	*root = dir
	code := m.Run()
	os.RemoveAll(dir)
	return code
}

// CopyTree copies the directories and regular files under src to dst (made as needed), leaving
// out lock files (*.lock: a copy must not look held) and anything else that is not a regular file.
// Files are written 0644, directories 0755. Errors: the first the walk, a read or a write returns.
func CopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() || filepath.Ext(p) == ".lock" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// Shared is a file the tests of one binary share read-only: Name says which in messages, SHA256 is
// the hex digest it had when it was made.
type Shared struct{ Name, Path, SHA256 string }

// Unchanged returns code when every file of files still has its SHA-256, and otherwise 1, after
// one "FAIL" line on stderr for each that does not (or cannot be read): a test that wrote to a
// shared file changed what the tests after it read, which fails the run. For a TestMain, after
// m.Run.
func Unchanged(code int, files []Shared) int {
	for _, f := range files {
		if sum, err := digest.File(f.Path); err != nil || sum != f.SHA256 {
			fmt.Fprintf(os.Stderr, "FAIL: the shared %s was changed by a test (SHA-256 %s, %v; made as %s)\n", f.Name, sum, err, f.SHA256)
			code = 1
		}
	}
	return code
}
