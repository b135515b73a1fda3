package metrics_test

import (
	"math"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// TestCoverageOfEveryKind: coverage is the fraction of a value's inputs
// that loaded, whatever the value's kind; every unavailable value stored 0,
// so a filter on coverage < 1 read "no named types" or "Ca + Ce = 0" as
// load problems. In metrics/testdata/brokencallers bad has a type error;
// good and clean load (2 of the 3 base packages).
func TestCoverageOfEveryKind(t *testing.T) {
	t.Parallel()
	for _, graph := range []bool{false, true} {
		snap, got := indexBrokenCallers(t, graph, metrics.Filter{})
		const m = "example.com/brokencallers"
		for _, w := range []struct {
			key       string
			available bool
			coverage  float64
			reason    string
		}{
			// Nothing missing, no value: coverage 1.
			{"abstractness pkg:" + m + "/clean", false, 1, "no named types"},
			{"distance pkg:" + m + "/clean", false, 2.0 / 3, "A is unavailable"}, // also rests on Ca, whose importers did not all load
			// Inputs that did not load: below 1, unavailable or not.
			{"abstractness pkg:" + m + "/bad", false, 0, "no named types"},
			{"fan_out func:" + m + "/bad.Sum", false, 0, "has load or type errors"},
			{"fan_in func:" + m + "/bad.Sum", false, 2.0 / 3, "has load or type errors"},
			{"betweenness_calls func:" + m + "/bad.Sum", false, snap.Coverage, "has load or type errors"},
			{"betweenness_calls func:" + m + "/good.Add", true, snap.Coverage, ""},
			// Syntax complete: cyclomatic's inputs loaded; cognitive's recursion
			// increment rests on bad's call graph, which did not.
			{"cyclomatic func:" + m + "/bad.Sum", true, 1, "the syntax was measured as written"},
			{"cognitive func:" + m + "/bad.Sum", true, 0, "static call graph that may be incomplete"},
			{"cognitive func:" + m + "/good.Add", true, 1, ""},
		} {
			v, ok := got[w.key]
			switch {
			case !ok:
				t.Errorf("graph %v: no %s", graph, w.key)
			case (v.Value != nil) != w.available || math.Abs(v.Coverage-w.coverage) > 1e-12 || !strings.Contains(v.Reason, w.reason):
				t.Errorf("graph %v: %s = %s (%s) coverage %v reason %q; want available %v coverage %v, reason mentioning %q",
					graph, w.key, fmtVal(v), v.Kind, v.Coverage, v.Reason, w.available, w.coverage, w.reason)
			}
		}
		if snap.Coverage >= 1 {
			t.Fatalf("graph %v: snapshot coverage %v: the fixture should not load cleanly", graph, snap.Coverage)
		}
	}
}

// indexBrokenCallers indexes metrics/testdata/brokencallers with the
// metrics and returns the snapshot and the values filter selects, by
// "metric subject": as the index stored them (from its graph in memory)
// when graph, computed from the written database otherwise.
func indexBrokenCallers(t *testing.T, graph bool, filter metrics.Filter) (indexer.Snapshot, map[string]metrics.Value) {
	t.Helper()
	snap, vals := indexValues(t, "testdata/brokencallers", !graph, filter)
	got := map[string]metrics.Value{}
	for _, v := range vals {
		got[v.Metric+" "+v.Subject] = v
	}
	return snap, got
}
