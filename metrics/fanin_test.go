package metrics_test

import (
	"context"
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
		Enrich: metrics.Enrich(metrics.Options{}), EnrichGraph: metrics.EnrichGraph(metrics.Options{}), EnrichID: metrics.RegistryID()}); err != nil {
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
