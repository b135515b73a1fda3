package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// MetricsOptions are the parsed flags of `assay metrics`.
type MetricsOptions struct {
	IO       IOStreams
	Graph    graphFlags
	Snapshot string
	Scope    string
	Sort     string
	Top      int
	Format   string
	Variant  string
}

// graphFlags are the flags of commands that read the graph database.
type graphFlags struct {
	out string
	db  string
}

func (f *graphFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.out, "out", "assay-out", "output directory holding graph.db")
	c.Flags().StringVar(&f.db, "db", "", "graph database file (overrides --out)")
}

func (f *graphFlags) path() string {
	if f.db != "" {
		return f.db
	}
	return filepath.Join(f.out, "graph.db")
}

// NewCmdMetrics builds `assay metrics` and `assay metrics explain METRIC`.
func NewCmdMetrics(io IOStreams, runF func(context.Context, *MetricsOptions) error) *cobra.Command {
	opts := &MetricsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "metrics",
		Short: "Show design metrics of an indexed Go codebase, with how each was computed",
		Long: longHelp("0 shown; 1 when the database could not be read; 2 on bad input: no graph database or no metrics in "+
			"it, an unknown scope, sort or snapshot.",
			"Show the metric values 'assay index' computed: a row per subject of --scope (base variants unless "+
				"--variant all), a column per metric. A value is measured, a proxy (~) or "+
				"unavailable (never 0); * marks one whose inputs did not all load, ? an LCOM4 value of a type whose methods "+
				"use no field of their receiver. LCOM4: components of the graph of a type's methods only (Hitz & Montazeri "+
				"1995). Positions are physical. Reference: docs/cli.md; 'assay metrics explain METRIC'.",
			"Metrics: "+metricsByScope()+"."),
		Example: `  assay metrics
  assay metrics --scope func --sort cognitive --top 20
  assay metrics --scope type --sort lcom4 --format json
  assay metrics explain lcom4`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMetrics(c.Context(), opts)
		},
	}
	opts.Graph.register(cmd)
	cmd.Flags().StringVar(&opts.Snapshot, "snapshot", "", "require this snapshot id (or a prefix of it)")
	cmd.Flags().StringVar(&opts.Scope, "scope", "package", "scope: package, type or func")
	cmd.Flags().StringVar(&opts.Sort, "sort", "", "sort rows by this metric, largest first (values marked ? after the others, unavailable last)")
	cmd.Flags().IntVar(&opts.Top, "top", 0, "show only the first N rows of each origin (0: all)")
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table, json or csv")
	cmd.Flags().StringVar(&opts.Variant, "variant", "base", "package variants to show: base, or all (test variants and external test packages too)")
	cmd.AddCommand(newCmdMetricsExplain(io))
	return cmd
}

func newCmdMetricsExplain(io IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "explain METRIC",
		Short: "Print a metric's definition, method, source, coverage, choices and known limits",
		Long: longHelp("0 printed; 2 on bad input: an unknown metric.",
			"Print a metric's definition, its method and version, its source (a paper, a tool), what its coverage is the "+
				"fraction of, the choices made and the known limits. Reference: docs/cli.md.",
			"Metrics: "+metricsByScope()+"."),
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return argCountError(c, "exactly one METRIC (metrics: "+strings.Join(metrics.Names(""), ", ")+")", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			d, ok := metrics.Lookup(args[0])
			if !ok {
				return usageErrorf("unknown metric %q (metrics: %s)", args[0], strings.Join(metrics.Names(""), ", "))
			}
			return writeExplain(io.Out, d)
		},
	}
}

