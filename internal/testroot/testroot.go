// Package testroot gives a test binary one temporary directory for the fixtures its tests share
// (a matrix run, a written store), made once and copied by the tests that change them.
package testroot

import (
	"fmt"
	"os"
	"testing"
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
