// Package testlang chooses the artifact language of the matrix cases a test runs when the test is
// not about the language: Python where an interpreter with pytest is found, since a Python case
// costs less CPU than a Go case (no member go test or oracle go build links a binary; measured
// 20 to 25% less per converted test, more for formations with many members), and Go otherwise,
// so that a machine without pytest still runs the test (in Go) rather than skipping it.
package testlang

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/assay-audit/assay/oracle"
)

// RequireEnv is the environment variable that, set to anything, makes a missing Python with
// pytest a test failure instead of a fall-back to Go (CI sets it: see .ci/run).
const RequireEnv = "ASSAY_REQUIRE_TOOLS"

// The finding is cached: every test of a binary runs in the same language.
var (
	once  sync.Once
	pyErr error
)

// Cheap returns the language ("python" or "go", as harness.Options.Language and --language take
// it) a test should run its matrix cases in when the test is not about the language: "python"
// when oracle.FindPython(ctx, true) finds an interpreter that imports pytest, else "go" with the
// reason logged on t. With ASSAY_REQUIRE_TOOLS set, a missing Python fails t instead (t.Fatalf).
// Python is looked for once per test binary; Cheap is safe for concurrent use.
func Cheap(t testing.TB) string {
	t.Helper()
	once.Do(func() { _, pyErr = oracle.FindPython(context.Background(), true) })
	if pyErr == nil {
		return "python"
	}
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("python3 with pytest is required (%s is set): %v; install python3-pytest", RequireEnv, pyErr)
	}
	t.Logf("no python3 with pytest (%v): running in go instead", pyErr)
	return "go"
}
