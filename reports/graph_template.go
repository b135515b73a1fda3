package reports

// graphTemplate is the code-graph report page (html/template escapes every value).
const graphTemplate = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>assay code-graph report — {{.R.Snapshot.ID}}</title>
<style>{{.CSS}}</style>
</head>
<body>
{{define "cell"}}<td class="num" title="{{.Title}}">{{.Text}}{{if and .Kind (ne .Kind .Text)}}<span class="k {{.Kind}}">{{.Kind}}</span>{{end}}{{range .Refs}}<sup class="ref">[{{.}}]</sup>{{end}}{{range .Notes}}<br><span class="muted note">{{.}}</span>{{end}}</td>{{end}}
{{define "notes"}}{{if .List}}<ol class="notes">{{range .List}}<li>{{.}}</li>{{end}}</ol>{{end}}{{end}}
<header>
<h1>assay code-graph report</h1>
{{with .R.Snapshot}}
<dl class="facts">
<dt>graph database</dt><dd><code>{{$.R.DBPath}}</code></dd>
<dt>database SHA-256</dt><dd><code class="hash">{{.DBSHA256}}</code></dd>
<dt>snapshot</dt><dd><code class="hash">{{.ID}}</code></dd>
<dt>modules</dt><dd>{{range $i, $m := .ModulePaths}}{{if $i}}, {{end}}<code>{{$m}}</code>{{else}}none recorded{{end}}</dd>
<dt>source revision</dt><dd><code>{{revision .VCSRevision .VCSDirty}}</code></dd>
<dt>Go</dt><dd>{{.GoVersion}}</dd>
<dt>build context</dt><dd>GOOS={{.GOOS}} GOARCH={{.GOARCH}} CGO_ENABLED={{.CGOEnabled}} tags={{join .Tags ","}}{{if .Tests}}; tests included{{end}}</dd>
<dt>indexed by</dt><dd>{{if .ToolVersion}}{{.ToolVersion}}{{else}}tool version not recorded{{end}}</dd>
<dt>load coverage</dt><dd>{{printf "%.3f" .Coverage}} — {{.Counts.Packages}} packages, {{.Counts.Funcs}} functions, {{.Counts.Methods}} methods; {{.Counts.LoadErrors}} load errors in {{.Counts.PackagesWithErrors}} packages</dd>
</dl>
{{end}}
<p class="muted">Each value shows its kind as the index stored it: <span class="k measured">measured</span>,
<span class="k proxy">proxy</span> (an approximation) or <span class="k unavailable">unavailable</span> (no value, with the
reason; never 0). “coverage” below 1 means some of the value's inputs did not load: the value is computed from what did.
A package sum of function values is prefixed “≥” and marked <span class="k partial">partial</span> when any function's value
is unavailable, a proxy or partial. Hover a value for its method and detail; the metrics table below gives each source.</p>
</header>

<h2 id="main-sequence">Main sequence</h2>
<figure>{{.MainSequence}}
<figcaption>Abstractness against instability per package (R. C. Martin, “OO Design Quality Metrics: An Analysis of
Dependencies”, 1994). Packages near the dashed line A + I = 1 balance the two; D = |A + I − 1| colours and shapes each point.
{{if .NotDrawn}}{{.NotDrawn}} packages without an instability or abstractness value are not drawn.{{end}}
{{if .Approximate}}{{.Approximate}} points are hollow: a proxy value or coverage below 1.{{end}}</figcaption>
</figure>

<h2 id="packages">Packages</h2>
<div class="scroll"><table>
<thead><tr><th>package</th>{{range .PackageMetrics}}<th title="{{.Title}}; {{.Source}}">{{.Name}}<br><code class="muted">{{.Method}}</code></th>{{end}}<th title="strongly connected components of the static call graph with two or more functions (Tarjan 1972), from call_scc_size">call-graph SCCs</th><th title="call sites through an interface method or a func value, from dynamic_calls">dynamic calls</th><th>load errors</th></tr></thead>
<tbody>
{{range .Packages}}<tr><td><code>{{.ImportPath}}</code>{{if ne .Origin "production"}} <span class="muted">({{.Origin}})</span>{{end}}</td>{{range .Cells}}{{template "cell" .}}{{end}}{{template "cell" .SCC}}{{template "cell" .Dynamic}}<td class="num">{{.LoadErrors}}</td></tr>
{{else}}<tr><td colspan="10">No package values are stored.</td></tr>{{end}}
</tbody>
</table></div>
{{template "notes" .PackageNotes}}

<h2 id="complexity">Complexity distributions</h2>
<div class="charts">
<figure>{{.Cognitive}}<figcaption>Cognitive complexity (G. Ann Campbell, SonarSource, 2018), method <code>{{.CognitiveN.Method}}</code>:
{{.CognitiveN.Known}} functions with a value{{if .CognitiveN.Unavailable}}, {{.CognitiveN.Unavailable}} unavailable (not drawn){{end}}{{if .CognitiveN.Partial}}, {{.CognitiveN.Partial}} drawn with coverage &lt; 1{{end}}.</figcaption></figure>
<figure>{{.Cyclomatic}}<figcaption>Cyclomatic complexity (T. J. McCabe, 1976), method <code>{{.CyclomaticN.Method}}</code>:
{{.CyclomaticN.Known}} functions with a value{{if .CyclomaticN.Unavailable}}, {{.CyclomaticN.Unavailable}} unavailable (not drawn){{end}}{{if .CyclomaticN.Partial}}, {{.CyclomaticN.Partial}} drawn with coverage &lt; 1{{end}}.</figcaption></figure>
</div>

<h2 id="functions">Top {{.R.Top}} functions by cognitive complexity</h2>
<p class="muted">Functions, methods and closures of base package variants; ties broken by cyclomatic complexity, then id. A function without a value ranks after every value: unknown is not small.</p>
<div class="scroll"><table>
<thead><tr><th>#</th><th>function</th><th>position</th>{{range .FuncMetrics}}<th title="{{.Title}}; {{.Source}}">{{.Name}}<br><code class="muted">{{.Method}}</code></th>{{end}}</tr></thead>
<tbody>
{{range $i, $f := .Functions}}<tr><td class="num">{{inc $i}}</td><td><code>{{$f.ID}}</code></td><td><code>{{$f.Where}}</code></td>{{range $f.Cells}}{{template "cell" .}}{{end}}</tr>
{{else}}<tr><td colspan="10">No function values are stored.</td></tr>{{end}}
</tbody>
</table></div>
{{template "notes" .FunctionNotes}}

<h2 id="metrics">Metrics</h2>
<table>
<thead><tr><th>metric</th><th>scope</th><th>kind</th><th>method</th><th>source</th></tr></thead>
<tbody>
{{range .R.Metrics}}<tr><td>{{.Title}} (<code>{{.Name}}</code>)</td><td>{{.Scope}}</td><td>{{.Kind}}</td><td><code>{{.Method}}</code></td><td>{{.Source}}</td></tr>
{{end}}</tbody>
</table>
<p class="muted">Definitions, choices and known limits: <code>assay metrics explain METRIC</code>.</p>
</body>
</html>
`
