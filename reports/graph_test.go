package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/internal/browsertest"
	"github.com/assay-audit/assay/metrics"
)

// indexGraph indexes dir (a module of another package's testdata) with metrics into dbDir.
func indexGraph(t *testing.T, dir, dbDir string) string {
	t.Helper()
	db := filepath.Join(dbDir, "graph.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: dir, Tests: true, DBPath: db,
		Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID()}); err != nil {
		t.Fatalf("index %s: %v", dir, err)
	}
	return db
}

// TestGraphReport indexes the metrics fixture once (indexing is the expensive part) and checks
// every renderer against it.
func TestGraphReport(t *testing.T) {
	db := indexGraph(t, "../metrics/testdata/fixture", t.TempDir())
	ctx := context.Background()
	r, err := ReadGraph(ctx, db, GraphOptions{Top: 5})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := metrics.Read(ctx, db, metrics.Filter{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("values are the stored ones, with their kinds", func(t *testing.T) {
		want := []string{"example.com/mx/abs", "example.com/mx/app", "example.com/mx/cx", "example.com/mx/impl", "example.com/mx/lcom", "example.com/mx/lonely"}
		var got []string
		for _, p := range r.Packages {
			got = append(got, p.ImportPath)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("packages = %v, want %v", got, want)
		}
		lonely := r.Packages[5]
		if v := lonely.Values["instability"]; v.Kind != metrics.Unavailable || v.Value != nil || v.Reason == "" {
			t.Errorf("lonely instability = %+v, want unavailable with a reason (the fixture says Ca + Ce = 0)", v)
		}
		for _, v := range stored {
			if v.Variant != "base" || v.Scope != metrics.ScopePackage {
				continue
			}
			p := findPackage(r, v.Subject)
			if p == nil {
				t.Errorf("%s of %s: package missing from the report", v.Metric, v.Subject)
				continue
			}
			if got := p.Values[v.Metric]; got.Kind != v.Kind || got.Method != v.Method || got.Coverage != v.Coverage || !sameValue(got.Value, v.Value) {
				t.Errorf("%s of %s: report %+v, stored %+v", v.Metric, v.Subject, got, v)
			}
		}
	})

	t.Run("top functions ranked, distributions complete", func(t *testing.T) {
		if len(r.TopFunctions) != 5 || r.Top != 5 {
			t.Fatalf("top functions = %d (Top %d), want 5", len(r.TopFunctions), r.Top)
		}
		prev := 1e18
		for _, f := range r.TopFunctions {
			v := f.Values["cognitive"].Value
			if v == nil {
				continue
			}
			if *v > prev {
				t.Errorf("%s: cognitive %v ranked after %v", f.ID, *v, prev)
			}
			prev = *v
		}
		base := 0
		for _, v := range stored {
			if v.Metric == "cognitive" && v.Variant == "base" {
				base++
			}
		}
		if got := r.Cognitive.Known + r.Cognitive.Unavailable; got != base || base == 0 {
			t.Errorf("cognitive distribution has %d values, the store %d", got, base)
		}
	})

	t.Run("json keeps unavailable as null", func(t *testing.T) {
		var buf bytes.Buffer
		if err := GraphJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		var back struct {
			Packages []struct {
				ImportPath string `json:"import_path"`
				Values     map[string]struct {
					Value *float64 `json:"value"`
					Kind  string   `json:"kind"`
				} `json:"values"`
			} `json:"packages"`
		}
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		v := back.Packages[5].Values["instability"]
		if back.Packages[5].ImportPath != "example.com/mx/lonely" || v.Value != nil || v.Kind != "unavailable" {
			t.Errorf("lonely instability in JSON = %+v", v)
		}
	})

	t.Run("markdown", func(t *testing.T) {
		var buf bytes.Buffer
		if err := GraphMarkdown(&buf, r); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		m := regexp.MustCompile("(?m)^\\| `example\\.com/mx/lonely` \\| 0 _measured_ \\| 0 _measured_ \\| unavailable \\[(\\d+)\\] \\|").FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, "\n["+m[1]+"] Ca + Ce = 0") {
			t.Errorf("markdown does not give lonely's instability as unavailable with its reason (match %q)", m)
		}
		for _, want := range []string{"# assay code-graph report", "`example.com/mx/lonely`",
			"0.5000 _measured_", "## Top 5 functions", "martin-instability@v2", r.Snapshot.ID} {
			if !strings.Contains(out, want) {
				t.Errorf("markdown lacks %q", want)
			}
		}
	})

	t.Run("html in chromium", func(t *testing.T) {
		var buf bytes.Buffer
		if err := GraphHTML(&buf, r); err != nil {
			t.Fatal(err)
		}
		p, dir := inChromium(t, buf.Bytes(), "graph")
		charts, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("svg.assay-chart")].map(s => s.getAttribute("aria-label"))`)
		if err != nil {
			t.Fatal(err)
		}
		if len(charts) != 3 || !strings.Contains(charts[0], "Main sequence") {
			t.Errorf("charts = %q, want the main sequence and two histograms", charts)
		}
		drawn, err := browsertest.Eval[int](p, `[...document.querySelectorAll("svg.assay-chart")].filter(s => s.getBoundingClientRect().width > 200 && s.querySelectorAll("path").length > 10).length`)
		if err != nil || drawn != 3 {
			t.Errorf("charts drawn with a size and paths: %d (%v), want 3", drawn, err)
		}
		rows, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("#packages + .scroll table tbody tr")].map(r => r.innerText)`)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(r.Packages) {
			t.Fatalf("package rows = %d, want %d", len(rows), len(r.Packages))
		}
		notes, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("#packages ~ ol.notes")].slice(0, 1).flatMap(o => [...o.querySelectorAll("li")].map(l => l.innerText))`)
		if err != nil {
			t.Fatal(err)
		}
		// lonely: ca, ce, then instability unavailable with a footnote giving the stored reason.
		m := regexp.MustCompile(`^example\.com/mx/lonely\t0measured\t0measured\tunavailable\[(\d+)\]`).FindStringSubmatch(rows[5])
		if m == nil {
			t.Fatalf("lonely's row does not say its instability is unavailable, with a reason: %q", rows[5])
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 || n > len(notes) || !strings.HasPrefix(notes[n-1], "Ca + Ce = 0") {
			t.Errorf("footnote %s of %q does not give lonely's stored reason (Ca + Ce = 0)", m[1], notes)
		}
		screenPad, _ := browsertest.Eval[string](p, `getComputedStyle(document.body).paddingLeft`)
		screenAndPrint(t, p, dir, "graph", func() {
			printPad, _ := browsertest.Eval[string](p, `getComputedStyle(document.body).paddingLeft`)
			if screenPad == printPad || printPad != "0px" {
				t.Errorf("@media print not applied: body padding %q on screen, %q in print", screenPad, printPad)
			}
		})
	})
}

func TestReadGraphWithoutMetrics(t *testing.T) {
	if _, err := ReadGraph(context.Background(), filepath.Join(t.TempDir(), "missing.db"), GraphOptions{}); err == nil {
		t.Fatal("a missing database gave no error")
	}
	db := filepath.Join(t.TempDir(), "graph.db")
	if _, err := indexer.Index(context.Background(), indexer.Options{Dir: "../metrics/testdata/fixture", DBPath: db, Patterns: []string{"./lonely"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadGraph(context.Background(), db, GraphOptions{}); !errors.Is(err, metrics.ErrNoMetrics) {
		t.Errorf("index without metrics: err = %v, want metrics.ErrNoMetrics", err)
	}
}

func findPackage(r *GraphReport, id string) *GraphPackage {
	for i := range r.Packages {
		if r.Packages[i].ID == id {
			return &r.Packages[i]
		}
	}
	return nil
}

func sameValue(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// A proxy or partial value is never printed as a plain measurement, and a package sum over
// functions with a missing value is a lower bound, never exact.
func TestGraphCellsNeverOverstate(t *testing.T) {
	one, half := 1.0, 0.5
	var notes footnotes
	c := valueCell(metrics.Value{Metric: "betweenness_imports", Value: &half, Kind: metrics.Proxy, Method: "brandes-csr@v3", Coverage: 0.75,
		Detail: "sampled"}, true, &notes)
	if c.Kind != "proxy" || c.Text != "0.5000" || len(c.Notes) != 1 || c.Notes[0] != "coverage 0.750" || !strings.Contains(c.Title, "sampled") {
		t.Errorf("proxy value with coverage 0.75 shown as %+v", c)
	}
	c = valueCell(metrics.Value{Metric: "instability", Kind: metrics.Unavailable, Coverage: 1, Reason: "Ca + Ce = 0"}, true, &notes)
	if c.Text != "unavailable" || len(c.Refs) != 1 || notes.List[c.Refs[0]-1] != "Ca + Ce = 0" {
		t.Errorf("unavailable value shown as %+v (notes %q)", c, notes.List)
	}
	if c := valueCell(metrics.Value{}, false, &notes); c.Text != "-" || c.Kind != "" {
		t.Errorf("a value the store lacks shown as %+v", c)
	}
	var agg GraphAggregate
	agg.add(metrics.Value{Value: &one, Kind: metrics.Measured, Coverage: 1})
	if c := aggregateCell(agg, "1"); c.Text != "1" || c.Kind != "measured" {
		t.Errorf("exact sum shown as %+v", c)
	}
	agg.add(metrics.Value{Kind: metrics.Unavailable, Coverage: 1})
	if c := aggregateCell(agg, "1"); c.Text != "≥ 1" || c.Kind != "partial" || len(c.Notes) != 1 {
		t.Errorf("sum with an unavailable function value shown as %+v", c)
	}
	var none GraphAggregate
	none.add(metrics.Value{Kind: metrics.Unavailable})
	if c := aggregateCell(none, "0"); c.Text != "unknown" {
		t.Errorf("sum of only unavailable values shown as %+v, want unknown (never 0)", c)
	}
}

// A module whose packages do not all load: values computed from incomplete inputs carry their
// coverage, sums over unavailable function values are unknown, and the main sequence draws the
// affected points hollow.
func TestGraphReportMarksIncompleteInputs(t *testing.T) {
	db := indexGraph(t, "../indexer/testdata/broken", t.TempDir())
	r, err := ReadGraph(context.Background(), db, GraphOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := newGraphView(r)
	var bad *graphPackageView
	for i := range v.Packages {
		if v.Packages[i].ImportPath == "example.com/broken/bad" {
			bad = &v.Packages[i]
		}
	}
	if bad == nil {
		t.Fatalf("no row for example.com/broken/bad in %+v", v.Packages)
	}
	if bad.LoadErrors == 0 {
		t.Errorf("bad's load errors not counted")
	}
	if bad.SCC.Text != "unknown" || bad.Dynamic.Text != "unknown" {
		t.Errorf("bad's SCC and dynamic-call sums = %q, %q; want unknown (its functions' values are unavailable)", bad.SCC.Text, bad.Dynamic.Text)
	}
	instability := bad.Cells[2]
	if instability.Kind != "measured" || !slices.Contains(instability.Notes, "coverage 0.000") {
		t.Errorf("bad's instability = %+v, want measured with its coverage 0.000 printed beside it", instability)
	}
	if v.Approximate == 0 {
		t.Errorf("no main-sequence point is marked approximate although bad's values have coverage 0")
	}
}
