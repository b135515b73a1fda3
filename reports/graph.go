package reports

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// DefaultGraphTop is how many functions the code-graph report lists when GraphOptions.Top is 0.
const DefaultGraphTop = 20

// GraphOptions select what ReadGraph puts in a GraphReport.
type GraphOptions struct {
	// Top is how many functions the top-functions table lists (ranked by cognitive complexity,
	// then cyclomatic, then id); 0 means DefaultGraphTop.
	Top int
}

// GraphReport is the code-graph report: a graph database's snapshot and its metric values, each
// with the provenance the index stored (kind, method, coverage, reason, detail), for base package
// variants. It is what the md, html and json renderers draw; it is built only from the database.
type GraphReport struct {
	// DBPath is the graph database the report was read from.
	DBPath   string           `json:"db_path"`
	Snapshot indexer.Snapshot `json:"snapshot"`
	// Metrics are the descriptors the database stores (metric_descriptors), in registry order.
	Metrics []GraphMetric `json:"metrics"`
	// Packages are the base package variants with package-scope values, by import path.
	Packages []GraphPackage `json:"packages"`
	// TopFunctions are the Top functions (funcs, methods, closures of base variants) with the
	// highest cognitive complexity; functions without a value come after every known value.
	TopFunctions []GraphFunction `json:"top_functions"`
	// Top is the number of functions asked for.
	Top int `json:"top"`
	// Cognitive and Cyclomatic are the distributions drawn as histograms.
	Cognitive  GraphDistribution `json:"cognitive"`
	Cyclomatic GraphDistribution `json:"cyclomatic"`
}

// GraphMetric is one stored metric descriptor.
type GraphMetric struct {
	Name   string `json:"name"`
	Title  string `json:"title"`
	Scope  string `json:"scope"`
	Kind   string `json:"kind"`
	Method string `json:"method"`
	Source string `json:"source"`
}

// GraphPackage is one package's row: its package-scope values keyed by metric name, and what its
// functions' values add up to.
type GraphPackage struct {
	ID         string                   `json:"id"`
	ImportPath string                   `json:"import_path"`
	Origin     string                   `json:"origin"`
	Values     map[string]metrics.Value `json:"values"`
	// LoadErrors is the number of load errors recorded for the package (its values' coverage
	// says what they touched).
	LoadErrors int `json:"load_errors"`
	// SCC and Dynamic aggregate the func-scope values call_scc_size and dynamic_calls of the
	// package's functions.
	SCC     GraphSCC       `json:"scc"`
	Dynamic GraphAggregate `json:"dynamic_calls"`
}

// GraphAggregate is a sum over a package's function values of one metric. It is exact only when
// Unavailable is 0 and Partial is 0; otherwise the sum is a lower bound over what was measured,
// and renderers say so.
type GraphAggregate struct {
	Metric string `json:"metric"`
	Method string `json:"method"`
	// Sum is the sum of the known values.
	Sum float64 `json:"sum"`
	// Functions is the number of function values read; Unavailable of them had none; Partial
	// were computed with coverage below 1; Proxy are approximations.
	Functions   int `json:"functions"`
	Unavailable int `json:"unavailable"`
	Partial     int `json:"partial"`
	Proxy       int `json:"proxy"`
}

// Exact reports whether the aggregate is a complete sum of measured values.
func (a GraphAggregate) Exact() bool {
	return a.Functions > 0 && a.Unavailable == 0 && a.Partial == 0 && a.Proxy == 0
}

// GraphSCC summarises a package's call-graph strongly connected components (Tarjan 1972) from
// its functions' call_scc_size values. A cycle cannot leave a package (Go has no import cycles),
// so the package's non-trivial components are exactly those of its functions: Components is the
// sum of 1/size over functions in a component of size ≥ 2.
type GraphSCC struct {
	GraphAggregate
	// Components is the number of components with two or more functions; InCycles the functions
	// in them; Largest the largest size (0 when none).
	Components int `json:"components"`
	InCycles   int `json:"in_cycles"`
	Largest    int `json:"largest"`
	recip      float64
}

// GraphFunction is one row of the top-functions table.
type GraphFunction struct {
	ID      string `json:"id"`
	Package string `json:"package"`
	Origin  string `json:"origin"`
	// File is module-relative; Line 1-based; 0 when unknown.
	File   string                   `json:"file,omitempty"`
	Line   int                      `json:"line,omitempty"`
	Values map[string]metrics.Value `json:"values"`
}