func writeExplain(w io.Writer, d *metrics.Descriptor) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n\n", d.Title, d.Name)
	fmt.Fprintf(&b, "scope:   %s\nkind:    %s\nmethod:  %s\nsource:  %s\n\n", d.Scope, d.Kind, d.Method, d.Source)
	fmt.Fprintf(&b, "Definition\n  %s\n", d.Doc)
	fmt.Fprintf(&b, "\nCoverage\n  The fraction (0..1) of a value's inputs that loaded without errors, 1 when they all did; "+
		"unavailable values have one too.\n  Inputs: %s\n"+
		"  Packages the build context excluded (e.g. cgo-only with CGO_ENABLED=0) were never analysed: they have no values "+
		"and are no value's input; 'assay metrics' and 'assay graph errors' name them with the snapshot's coverage.\n", d.Coverage)
	for _, sec := range []struct {
		title string
		items []string
	}{{"Choices", d.Choices}, {"Known limits", d.Limits}} {
		if len(sec.items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n", sec.title)
		for _, it := range sec.items {
			fmt.Fprintf(&b, "  - %s\n", it)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// originRank orders origins in output: production first, generated apart.
func originRank(o string) int {
	switch o {
	case "production":
		return 0
	case "test":
		return 1
	case "example":
		return 2
	case "generated":
		return 3
	case "synthesized":
		return 4
	}
	return 5
}

// metricsRow is one subject with its values of the scope's metrics.
type metricsRow struct {
	Subject string                   `json:"subject"`
	Origin  string                   `json:"origin"`
	Variant string                   `json:"variant"`
	Values  map[string]metrics.Value `json:"values"`
}

func runMetrics(ctx context.Context, opts *MetricsOptions) error {
	format, err := outputFormat(opts.Format, "table", "json", "csv")
	if err != nil {
		return err
	}
	scope := metrics.Scope(opts.Scope)
	if !slices.Contains(metrics.Scopes(), scope) {
		return usageErrorf("--scope %q is not one of package, type, func", opts.Scope)
	}
	names := metrics.Names(scope)
	if opts.Sort != "" && !slices.Contains(names, opts.Sort) {
		for _, other := range metrics.Scopes() {
			if other != scope && slices.Contains(metrics.Names(other), opts.Sort) {
				return usageErrorf("--sort %q is a %s metric, not a %s one: add --scope %s", opts.Sort, other, scope, other)
			}
		}
		return usageErrorf("--sort %q is not a %s metric (%s)", opts.Sort, scope, strings.Join(names, ", "))
	}
	if opts.Variant != "base" && opts.Variant != "all" {
		return usageErrorf("--variant %q is not base or all", opts.Variant)
	}
	if opts.Top < 0 {
		return usageErrorf("--top %d is negative", opts.Top)
	}
	vals, err := metrics.Read(ctx, opts.Graph.path(), metrics.Filter{SnapshotID: opts.Snapshot, Scope: scope})
	if err != nil {
		return err
	}
	if opts.Variant == "base" {
		vals = slices.DeleteFunc(vals, func(v metrics.Value) bool { return v.Variant != "base" })
	} else if scope == metrics.ScopePackage && !slices.ContainsFunc(vals, func(v metrics.Value) bool { return v.Variant != "base" }) {
		// Say it rather than show the same rows as without the flag.
		fmt.Fprintln(opts.IO.ErrOut, "note: package metrics are computed for base package variants only (coupling is defined on the import graph without test variants): --variant all adds no package rows")
	}
	// What the snapshot never analysed (packages the build context
	// excluded) is no row of any table: say so, or the table reads as the
	// whole module.
	cov, err := snapshotCoverage(ctx, opts.Graph.path())
	if err != nil {
		return err
	}
	rows := pivot(vals)
	sortRows(rows, opts.Sort)
	rows = topPerOrigin(rows, opts.Top)

	switch format {
	case "json":
		if rows == nil {
			rows = []*metricsRow{}
		}
		return writeJSON(opts.IO.Out, map[string]any{"rows": rows, "snapshot_coverage": cov})
	case "csv":
		t := table{header: []string{"metric", "subject", "scope", "value", "kind", "method", "reason", "detail", "coverage", "snapshot_id", "build_context", "origin", "variant"}}
		for _, r := range rows {
			for _, name := range names {
				v, ok := r.Values[name]
				if !ok {
					continue
				}
				val := ""
				if v.Value != nil {
					val = strconv.FormatFloat(*v.Value, 'g', -1, 64)
				}
				t.rows = append(t.rows, []string{v.Metric, v.Subject, string(v.Scope), val, string(v.Kind), v.Method, v.Reason, v.Detail,
					strconv.FormatFloat(v.Coverage, 'g', -1, 64), v.SnapshotID, v.BuildContext, v.Origin, v.Variant})
			}
		}
		return t.writeCSV(opts.IO.Out)
	}
	// A metric's values print the same way in every listing, whichever rows are shown: counts and
	// complexities as integers, ratios and centralities with four decimals (so 1 and 1.0000 never
	// stand for one value in two views).
	integer := map[string]bool{}
	for _, name := range names {
		if d, ok := metrics.Lookup(name); ok {
			integer[name] = d.Integer
		}
	}
	t := table{header: append([]string{"SUBJECT", "ORIGIN"}, upper(names)...)}
	for _, r := range rows {
		cells := []string{r.Subject, r.Origin}
		for _, name := range names {
			cells = append(cells, cell(r.Values[name], integer[name]))
		}
		t.rows = append(t.rows, cells)
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	if len(vals) > 0 {
		fmt.Fprintf(opts.IO.Out, "\nsnapshot %s, %s; ~ marks a proxy, - a metric that does not apply\n", vals[0].SnapshotID, vals[0].BuildContext)
		if len(cov.PackagesExcluded) > 0 {
			fmt.Fprintf(opts.IO.Out, "coverage of the snapshot %s: %d of %d packages; %d excluded by the build context (%s), never analysed, have no rows: %s\n",
				coverageFigure(cov.Coverage, cov.PackagesOK, cov.PackagesMatched), cov.PackagesOK, cov.PackagesMatched,
				len(cov.PackagesExcluded), vals[0].BuildContext, strings.Join(cov.PackagesExcluded, ", "))
		}
		partial := 0
		for _, v := range vals {
			if v.Kind != metrics.Unavailable && v.Value != nil && v.Coverage < 1 {
				partial++
			}
		}
		if partial > 0 {
			fmt.Fprintf(opts.IO.Out, "* marks %d values computed from incomplete inputs (coverage < 1: some packages had load or type errors, recorded in load_errors); --format json or csv gives each coverage\n", partial)
		}
		if n := noState(vals); n > 0 {
			sorted := ""
			if opts.Sort == "lcom4" {
				sorted = "; --sort lcom4 ranks them after the other values"
			}
			fmt.Fprintf(opts.IO.Out, "? marks %d LCOM4 values of types whose methods use no field of their receiver (reason no_state): they count the groups of methods linked by calls, not a lack of cohesion%s\n", n, sorted)
		}
	}
	return nil
}

func upper(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strings.ToUpper(x)
	}
	return out
}

// cell renders a value for the table: unavailable is spelled out, never 0; integer says the
// value's metric counts (metrics.Descriptor.Integer): no decimals, else four.
func cell(v metrics.Value, integer bool) string {
	switch {
	case v.Metric == "":
		return "-"
	case v.Kind == metrics.Unavailable || v.Value == nil:
		return "unavailable"
	}
	s := strconv.FormatFloat(*v.Value, 'f', 4, 64)
	if integer {
		s = strconv.FormatFloat(*v.Value, 'f', 0, 64)
	}
	if v.Kind == metrics.Proxy {
		s = "~" + s
	}
	if v.Coverage < 1 {
		s += "*"
	}
	if v.NoState() {
		s += "?"
	}
	return s
}

// noState counts the LCOM4 values flagged no_state (see metrics.Value.NoState).
func noState(vals []metrics.Value) int {
	n := 0
	for _, v := range vals {
		if v.NoState() {
			n++
		}
	}
	return n
}

func pivot(vals []metrics.Value) []*metricsRow {
	by := map[string]*metricsRow{}
	var rows []*metricsRow
	for _, v := range vals {
		r, ok := by[v.Subject]
		if !ok {
			r = &metricsRow{Subject: v.Subject, Origin: v.Origin, Variant: v.Variant, Values: map[string]metrics.Value{}}
			by[v.Subject] = r
			rows = append(rows, r)
		}
		r.Values[v.Metric] = v
	}
	return rows
}

// sortRows orders by origin, then by the sort metric descending (values
// before LCOM4 values flagged no_state, which say nothing about cohesion,
// and those before unavailable ones), then by subject.
func sortRows(rows []*metricsRow, metric string) {
	// group ranks a row's value of metric: 0 a value, 1 a no_state value,
	// 2 none.
	group := func(r *metricsRow) int {
		switch v := r.Values[metric]; {
		case v.Value == nil:
			return 2
		case v.NoState():
			return 1
		}
		return 0
	}
	slices.SortStableFunc(rows, func(a, b *metricsRow) int {
		if d := originRank(a.Origin) - originRank(b.Origin); d != 0 {
			return d
		}
		if metric != "" {
			if d := group(a) - group(b); d != 0 {
				return d
			}
			va, vb := a.Values[metric].Value, b.Values[metric].Value
			switch {
			case va != nil && vb != nil && *va != *vb:
				if *va > *vb {
					return -1
				}
				return 1
			}
		}
		return strings.Compare(a.Subject, b.Subject)
	})
}

func topPerOrigin(rows []*metricsRow, n int) []*metricsRow {
	if n == 0 {
		return rows
	}
	count := map[string]int{}
	var out []*metricsRow
	for _, r := range rows {
		if count[r.Origin] < n {
			count[r.Origin]++
			out = append(out, r)
		}
	}
	return out
}

// snapshotCoverageJSON is the coverage of the graph snapshot a metrics
// table is read from (see indexer.LoadErrorReport).
type snapshotCoverageJSON struct {
	// Snapshot is the snapshot's id (SHA-256 hex, 64 chars).
	Snapshot string `json:"snapshot"`
	// PackagesOK of PackagesMatched loaded without errors; Coverage is
	// their ratio (0..1).
	PackagesOK      int     `json:"packages_ok"`
	PackagesMatched int     `json:"packages_matched"`
	Coverage        float64 `json:"coverage"`
	// PackagesExcluded are the import paths, sorted, of the packages the
	// build context excluded: never analysed, so no metric has a row for
	// them. Never nil.
	PackagesExcluded []string `json:"packages_excluded"`
}

// snapshotCoverage reads the coverage of the graph database at path.
func snapshotCoverage(ctx context.Context, path string) (snapshotCoverageJSON, error) {
	db, err := indexer.OpenDatabase(ctx, path)
	if err != nil {
		return snapshotCoverageJSON{}, err
	}
	defer db.Close()
	rep, err := indexer.LoadErrors(ctx, db, "")
	if err != nil {
		return snapshotCoverageJSON{}, err
	}
	return snapshotCoverageJSON{Snapshot: rep.Snapshot, PackagesOK: rep.PackagesOK, PackagesMatched: rep.PackagesMatched,
		Coverage: rep.Coverage, PackagesExcluded: rep.PackagesExcluded}, nil
}
