package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestIndexSetsItsOwnGCTarget: `assay index` sets indexGCPercent for its
// own process (the indexer package sets no process setting); a GOGC in the
// environment wins.
func TestIndexSetsItsOwnGCTarget(t *testing.T) {
	// Not parallel: the GC target is the process's.
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set in the environment: assay index leaves it")
	}
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	if r := runCLI(t, "index", "--metrics=false", "--out", t.TempDir(), "../../metrics/testdata/fixture"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	if got := debug.SetGCPercent(100); got != indexGCPercent {
		t.Errorf("GC percent after assay index = %d, want %d", got, indexGCPercent)
	}
	t.Setenv("GOGC", "150")
	if r := runCLI(t, "index", "--metrics=false", "--out", t.TempDir(), "../../metrics/testdata/fixture"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after assay index with GOGC set = %d, want it left alone (100)", got)
	}
}
