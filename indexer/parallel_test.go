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
		shared string // the name of the shared index of opts (sharedIndexOf)
		opts   indexer.Options
	}{
		{sharedIndexerAndMetrics, indexerAndMetricsOptions()},
		{sharedRelations, relationsOptions()},
	} {
		var sums []string
		for _, procs := range []int{1, 3, 8} {
			runtime.GOMAXPROCS(procs)
			opts := tc.opts
			var snap indexer.Snapshot
			if procs == 1 {
				// The index at GOMAXPROCS 1 is the one other tests read:
				// this test is not parallel, so it runs before them and
				// builds it (unless a test run alone built it at another
				// GOMAXPROCS: then it indexes its own).
				if s, builtAt := sharedIndexAt(t, tc.shared, nil, opts); builtAt == 1 {
					snap = s
				}
			}
			if snap.DBPath == "" {
				snap = index(t, opts)
			}
			if snap.Counts.Edges < 50 && tc.opts.Dir == ".." {
				t.Fatalf("only %d edges: the comparison proves little", snap.Counts.Edges)
			}
			sums = append(sums, snap.DBSHA256)
		}
		if sums[0] != sums[1] || sums[0] != sums[2] {
			t.Errorf("%s: database SHA-256 at GOMAXPROCS 1, 3, 8: %v", tc.opts.Dir, sums)
		}
	}
}
