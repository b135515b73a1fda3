package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/metrics"
	"github.com/assay-audit/assay/reports/charts"
)

// cellView is one metric value as the graph report prints it: the number (or "unavailable"), the
// kind exactly as stored, and what qualifies it (coverage below 1, a reason), never hidden.
type cellView struct {
	Text  string
	Kind  string   // "measured", "proxy", "unavailable", "" when no value is stored
	Notes []string // "coverage 0.750", short qualifiers printed beside the value
	Refs  []int    // footnote numbers: the value's reason, printed once under the table
	Title string   // method and detail, for the tooltip
}

// footnotes numbers the distinct reasons of one table from 1, in first-use order.
type footnotes struct {
	List  []string
	index map[string]int
}

func (f *footnotes) ref(reason string) int {
	if f.index == nil {
		f.index = map[string]int{}
	}
	if n, ok := f.index[reason]; ok {
		return n
	}
	f.List = append(f.List, reason)
	f.index[reason] = len(f.List)
	return len(f.List)
}

func valueCell(v metrics.Value, ok bool, notes *footnotes) cellView {
	if !ok {
		return cellView{Text: "-", Title: "no value stored for this subject"}
	}
	c := cellView{Kind: string(v.Kind), Title: "method " + v.Method}
	if v.Detail != "" {
		c.Title += "; " + v.Detail
	}
	integer := false
	if d, found := metrics.Lookup(v.Metric); found {
		integer = d.Integer
	}
	if v.Kind == metrics.Unavailable || v.Value == nil {
		c.Text = "unavailable"
	} else {
		c.Text = formatFloat(*v.Value, integer)
	}
	if v.Coverage < 1 {
		c.Notes = append(c.Notes, "coverage "+strconv.FormatFloat(v.Coverage, 'f', 3, 64))
	}
	if v.Reason != "" {
		c.Refs = append(c.Refs, notes.ref(v.Reason))
	}
	return c
}

// aggregateCell prints a sum over a package's function values: exact only when every value was
// measured with full coverage, a lower bound ("≥") otherwise, "unknown" when none was known.
func aggregateCell(a GraphAggregate, text string) cellView {
	c := cellView{Text: text, Kind: "measured", Title: fmt.Sprintf("from %d %s values (method %s)", a.Functions, a.Metric, a.Method)}
	switch {
	case a.Functions == 0:
		return cellView{Text: "-", Title: "the package has no function values"}
	case a.Unavailable == a.Functions:
		c.Text, c.Kind = "unknown", "unavailable"
	case !a.Exact():
		c.Text = "≥ " + text
		c.Kind = "partial"
		if a.Proxy > 0 {
			c.Kind = "proxy"
		}
	}
	if a.Unavailable > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d of %d functions unavailable", a.Unavailable, a.Functions))
	}
	if a.Partial > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%d with coverage < 1", a.Partial))
	}
	return c
}

type graphPackageView struct {
	ImportPath, Origin string
	LoadErrors         int
	Cells              []cellView
	SCC, Dynamic       cellView
}

type graphFunctionView struct {
	ID, Package, Origin, Where string
	Cells                      []cellView
}

type graphView struct {
	R                       *GraphReport
	PackageMetrics          []GraphMetric
	FuncMetrics             []GraphMetric
	Packages                []graphPackageView
	PackageNotes            footnotes
	FunctionNotes           footnotes
	Functions               []graphFunctionView
	MainSequence            template.HTML
	Cognitive, Cyclomatic   template.HTML
	NotDrawn                int
	Approximate             int
	CognitiveN, CyclomaticN GraphDistribution
	CSS                     template.CSS
}

