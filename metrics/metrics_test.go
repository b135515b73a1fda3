package metrics_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// indexFixture returns the snapshot of testdata/fixture indexed with the
// metrics (opts) and the values by "metric subject". With the default
// options the database is the one the test binary shares
// (sharedEnrichedIndex): read it, never write it.
func indexFixture(t *testing.T, opts metrics.Options) (indexer.Snapshot, map[string]metrics.Value) {
	t.Helper()
	var snap indexer.Snapshot
	if opts == (metrics.Options{}) {
		snap = sharedEnrichedIndex(t, "testdata/fixture")
	} else {
		var err error
		snap, err = indexer.Index(context.Background(), indexer.Options{
			Dir: "testdata/fixture", Tests: true, DBPath: filepath.Join(t.TempDir(), "graph.db"), Enrich: metrics.Enrich(opts), EnrichID: metrics.RegistryID(),
		})
		if err != nil {
			t.Fatalf("Index: %v", err)
		}
	}
	vals, err := metrics.Read(context.Background(), snap.DBPath, metrics.Filter{})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	byKey := map[string]metrics.Value{}
	for _, v := range vals {
		byKey[v.Metric+" "+v.Subject] = v
	}
	return snap, byKey
}

// indexValues returns the values filter selects (SnapshotID aside) of dir
// (a module, all its packages) indexed with the metrics: as the index
// stored them, computed from its graph in memory (Enrich), or when fromDB
// computed again by Compute from the written database. The index is the
// one the test binary shares (sharedEnrichedIndex), so a test that asks
// both ways compares the two on one database. Tests that call it both
// ways check that the two say the same.
func indexValues(t *testing.T, dir string, fromDB bool, filter metrics.Filter) (indexer.Snapshot, []metrics.Value) {
	t.Helper()
	ctx := context.Background()
	snap := sharedEnrichedIndex(t, dir)
	if !fromDB {
		vals, err := metrics.Read(ctx, snap.DBPath, filter)
		if err != nil {
			t.Fatal(err)
		}
		return snap, vals
	}
	h, err := indexer.OpenDatabase(ctx, snap.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	vals, err := metrics.Compute(ctx, h, metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap, slices.DeleteFunc(vals, func(v metrics.Value) bool {
		return (filter.Scope != "" && v.Scope != filter.Scope) || (len(filter.Metrics) > 0 && !slices.Contains(filter.Metrics, v.Metric))
	})
}

// want is an expected value: a number, or unavailable (nil).
type want struct {
	metric, subject string
	value           *float64
	reason          string // substring of the reason, when one is expected
}

func check(t *testing.T, got map[string]metrics.Value, cases []want) {
	t.Helper()
	for _, w := range cases {
		v, ok := got[w.metric+" "+w.subject]
		if !ok {
			t.Errorf("%s of %s: no value", w.metric, w.subject)
			continue
		}
		switch {
		case w.value == nil:
			if v.Kind != metrics.Unavailable || v.Value != nil {
				t.Errorf("%s of %s = %v (%s), want unavailable", w.metric, w.subject, fmtVal(v), v.Kind)
			}
		case v.Value == nil:
			t.Errorf("%s of %s unavailable (%s), want %v", w.metric, w.subject, v.Reason, *w.value)
		case fmt.Sprintf("%.6f", *v.Value) != fmt.Sprintf("%.6f", *w.value):
			t.Errorf("%s of %s = %v, want %v", w.metric, w.subject, *v.Value, *w.value)
		}
		if w.reason != "" && !contains(v.Reason, w.reason) {
			t.Errorf("%s of %s: reason %q, want it to mention %q", w.metric, w.subject, v.Reason, w.reason)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func fmtVal(v metrics.Value) string {
	if v.Value == nil {
		return "NULL"
	}
	return fmt.Sprint(*v.Value)
}

const mx = "example.com/mx"

// TestPackageMetrics: package metrics are of base variants only (the
// values are the fixture's want comments, TestFixtureWants).
func TestPackageMetrics(t *testing.T) {
	t.Parallel()
	_, got := indexFixture(t, metrics.Options{})
	for key, v := range got {
		if v.Scope == metrics.ScopePackage && v.Variant != "base" {
			t.Errorf("package metric %s on variant %s; only base variants are measured", key, v.Variant)
		}
	}
}

// TestLCOM4: only the types whose methods use no field are flagged
// no_state, and the detail counts methods and fields (the values are the
// fixture's want comments, TestFixtureWants). The rule is Hitz & Montazeri's
// (vertices: the methods only), so a type with one method and five fields
// has LCOM4 1, not 6; a type without methods has no value, never 0.
func TestLCOM4(t *testing.T) {
	t.Parallel()
	_, got := indexFixture(t, metrics.Options{})
	ty := func(name string) string { return "type:" + mx + "/lcom." + name }
	noState := map[string]bool{}
	for _, name := range []string{"Stateless", "Bystander", "StatelessFields"} {
		noState["lcom4 "+ty(name)] = true
		noState["lcom4 type:"+mx+"/lcom ["+mx+"/lcom.test]."+name] = true
	}
	for key, v := range got {
		if v.NoState() != noState[key] {
			t.Errorf("%s: NoState %v with reason %q; only Stateless, Bystander and StatelessFields (both variants) use no field", key, v.NoState(), v.Reason)
		}
	}
	if v := got["lcom4 "+ty("Cohesive")]; v.Reason != "" || v.Detail != "methods=3 fields=3" {
		t.Errorf("Cohesive: reason %q detail %q", v.Reason, v.Detail)
	}
	if a, b := got["lcom4 "+ty("Cohesive")].Detail, got["lcom4 "+ty("Split")].Detail; a != b {
		t.Errorf("Cohesive and Split should have the same numbers of methods and fields: %q vs %q", a, b)
	}
	// A type with one method has one component whatever its fields: the
	// superseded definition (fields as vertices) gave Bystander 6.
	if v := got["lcom4 "+ty("Bystander")]; v.Value == nil || *v.Value != 1 || v.Detail != "methods=1 fields=5" {
		t.Errorf("Bystander (1 method, 5 fields): %s detail %q, want 1", fmtVal(v), v.Detail)
	}
	for _, m := range []string{"lcom4", "n_unused_fields"} {
		if v := got[m+" "+ty("Data")]; v.Kind != metrics.Unavailable || v.Value != nil || !contains(v.Reason, "no methods") {
			t.Errorf("%s of Data (no methods) = %s %s %q, want unavailable", m, fmtVal(v), v.Kind, v.Reason)
		}
	}
	if v := got["lcom4 "+ty("Data")]; !contains(v.Reason, "not assessable") {
		t.Errorf("lcom4 of Data: reason %q, want it to say not assessable", v.Reason)
	}
}

// TestComplexity: a closure has no folded value of its own (the values
// are the fixture's want comments, TestFixtureWants).
func TestComplexity(t *testing.T) {
	t.Parallel()
	_, got := indexFixture(t, metrics.Options{})
	if _, ok := got["cyclomatic func:"+mx+"/cx.WithClosure$1"]; !ok {
		t.Fatalf("WithClosure$1 has no values at all: the fixture changed")
	}
	if _, ok := got["cyclomatic_folded func:"+mx+"/cx.WithClosure$1"]; ok {
		t.Errorf("closures have no folded value")
	}
}

// TestCallGraphMetrics: betweenness says how it was computed, exact or
// sampled (the call counts are the fixture's want comments,
// TestFixtureWants).
func TestCallGraphMetrics(t *testing.T) {
	t.Parallel()
	_, got := indexFixture(t, metrics.Options{})
	v := got["betweenness_calls "+"method:"+mx+"/cx.Tree.Walk"]
	if v.Kind != metrics.Measured || !contains(v.Detail, "exact") || !contains(v.Detail, "static call graph") {
		t.Errorf("betweenness provenance: kind %s detail %q", v.Kind, v.Detail)
	}
	// Sampling turns betweenness into a proxy that says so.
	_, sampled := indexFixture(t, metrics.Options{BetweennessSources: 2})
	s := sampled["betweenness_calls "+"method:"+mx+"/cx.Tree.Walk"]
	if s.Kind != metrics.Proxy || !contains(s.Detail, "sampled: 2 of") {
		t.Errorf("sampled betweenness: kind %s detail %q", s.Kind, s.Detail)
	}
}

// TestProvenance: every value carries method, snapshot, build context and
// coverage; unavailable values are NULL with a reason, never 0.
func TestProvenance(t *testing.T) {
	t.Parallel()
	snap, got := indexFixture(t, metrics.Options{})
	if len(got) == 0 {
		t.Fatal("no values")
	}
	for key, v := range got {
		if v.SnapshotID != snap.ID || v.Method == "" || v.BuildContext == "" || v.Origin == "" {
			t.Errorf("%s: missing provenance %+v", key, v)
		}
		if (v.Kind == metrics.Unavailable) != (v.Value == nil) || (v.Kind == metrics.Unavailable && v.Reason == "") {
			t.Errorf("%s: kind %s with value %s reason %q", key, v.Kind, fmtVal(v), v.Reason)
		}
		// Every package of the fixture loads: every value's inputs are
		// complete, an unavailable value's too (app declares no named
		// types: nothing is missing, there is no ratio).
		if v.Coverage != 1 {
			t.Errorf("%s (%s, %q): coverage %v, want 1 in a snapshot where everything loaded", key, v.Kind, v.Reason, v.Coverage)
		}
		d, ok := metrics.Lookup(v.Metric)
		if !ok || d.Method.String() != v.Method || d.Scope != v.Scope {
			t.Errorf("%s: not described by the registry (%v)", key, ok)
		}
		if ok && d.Integer && v.Value != nil && *v.Value != math.Trunc(*v.Value) {
			t.Errorf("%s = %v: the descriptor says its values are whole numbers", key, *v.Value)
		}
	}
}

func TestReadRefusals(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "graph.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: "testdata/fixture", DBPath: db}); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.Read(context.Background(), db, metrics.Filter{}); !errors.Is(err, metrics.ErrNoMetrics) {
		t.Errorf("Read of a database without metrics: %v, want ErrNoMetrics", err)
	}
	snap, _ := indexFixture(t, metrics.Options{})
	if _, err := metrics.Read(context.Background(), snap.DBPath, metrics.Filter{SnapshotID: "0123"}); !errors.Is(err, metrics.ErrSnapshotMismatch) {
		t.Errorf("Read with another snapshot id: %v, want ErrSnapshotMismatch", err)
	}
	vals, err := metrics.Read(context.Background(), snap.DBPath, metrics.Filter{SnapshotID: snap.ID[:12], Scope: metrics.ScopeType, Metrics: []string{"lcom4"}})
	if err != nil || len(vals) == 0 {
		t.Fatalf("Read by snapshot prefix and scope: %d values, %v", len(vals), err)
	}
	for _, v := range vals {
		if v.Metric != "lcom4" {
			t.Errorf("filter leaked %s", v.Metric)
		}
	}
}

// TestRegistry: names are unique, every descriptor is complete.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range metrics.Registry() {
		if seen[d.Name] {
			t.Errorf("duplicate metric %s", d.Name)
		}
		seen[d.Name] = true
		if d.Title == "" || d.Doc == "" || d.Source == "" || d.Coverage == "" || d.Method.ID == "" || d.Method.Version == 0 || d.Compute == nil {
			t.Errorf("%s: incomplete descriptor", d.Name)
		}
		if d.Kind != metrics.Measured && d.Kind != metrics.Proxy {
			t.Errorf("%s: kind %s", d.Name, d.Kind)
		}
	}
	// Ratios and centralities print with decimals, counts without.
	var fractional []string
	for _, d := range metrics.Registry() {
		if !d.Integer {
			fractional = append(fractional, d.Name)
		}
	}
	if diff := cmp.Diff([]string{"instability", "abstractness", "distance", "betweenness_imports", "betweenness_calls"}, fractional); diff != "" {
		t.Errorf("metrics whose values are not whole numbers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"lcom4", "n_fields", "n_unused_fields"}, metrics.Names(metrics.ScopeType)); diff != "" {
		t.Errorf("type-scope metrics (-want +got):\n%s", diff)
	}
}

// TestWriteStoresEveryColumn: every column of every value read back through
// the metric_values view equals the value computed, although scope, method,
// snapshot and build context are stored once; and a value that does not
// match its descriptor is refused rather than stored as its descriptor's.
func TestWriteStoresEveryColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "graph.db")
	if _, err := indexer.Index(ctx, indexer.Options{Dir: "testdata/fixture", Tests: true, DBPath: dbPath}); err != nil {
		t.Fatal(err)
	}
	db, err := indexer.OpenDatabase(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	computed, err := metrics.Compute(ctx, db, metrics.Options{})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, stored := indexFixture(t, metrics.Options{})
	if len(stored) != len(computed) {
		t.Fatalf("%d values stored, %d computed", len(stored), len(computed))
	}
	for _, v := range computed {
		got := stored[v.Metric+" "+v.Subject]
		// The two indexes are of the same sources: only the database differs.
		if diff := cmp.Diff(v, got); diff != "" {
			t.Fatalf("%s of %s read back (-computed +stored):\n%s", v.Metric, v.Subject, diff)
		}
	}

	rw, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	for _, tc := range []struct {
		name   string
		mutate func(v *metrics.Value)
	}{
		{"other scope", func(v *metrics.Value) {
			v.Scope = map[bool]metrics.Scope{true: metrics.ScopeFunc, false: metrics.ScopeType}[v.Scope == metrics.ScopeType]
		}},
		{"other method", func(v *metrics.Value) { v.Method = "something-else@v9" }},
		{"unknown metric", func(v *metrics.Value) { v.Metric = "no_such_metric" }},
		{"other snapshot", func(v *metrics.Value) { v.SnapshotID = "0000" }},
	} {
		vals := slices.Clone(computed)
		tc.mutate(&vals[len(vals)-1])
		tx, err := rw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = metrics.Write(ctx, tx, vals)
		_ = tx.Rollback()
		if !errors.Is(err, metrics.ErrValueMismatch) {
			t.Errorf("%s: Write error %v, want ErrValueMismatch", tc.name, err)
		}
	}
}

// TestEnrichEqualsCompute: the values computed from the in-memory graph
// while it is written (Enrich, what an index stores) are the values
// Compute gives from the written database, row for row, on the fixture, on
// the indexer's relations fixture (cgo: synthesized files and functions),
// on a package with a file of more than ten syntax errors (go/parser gives
// up on such a file unless asked for all errors, which the indexer's trees
// are parsed with) and on two packages of this repository.
func TestEnrichEqualsCompute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dir string
		patterns  []string
		// syntaxErrors: some indexed file does not parse, and has no tree
		// handed over.
		syntaxErrors bool
	}{
		{"fixture", "testdata/fixture", nil, false},
		{"cgo and relations", "../indexer/testdata/relations", nil, false},
		{"syntax errors", "testdata/syntaxerrors", nil, true},
		{"callers with type errors", "testdata/brokencallers", nil, false},
		{"indexer and metrics", "..", []string{"./indexer", "./metrics"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := filepath.Join(t.TempDir(), "graph.db")
			enrich := metrics.Enrich(metrics.Options{})
			opts := indexer.Options{Dir: tc.dir, Patterns: tc.patterns, Tests: true, DBPath: db, EnrichID: metrics.RegistryID(),
				Enrich: func(ctx context.Context, g *indexer.GraphView) (func(context.Context, *indexer.Tx) error, error) {
					// Complexity is measured from the indexer's trees, not
					// from files read again: every indexed file has one.
					for _, f := range g.Files {
						if _, ok := g.Syntax[f.Path]; f.Indexed && !ok && !tc.syntaxErrors {
							t.Errorf("no syntax handed over for indexed file %s", f.Path)
						}
					}
					return enrich(ctx, g)
				}}
			if _, err := indexer.Index(ctx, opts); err != nil {
				t.Fatal(err)
			}
			stored, err := metrics.Read(ctx, db, metrics.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			h, err := indexer.OpenDatabase(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			computed, err := metrics.Compute(ctx, h, metrics.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(computed) < 50 && tc.dir == ".." {
				t.Fatalf("only %d values: the comparison proves little", len(computed))
			}
			if diff := cmp.Diff(computed, stored); diff != "" {
				t.Errorf("values (-Compute from the database +Enrich from the graph):\n%s", diff)
			}
		})
	}
}

// TestScopesIsAFreshSlice: a caller that changes the scopes it got does
// not change what the next caller gets.
func TestScopesIsAFreshSlice(t *testing.T) {
	t.Parallel()
	s := metrics.Scopes()
	s[0] = "changed"
	if diff := cmp.Diff([]metrics.Scope{metrics.ScopePackage, metrics.ScopeType, metrics.ScopeFunc}, metrics.Scopes()); diff != "" {
		t.Errorf("Scopes after a caller changed its copy (-want +got):\n%s", diff)
	}
}
