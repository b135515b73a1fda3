package main

import "testing"

// TestEmptyFlagValuesAreRefused: a flag given with an empty value is bad
// input (exit 2, one line), not a silent "not given".
func TestEmptyFlagValuesAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"index", "--pattern", "", "--out", t.TempDir(), "../../metrics/testdata/fixture"},
		{"index", "--tags", "", "--out", t.TempDir(), "../../metrics/testdata/fixture"},
		{"index", "--goos", "", "--out", t.TempDir(), "../../metrics/testdata/fixture"},
		{"metrics", "--sort", "", "--out", t.TempDir()},
		{"metrics", "--snapshot", "", "--out", t.TempDir()},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
			continue
		}
		oneLine(t, r, "empty")
	}
}
