package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

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

// TestRefusedIndexLeavesNoOutputDirectory: an index refused for bad input
// (no package matched, a bad flag) creates no output directory; a
// successful one does.
func TestRefusedIndexLeavesNoOutputDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for i, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--pattern", "./nope/..."}, 2},
		{[]string{"--betweenness-sources", "-1"}, 2},
		// The go command refuses the build context asked for: bad input (exit 2), and nothing is
		// written either.
		{[]string{"--goos", "plan10"}, 2},
	} {
		args := c.args
		out := filepath.Join(base, fmt.Sprint("out", i))
		r := runCLI(t, append(append([]string{"index", "--out", out}, args...), "../../metrics/testdata/fixture")...)
		if r.code != c.code {
			t.Errorf("%q: exit %d, want %d", args, r.code, c.code)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%q: the output directory exists after a refused run (%v)", args, err)
		}
	}
	out := filepath.Join(base, "ok")
	if r := runCLI(t, "index", "--out", out, "../../metrics/testdata/fixture"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "graph.db")); err != nil {
		t.Fatal(err)
	}
}
