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