func newGraphView(r *GraphReport) *graphView {
	v := &graphView{R: r, CSS: template.CSS(pageCSS), CognitiveN: r.Cognitive, CyclomaticN: r.Cyclomatic}
	for _, n := range graphPackageMetrics {
		v.PackageMetrics = append(v.PackageMetrics, r.metric(n))
	}
	for _, n := range graphFuncMetrics {
		v.FuncMetrics = append(v.FuncMetrics, r.metric(n))
	}
	var points []charts.PackagePoint
	for _, p := range r.Packages {
		pv := graphPackageView{ImportPath: p.ImportPath, Origin: p.Origin, LoadErrors: p.LoadErrors}
		for _, n := range graphPackageMetrics {
			val, ok := p.Values[n]
			pv.Cells = append(pv.Cells, valueCell(val, ok, &v.PackageNotes))
		}
		pv.SCC = aggregateCell(p.SCC.GraphAggregate, strconv.Itoa(p.SCC.Components))
		if p.SCC.Components > 0 {
			pv.SCC.Notes = append(pv.SCC.Notes, fmt.Sprintf("%d functions, largest %d", p.SCC.InCycles, p.SCC.Largest))
		}
		pv.Dynamic = aggregateCell(p.Dynamic, strconv.FormatFloat(p.Dynamic.Sum, 'f', 0, 64))
		v.Packages = append(v.Packages, pv)
		pt := charts.PackagePoint{Package: p.ImportPath}
		i, okI := p.Values["instability"]
		a, okA := p.Values["abstractness"]
		if okI && okA && i.Value != nil && a.Value != nil {
			pt.Known = true
			pt.Instability, pt.Abstractness = *i.Value, *a.Value
			pt.Approximate = i.Kind == metrics.Proxy || a.Kind == metrics.Proxy || i.Coverage < 1 || a.Coverage < 1
			if pt.Approximate {
				v.Approximate++
			}
		} else {
			v.NotDrawn++
		}
		points = append(points, pt)
	}
	for _, f := range r.TopFunctions {
		fv := graphFunctionView{ID: f.ID, Package: f.Package, Origin: f.Origin, Where: f.File}
		if f.Line > 0 {
			fv.Where += ":" + strconv.Itoa(f.Line)
		}
		for _, n := range graphFuncMetrics {
			val, ok := f.Values[n]
			fv.Cells = append(fv.Cells, valueCell(val, ok, &v.FunctionNotes))
		}
		v.Functions = append(v.Functions, fv)
	}
	svg, err := charts.MainSequence(points)
	v.MainSequence = chartHTML(svg, err, "No package has instability and abstractness values.")
	svg, err = charts.Cognitive(r.Cognitive.Values, r.Cognitive.Unavailable)
	v.Cognitive = chartHTML(svg, err, "No cognitive complexity values.")
	svg, err = charts.Cyclomatic(r.Cyclomatic.Values, r.Cyclomatic.Unavailable)
	v.Cyclomatic = chartHTML(svg, err, "No cyclomatic complexity values.")
	return v
}

// GraphHTML writes r as one self-contained HTML page: inline CSS and SVG, no script, no request.
// Every value shows its stored kind; coverage below 1 and reasons are printed beside it.
func GraphHTML(w io.Writer, r *GraphReport) error {
	if err := graphPage.Execute(w, newGraphView(r)); err != nil {
		return fmt.Errorf("reports: graph html: %w", err)
	}
	return nil
}

// GraphJSON writes r as indented JSON (snake_case keys; a value without a number has "value":
// null and "kind": "unavailable", never 0).
func GraphJSON(w io.Writer, r *GraphReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("reports: graph json: %w", err)
	}
	return nil
}

