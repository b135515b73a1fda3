package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/testlang"
)

// Expensive fixtures are made once per test binary and shared: a matrix run takes tens of seconds
// (it builds and tests member code), and several tests only read what one leaves. A test
// that changes a fixture works on a copy (copyTree).

// fixtureRoot holds the shared fixtures; TestMain creates it and removes it after the tests.
var fixtureRoot string

// memo is one shared fixture, made by the first test that asks for it, with that test's t: a
// failure while making it fails that test, and every other test that asks says so. The shared
// fixtures are end-to-end matrix runs: with -short, get skips the test.
type memo[T any] struct {
	once sync.Once
	val  T
	err  string
}

func (m *memo[T]) get(t *testing.T, make func(t *testing.T) T) T {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end matrix runs build and run member code; skipped with -short")
	}
	m.once.Do(func() {
		// t.Fatal in make ends the goroutine before the assignment below: err stays.
		m.err = "the shared fixture failed in the test that made it: " + t.Name()
		m.val = make(t)
		m.err = ""
	})
	if m.err != "" {
		t.Fatal(m.err)
	}
	return m.val
}

// fixtureDir returns a new directory under fixtureRoot named for what it holds.
func fixtureDir(name string) string {
	dir, err := os.MkdirTemp(fixtureRoot, name+"-")
	if err != nil {
		panic(err)
	}
	return dir
}

// caseLanguage is the language a test whose subject is not the Go path runs its matrix case in
// (testlang.Cheap: Python where pytest is found, else Go).
func caseLanguage(t *testing.T) string { return testlang.Cheap(t) }

// caseFile is a member's deliverable or test file for language: "double.go" and "double_test.go"
// in Go, "double.py" and "test_double.py" in Python (profile standard).
func caseFile(language string, test bool) string {
	switch {
	case language == "python" && test:
		return "test_double.py"
	case language == "python":
		return "double.py"
	case test:
		return "double_test.go"
	default:
		return "double.go"
	}
}

// defaultMatrix is the default `assay matrix run` exactly as the README gives it (sequential and
// parallel, Go on the standard profile, reference provider, table format) into its own output
// directory, with its result: the default test run's one run of the main job's own combination
// (every other catalog case runs in python/single-file here, the rest of the grid with -tags grid).
type defaultMatrix struct {
	out string
	r   result
}

var sharedDefaultMatrix memo[defaultMatrix]

// defaultMatrixRun returns the shared default matrix run. Its output directory is read-only for
// the tests: a test that writes (a store migration, an attestation) copies it first.
func defaultMatrixRun(t *testing.T) defaultMatrix {
	t.Helper()
	return sharedDefaultMatrix.get(t, func(t *testing.T) defaultMatrix {
		out := filepath.Join(fixtureDir("matrix"), "out")
		return defaultMatrix{out: out, r: runCLI(t, "matrix", "run", "--out", out)}
	})
}

// listOf returns the value of key in a command's JSON output object (docs/json.md: a list is
// printed under a key naming it), or the output itself when it is not an object, so that the
// caller's json.Unmarshal reports what it got.
func listOf(t *testing.T, stdout, key string) []byte {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		return []byte(stdout)
	}
	v, ok := doc[key]
	if !ok {
		t.Fatalf("JSON output has no key %q:\n%s", key, stdout)
	}
	return v
}

// Accepted is harness.Summary.Accepted over the printed cases.
func (s summaryJSON) Accepted() bool {
	if len(s.Cases) == 0 {
		return false
	}
	for _, c := range s.Cases {
		if c.Verdict.Verdict != "accepted" {
			return false
		}
	}
	return true
}

// sequentialCase is one sequential case in caseLanguage through runMatrixRun with every other
// harness option at its zero value (tool-call budgets and request timeout 0, which mean the
// defaults) and --format json, its stderr a pseudo-terminal where the machine has one, so that
// --progress auto draws the bar there. Its output directory is read-only for the tests: a test
// that writes (a replay) copies it first.
type sequentialCase struct {
	out, language string
	stdout        string // the JSON summary
	screen        string // what the terminal showed; empty when there is no pseudo-terminal
	noPTY         error  // why there is no pseudo-terminal, or nil
	err           error  // runMatrixRun's error
}

var sharedSequentialCase memo[sequentialCase]

// sequentialCaseRun returns the shared sequential case (sequentialCase).
func sequentialCaseRun(t *testing.T) sequentialCase {
	t.Helper()
	return sharedSequentialCase.get(t, func(t *testing.T) sequentialCase {
		c := sequentialCase{out: filepath.Join(fixtureDir("sequential"), "out"), language: caseLanguage(t)}
		h := harness.Options{OutDir: c.out, Formations: []string{"sequential"}, Language: c.language,
			MemberToolCalls: 0, TeamToolCalls: 0, RequestTimeout: 0}
		var stdout, stderr bytes.Buffer
		errOut := io.Writer(&stderr)
		ptmx, tty, err := pty.Open()
		read := make(chan error, 1)
		if err != nil {
			c.noPTY = err
		} else {
			defer ptmx.Close()
			if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
				t.Fatal(err)
			}
			go func() {
				_, err := io.Copy(&stderr, ptmx) // drained as it is written: a full pty would block the run
				read <- err
			}()
			errOut = tty
		}
		c.err = runMatrixRun(context.Background(), &MatrixRunOptions{IO: IOStreams{Out: &stdout, ErrOut: errOut}, Harness: h, Format: "json"})
		if c.noPTY == nil {
			tty.Close()
			if err := <-read; err != nil && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
				t.Fatal(err)
			}
			c.screen = stderr.String()
		}
		c.stdout = stdout.String()
		if c.err != nil {
			t.Fatalf("the shared sequential case: %v\n%s", c.err, stderr.String())
		}
		return c
	})
}

// replayedSequential is a copy of the shared sequential case replayed once with
// `assay replay verify --latest --format json`: r is that command's result. The copy's output
// directory belongs to TestReplayVerifyExitCodes, which replays it again; other tests read r only.
type replayedSequential struct {
	out string
	r   result
}

var sharedReplayedSequential memo[replayedSequential]

func replayedSequentialRun(t *testing.T) replayedSequential {
	t.Helper()
	s := sequentialCaseRun(t)
	return sharedReplayedSequential.get(t, func(t *testing.T) replayedSequential {
		out := filepath.Join(fixtureDir("replayed"), "out")
		copyTree(t, s.out, out)
		return replayedSequential{out: out, r: runCLI(t, "replay", "verify", "--latest", "--out", out, "--format", "json")}
	})
}
