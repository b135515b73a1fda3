package metrics_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// TestFanInCountsCallersOfTheSameBuild: a production function's fan-in
// counts production callers only, not the copy of a caller that
// go/packages recompiles for that caller's package's test (a new user saw
// fan_in 21 where 12 production functions call); a test variant's
// function counts the callers of its own test build.
func TestFanInCountsCallersOfTheSameBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":      "module example.com/fanin\n\ngo 1.22\n",
		"a/a.go":      "package a\n\nfunc F() int { return 1 }\n",
		"b/b.go":      "package b\n\nimport \"example.com/fanin/a\"\n\nfunc G() int { return a.F() + H() }\n\nfunc H() int { return 2 }\n",
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestG(t *testing.T) { _ = G() }\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(t.TempDir(), "graph.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, Tests: true, DBPath: db,
		Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID()}); err != nil {
		t.Fatal(err)
	}
	vals, err := metrics.Read(context.Background(), db, metrics.Filter{Metrics: []string{"fan_in"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, v := range vals {
		if v.Value != nil {
			got[v.Subject] = *v.Value
		}
	}
	for id, want := range map[string]float64{
		"func:example.com/fanin/a.F":                            1, // b.G; not again b [b.test].G
		"func:example.com/fanin/b.H":                            1, // b.G
		"func:example.com/fanin/b [example.com/fanin/b.test].H": 1, // b [b.test].G
		"func:example.com/fanin/b [example.com/fanin/b.test].G": 1, // TestG
	} {
		if v, ok := got[id]; !ok || v != want {
			t.Errorf("fan_in of %s = %v (present %v), want %v", id, v, ok, want)
		}
	}
	if len(got) < 4 {
		t.Fatalf("only %d fan_in values: %v", len(got), got)
	}
}

// TestFanInCoverageCountsCallersThatDidNotLoad: good.Add is called by
// clean.Twice and by two functions of bad, a package with a type error
// whose own call counts are unavailable ("its static calls are
// incomplete"). Fan-in counts the calls it sees, 3, but its coverage is the
// fraction of the build's packages that loaded cleanly (good and clean of
// good, bad and clean: 2/3, as Ca's is of the base packages), not 1; the
// test variant's Add, whose test build loaded cleanly, has coverage 1.
func TestFanInCoverageCountsCallersThatDidNotLoad(t *testing.T) {
	t.Parallel()
	for _, graph := range []bool{false, true} {
		_, got := indexBrokenCallers(t, graph, metrics.Filter{Metrics: []string{"fan_in", "fan_out", "ca"}})
		const m = "example.com/brokencallers"
		for _, w := range []struct {
			key      string
			value    float64
			coverage float64
		}{
			{"fan_in func:" + m + "/good.Add", 3, 2.0 / 3},
			{"fan_in func:" + m + "/clean.Twice", 0, 2.0 / 3},
			{"fan_in func:" + m + "/good [" + m + "/good.test].Add", 1, 1},
			{"ca pkg:" + m + "/good", 2, 2.0 / 3},
		} {
			v, ok := got[w.key]
			if !ok || v.Value == nil || *v.Value != w.value || math.Abs(v.Coverage-w.coverage) > 1e-12 {
				t.Errorf("graph %v: %s = %s coverage %v (present %v), want %v coverage %v", graph, w.key, fmtVal(v), v.Coverage, ok, w.value, w.coverage)
			}
		}
		if v := got["fan_out func:"+m+"/bad.Sum"]; v.Kind != metrics.Unavailable {
			t.Errorf("graph %v: fan_out of bad.Sum is %s, want unavailable", graph, v.Kind)
		}
	}
}
