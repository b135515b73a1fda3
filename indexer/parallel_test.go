package indexer_test

import (
	"runtime"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestIndexIndependentOfGOMAXPROCS: the relation pass visits files on
// GOMAXPROCS goroutines and the metrics run concurrently; the database
// (graph and metric values) is byte-identical with one goroutine and with
// several, on two real packages of this repository and the cgo fixture.
// Not parallel: GOMAXPROCS is process-wide.
func TestIndexIndependentOfGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		dir      string
		patterns []string
	}{
		{"..", []string{"./indexer", "./metrics"}},
		{"testdata/relations", nil},
	} {
		var sums []string
		for _, procs := range []int{1, 3, 8} {
			runtime.GOMAXPROCS(procs)
			snap := index(t, withMetricsEnrich(indexer.Options{Dir: tc.dir, Patterns: tc.patterns, Tests: true}))
			if snap.Counts.Edges < 50 && tc.dir == ".." {
				t.Fatalf("only %d edges: the comparison proves little", snap.Counts.Edges)
			}
			sums = append(sums, snap.DBSHA256)
		}
		if sums[0] != sums[1] || sums[0] != sums[2] {
			t.Errorf("%s: database SHA-256 at GOMAXPROCS 1, 3, 8: %v", tc.dir, sums)
		}
	}
}
