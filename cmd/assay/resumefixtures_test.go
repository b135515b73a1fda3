package main

import (
	"path/filepath"
	"testing"
)

// The resume tests' shared starting points. Each is made once per test binary (memo) and is
// read-only: a test that resumes, approves, plants a file or edits the store works on its own copy
// (copyCase), so the tests stay independent of each other's order while the matrix run that makes
// the starting point runs once instead of once per test.

// pausedCase is a paused (or interrupted) case's output directory, the policy file it ran under
// ("" for none) and its run.
type pausedCase struct {
	out, policy, run string
}

// copyCase copies the shared case's output directory, and its policy file when there is one, into
// a new directory of t's and returns the copy (the copy's policy is in the same directory as the
// copy's output, as pausedRunIn lays them out).
func copyCase(t *testing.T, p pausedCase) pausedCase {
	t.Helper()
	dir := t.TempDir()
	c := pausedCase{out: filepath.Join(dir, "out"), run: p.run}
	copyTree(t, p.out, c.out)
	if p.policy != "" {
		c.policy = filepath.Join(dir, filepath.Base(p.policy))
		copyTree(t, p.policy, c.policy)
	}
	return c
}

var sharedPausedGo memo[pausedCase]

// pausedSequentialGo returns a copy of the sequential case in Go paused by askTests: exec-1 has
// written its deliverable and awaits an approval for its test file (double_test.go); exec-2 has not
// started. Go because one of its users plants a Go TestMain (TestHandPlacedTestFilesTakeNoPartInTheTests);
// the others are not about the language and share the one run.
func pausedSequentialGo(t *testing.T) pausedCase {
	t.Helper()
	p := sharedPausedGo.get(t, func(t *testing.T) pausedCase {
		out, pol, run, _ := pausedRunIn(t, fixtureDir("paused-go"), "sequential", "go")
		return pausedCase{out: out, policy: pol, run: run}
	})
	return copyCase(t, p)
}

// killedRemote is killedRemoteRun's result: the committed effect's idempotency key besides the case.
type killedRemote struct {
	pausedCase
	key string
}

var sharedKilledRemote memo[killedRemote]

// killedRemoteCopy returns a copy of the shared killedRemoteRun (the sequential+remote case killed
// with SIGKILL between exec-1's committed PUT and its outcome) and the committed effect's key; the
// copy's effect service database is reference-effects.db in its output directory.
func killedRemoteCopy(t *testing.T) (pausedCase, string) {
	t.Helper()
	k := sharedKilledRemote.get(t, func(t *testing.T) killedRemote {
		out, run, key, _ := killedRemoteRun(t, fixtureDir("killed-remote"))
		return killedRemote{pausedCase: pausedCase{out: out, run: run}, key: key}
	})
	return copyCase(t, k.pausedCase), k.key
}
