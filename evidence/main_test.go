package evidence

import (
	"fmt"
	"os"
	"testing"
)

// fixtureRoot holds the fixtures shared by the tests of this binary (finalizedRunCopy's templates);
// TestMain removes it after the tests.
var fixtureRoot string

func TestMain(m *testing.M) {
	root, err := os.MkdirTemp("", "evidence-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fixtureRoot = root
	code := m.Run()
	os.RemoveAll(root)
	os.Exit(code)
}