// GraphMarkdown writes r as GitHub-flavoured Markdown: the same tables as the HTML, without charts.
func GraphMarkdown(w io.Writer, r *GraphReport) error {
	v := newGraphView(r)
	var b strings.Builder
	s := r.Snapshot
	fmt.Fprintf(&b, "# assay code-graph report\n\n")
	fmt.Fprintf(&b, "- graph database: `%s` (SHA-256 `%s`)\n- snapshot: `%s`\n- modules: %s\n", r.DBPath, s.DBSHA256, s.ID, mdJoin(s.ModulePaths))
	fmt.Fprintf(&b, "- source revision: %s\n- Go: %s; build context GOOS=%s GOARCH=%s CGO_ENABLED=%s tags=%s\n", revision(s.VCSRevision, s.VCSDirty), s.GoVersion, s.GOOS, s.GOARCH, s.CGOEnabled, strings.Join(s.Tags, ","))
	fmt.Fprintf(&b, "- load coverage: %.3f (%d load errors in %d packages)\n\n", s.Coverage, s.Counts.LoadErrors, s.Counts.PackagesWithErrors)
	b.WriteString(provenanceNote + "\n\n## Packages\n\n| package |")
	for _, m := range v.PackageMetrics {
		fmt.Fprintf(&b, " %s (`%s`) |", m.Name, m.Method)
	}
	b.WriteString(" call-graph SCCs | dynamic calls | load errors |\n|---|")
	b.WriteString(strings.Repeat("---|", len(v.PackageMetrics)+3) + "\n")
	for _, p := range v.Packages {
		fmt.Fprintf(&b, "| `%s` |", p.ImportPath)
		for _, c := range p.Cells {
			fmt.Fprintf(&b, " %s |", mdCell(c))
		}
		fmt.Fprintf(&b, " %s | %s | %d |\n", mdCell(p.SCC), mdCell(p.Dynamic), p.LoadErrors)
	}
	mdNotes(&b, v.PackageNotes)
	fmt.Fprintf(&b, "\n## Top %d functions by cognitive complexity\n\n| function | position |", r.Top)
	for _, m := range v.FuncMetrics {
		fmt.Fprintf(&b, " %s |", m.Name)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(v.FuncMetrics)) + "\n")
	for _, f := range v.Functions {
		fmt.Fprintf(&b, "| `%s` | %s |", f.ID, f.Where)
		for _, c := range f.Cells {
			fmt.Fprintf(&b, " %s |", mdCell(c))
		}
		b.WriteString("\n")
	}
	mdNotes(&b, v.FunctionNotes)
	for _, d := range []GraphDistribution{r.Cognitive, r.Cyclomatic} {
		fmt.Fprintf(&b, "\n%s: %d functions with a value, %d unavailable, %d with coverage < 1.\n", d.Metric, d.Known, d.Unavailable, d.Partial)
	}
	b.WriteString("\n## Metrics\n\n| metric | scope | kind | method | source |\n|---|---|---|---|---|\n")
	for _, m := range r.Metrics {
		fmt.Fprintf(&b, "| %s (%s) | %s | %s | `%s` | %s |\n", m.Title, m.Name, m.Scope, m.Kind, m.Method, mdEscape(m.Source))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

const provenanceNote = "Each value shows its kind as the index stored it: **measured**, **proxy** (an approximation) or " +
	"**unavailable** (no value, with the reason; never 0). `coverage` below 1 means some of the value's inputs did not load: " +
	"it is computed from what did. Package sums of function values are prefixed `≥` when any function's value is unavailable, " +
	"a proxy, or partial."

func mdNotes(b *strings.Builder, f footnotes) {
	if len(f.List) > 0 {
		b.WriteString("\n")
	}
	for i, n := range f.List {
		fmt.Fprintf(b, "[%d] %s  \n", i+1, mdEscape(n))
	}
}

func mdCell(c cellView) string {
	s := c.Text
	if c.Kind != "" && c.Kind != c.Text {
		s += " _" + c.Kind + "_"
	}
	for _, r := range c.Refs {
		s += fmt.Sprintf(" [%d]", r)
	}
	if len(c.Notes) > 0 {
		s += " (" + strings.Join(c.Notes, "; ") + ")"
	}
	return mdEscape(s)
}

func mdEscape(s string) string { return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s) }

func mdJoin(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return "`" + strings.Join(xs, "`, `") + "`"
}

func revision(rev string, dirty bool) string {
	switch {
	case rev == "":
		return "not recorded (not a git checkout)"
	case dirty:
		return rev + " (with uncommitted changes)"
	}
	return rev
}

var graphPage = template.Must(template.New("graph").Funcs(template.FuncMap{
	"revision": revision,
	"join":     strings.Join,
	"inc":      func(i int) int { return i + 1 },
}).Parse(graphTemplate))