// GraphDistribution is one func-scope metric's values over base-variant functions.
type GraphDistribution struct {
	Metric string    `json:"metric"`
	Method string    `json:"method"`
	Values []float64 `json:"-"`
	// Known is len(Values); Unavailable counts functions without a value; Partial those measured
	// with coverage below 1 (drawn, and counted here).
	Known       int `json:"known"`
	Unavailable int `json:"unavailable"`
	Partial     int `json:"partial"`
}

// The metrics each part of the report reads.
var (
	graphPackageMetrics = []string{"ca", "ce", "instability", "abstractness", "distance", "betweenness_imports"}
	graphFuncMetrics    = []string{"cognitive", "cyclomatic", "cyclomatic_folded", "fan_in", "fan_out", "dynamic_calls", "call_scc_size"}
)

// ReadGraph reads the code-graph report from the graph database at path (read-only).
//
// Errors: indexer.OpenDatabase's (no database, another schema version, not a graph database);
// metrics.ErrNoMetrics (wrapped) when the index was written without metrics; wrapped SQLite
// errors naming path.
func ReadGraph(ctx context.Context, path string, opts GraphOptions) (*GraphReport, error) {
	top := opts.Top
	if top <= 0 {
		top = DefaultGraphTop
	}
	snap, err := indexer.ReadSnapshot(ctx, path)
	if err != nil {
		return nil, err
	}
	vals, err := metrics.Read(ctx, path, metrics.Filter{})
	if err != nil {
		return nil, err
	}
	db, err := indexer.OpenDatabase(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	r := &GraphReport{DBPath: path, Snapshot: snap, Top: top}
	if r.Metrics, err = readDescriptors(ctx, db); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}
	importPath := map[string]string{}
	if err := eachRow(ctx, db, `SELECT id, import_path FROM packages WHERE variant = 'base'`, func(rows *sql.Rows) error {
		var id, ip string
		if err := rows.Scan(&id, &ip); err != nil {
			return err
		}
		importPath[id] = ip
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}
	loadErrors := map[string]int{}
	if err := eachRow(ctx, db, `SELECT package_id, count(*) FROM load_errors WHERE package_id IS NOT NULL GROUP BY package_id`, func(rows *sql.Rows) error {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return err
		}
		loadErrors[id] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}
	type place struct {
		pkg, file string
		line      int
	}
	where := map[string]place{}
	if err := eachRow(ctx, db, `SELECT n.id, coalesce(n.package_id, ''), coalesce(f.rel_path, f.path, ''), coalesce(n.start_line, 0)
		FROM nodes n LEFT JOIN files f ON f.id = n.file_id WHERE n.kind IN ('func', 'method', 'closure')`, func(rows *sql.Rows) error {
		var id string
		var p place
		if err := rows.Scan(&id, &p.pkg, &p.file, &p.line); err != nil {
			return err
		}
		where[id] = p
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reports: %s: %w", path, err)
	}

	pkgs := map[string]*GraphPackage{}
	pkgOf := func(id string) *GraphPackage {
		p, ok := pkgs[id]
		if !ok {
			p = &GraphPackage{ID: id, ImportPath: importPath[id], Values: map[string]metrics.Value{}, LoadErrors: loadErrors[id],
				SCC: GraphSCC{GraphAggregate: GraphAggregate{Metric: "call_scc_size"}}, Dynamic: GraphAggregate{Metric: "dynamic_calls"}}
			pkgs[id] = p
		}
		return p
	}
	funcs := map[string]*GraphFunction{}
	r.Cognitive = GraphDistribution{Metric: "cognitive"}
	r.Cyclomatic = GraphDistribution{Metric: "cyclomatic"}
	for _, v := range vals {
		if v.Variant != "base" {
			continue
		}
		switch v.Scope {
		case metrics.ScopePackage:
			if slices.Contains(graphPackageMetrics, v.Metric) {
				p := pkgOf(v.Subject)
				p.Values[v.Metric] = v
				p.Origin = v.Origin
			}
		case metrics.ScopeFunc:
			if !slices.Contains(graphFuncMetrics, v.Metric) {
				continue
			}
			pl := where[v.Subject]
			f, ok := funcs[v.Subject]
			if !ok {
				f = &GraphFunction{ID: v.Subject, Package: importPath[pl.pkg], Origin: v.Origin, File: pl.file, Line: pl.line,
					Values: map[string]metrics.Value{}}
				funcs[v.Subject] = f
			}
			f.Values[v.Metric] = v
			switch v.Metric {
			case "cognitive":
				r.Cognitive.add(v)
			case "cyclomatic":
				r.Cyclomatic.add(v)
			case "dynamic_calls":
				if pl.pkg != "" {
					pkgOf(pl.pkg).Dynamic.add(v)
				}
			case "call_scc_size":
				if pl.pkg != "" {
					pkgOf(pl.pkg).SCC.add(v)
				}
			}
		}
	}
	for _, p := range pkgs {
		if p.ImportPath == "" {
			p.ImportPath = strings.TrimPrefix(p.ID, "pkg:")
		}
		r.Packages = append(r.Packages, *p)
	}
	slices.SortFunc(r.Packages, func(a, b GraphPackage) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	all := make([]*GraphFunction, 0, len(funcs))
	for _, f := range funcs {
		all = append(all, f)
	}
	slices.SortFunc(all, compareFunctions)
	for _, f := range all[:min(top, len(all))] {
		r.TopFunctions = append(r.TopFunctions, *f)
	}
	return r, nil
}

// compareFunctions ranks by cognitive, then cyclomatic complexity, largest first; a function
// without a value ranks after every function with one (unknown is not small); then by id.
func compareFunctions(a, b *GraphFunction) int {
	for _, m := range []string{"cognitive", "cyclomatic"} {
		va, vb := a.Values[m].Value, b.Values[m].Value
		switch {
		case va == nil && vb != nil:
			return 1
		case va != nil && vb == nil:
			return -1
		case va != nil && vb != nil && *va != *vb:
			return cmp.Compare(*vb, *va)
		}
	}
	return strings.Compare(a.ID, b.ID)
}

func (a *GraphAggregate) add(v metrics.Value) {
	a.Functions++
	a.Method = v.Method
	switch {
	case v.Kind == metrics.Unavailable || v.Value == nil:
		a.Unavailable++
		return
	case v.Kind == metrics.Proxy:
		a.Proxy++
	}
	if v.Coverage < 1 {
		a.Partial++
	}
	a.Sum += *v.Value
}

func (s *GraphSCC) add(v metrics.Value) {
	s.GraphAggregate.add(v)
	if v.Value == nil || *v.Value < 2 {
		return
	}
	size := int(*v.Value)
	s.InCycles++
	s.Largest = max(s.Largest, size)
	s.recip += 1 / float64(size)
	s.Components = int(math.Round(s.recip))
}

func (d *GraphDistribution) add(v metrics.Value) {
	d.Method = v.Method
	if v.Kind == metrics.Unavailable || v.Value == nil {
		d.Unavailable++
		return
	}
	if v.Coverage < 1 {
		d.Partial++
	}
	d.Values = append(d.Values, *v.Value)
	d.Known++
}

func readDescriptors(ctx context.Context, db *sql.DB) ([]GraphMetric, error) {
	stored := map[string]GraphMetric{}
	err := eachRow(ctx, db, `SELECT name, title, scope, kind, method, source FROM metric_descriptors`, func(rows *sql.Rows) error {
		var m GraphMetric
		if err := rows.Scan(&m.Name, &m.Title, &m.Scope, &m.Kind, &m.Method, &m.Source); err != nil {
			return err
		}
		stored[m.Name] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []GraphMetric
	for _, name := range metrics.Names("") { // registry order; a stored metric the registry lacks goes last
		if m, ok := stored[name]; ok {
			out = append(out, m)
			delete(stored, name)
		}
	}
	rest := make([]GraphMetric, 0, len(stored))
	for _, m := range stored {
		rest = append(rest, m)
	}
	slices.SortFunc(rest, func(a, b GraphMetric) int { return strings.Compare(a.Name, b.Name) })
	return append(out, rest...), nil
}

// metric returns the stored descriptor named name (zero when the database has none).
func (r *GraphReport) metric(name string) GraphMetric {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m
		}
	}
	return GraphMetric{Name: name, Title: name}
}

func eachRow(ctx context.Context, db *sql.DB, q string, f func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
