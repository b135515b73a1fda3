package metrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// A function of a package with type errors has unresolved calls: its call counts and its call-graph
// betweenness are unavailable
// with a reason, never a measured 0 (an adversarial tester saw fan_out 0 "measured", coverage 0).
func TestCallCountsOfABrokenPackageAreUnavailable(t *testing.T) {
	db := filepath.Join(t.TempDir(), "graph.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: "../indexer/testdata/broken", Tests: true, DBPath: db,
		Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID()}); err != nil {
		t.Fatal(err)
	}
	vals, err := metrics.Read(context.Background(), db, metrics.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, v := range vals {
		switch v.Metric {
		case "fan_in", "fan_out", "dynamic_calls", "call_scc_size", "betweenness_calls":
		default:
			continue
		}
		broken := strings.Contains(v.Subject, "example.com/broken/bad.")
		switch {
		case broken && (v.Kind != metrics.Unavailable || v.Value != nil || !strings.Contains(v.Reason, "type errors")):
			t.Errorf("%s of %s = %v (%s), want unavailable", v.Metric, v.Subject, v.Value, v.Kind)
		case !broken && strings.Contains(v.Subject, "example.com/broken/good.") && v.Kind != metrics.Measured:
			t.Errorf("%s of %s is %s, want measured", v.Metric, v.Subject, v.Kind)
		}
		if broken {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no call-count values for the broken package's functions")
	}
}

// TestReasonsOfAPackageIllTypedThroughAnImport: example.com/broken/user has
// no error of its own; it is ill-typed because its import bad has a type
// error. Its functions' reasons say that (a user read "package user has
// load or type errors" and "the package has load errors" for a package
// without any), while bad's still say it has errors.
func TestReasonsOfAPackageIllTypedThroughAnImport(t *testing.T) {
	t.Parallel()
	for _, graph := range []bool{false, true} {
		_, vals := indexValues(t, "../indexer/testdata/broken", !graph, metrics.Filter{Scope: metrics.ScopeFunc})
		const through = "package example.com/broken/user has no errors of its own but is ill-typed through its import example.com/broken/bad, which did not load cleanly"
		seen := map[string]bool{}
		for _, v := range vals {
			switch v.Subject {
			case "func:example.com/broken/user.UseFine":
				seen[v.Metric] = true
				if !strings.HasPrefix(v.Reason, through) || strings.Contains(v.Reason, "load errors") || strings.Contains(v.Reason, "has load or type errors") {
					t.Errorf("graph %v: %s of user.UseFine: reason %q, want it to start %q", graph, v.Metric, v.Reason, through)
				}
			case "func:example.com/broken/bad.Fine":
				if !strings.HasPrefix(v.Reason, "package example.com/broken/bad has load or type errors") {
					t.Errorf("graph %v: %s of bad.Fine: reason %q, want bad's own errors", graph, v.Metric, v.Reason)
				}
			}
		}
		if len(seen) != len(metrics.Names(metrics.ScopeFunc)) {
			t.Errorf("graph %v: user.UseFine has values of %v only", graph, seen)
		}
	}
}
