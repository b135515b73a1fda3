package reports

// evidenceTemplate is the evidence-store report page (html/template escapes every value).
const evidenceTemplate = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>assay report — {{.Selection}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<header>
<h1>assay report</h1>
<dl class="facts">
<dt>selection</dt><dd>{{.Selection}}</dd>
{{if .StoreFindings}}<dt>evidence store</dt><dd><strong class="status rejected">does not verify</strong>: whatever the runs below say, the store they were read from was altered<ul>{{range .StoreFindings}}<li>{{.}}</li>{{end}}</ul></dd>{{end}}
<dt>evidence</dt><dd>{{if .Verified}}every run's hash chain, terminal hash, envelope, artifacts and bindings recomputed when this report was built{{else}}<strong class="status rejected">not verified</strong> (--no-verify): the verdicts are as recorded; assay verify recomputes them{{end}}</dd>
<dt>evidence store</dt><dd><code>{{.StorePath}}</code></dd>
<dt>generated</dt><dd>{{utcv .GeneratedAt}}</dd>
<dt>cases</dt><dd>{{.Totals.Cases}}{{range $k, $n := .Totals.ByVerdict}} · <span class="status {{$k}}">{{$k}}</span> {{$n}}{{end}}</dd>
<dt>tokens</dt><dd>{{if .AnyUsage}}{{range $i, $s := .Totals.Tokens}}{{if $i}} · {{end}}{{$s.Source}}: {{srcTotal $s}}{{end}}{{else}}no usage recorded{{end}}</dd>
<dt>wall time</dt><dd>{{printf "%.1f" .Totals.WallSeconds}} s summed over cases{{if .Totals.UnknownWall}} ({{.Totals.UnknownWall}} cases without one: not finalized){{end}}</dd>
</dl>
{{if .Reference}}<div class="banner" role="note"><strong>Reference results.</strong> Runs marked reference used the embedded
reference provider (<code>assay-reference-1</code>), a deterministic server that is not a language model: it writes the
task file's reference solution back. They show that
assay's pipeline and checks work end to end; they say nothing about any model's ability.</div>{{end}}
</header>

<nav class="screen-only"><p>{{if .GroupBy}}<a href="#groups">cases by {{.GroupBy}}</a> · {{end}}{{range .Invocations}}<a href="#inv-{{.ID}}">invocation {{if .ID}}{{.ID}}{{else}}(not recorded){{end}}</a> · {{end}}<a href="#charts">charts</a></p></nav>

<h2 id="charts">Charts</h2>
{{if lt .Charted .Cases}}<p class="muted">The charts draw the first {{.Charted}} of {{.Cases}} cases, failures first; every case is in the tables below.</p>{{end}}
<div class="charts">
<figure>{{.TimeChart}}<figcaption>Wall time per case by phase, from the event log's timestamps (team: team_started to team_completed; checks: to the last check; finalize: to run_finalized). A phase the log does not give is left out, not drawn as 0.</figcaption></figure>
<figure>{{.TokenChart}}<figcaption>Total tokens per member from each usage source: store (what the runtime counted), wire (a fresh parse of the responses it received), gateway (what the gateway relayed). An unknown reading is labelled, never drawn as 0.</figcaption></figure>
<figure>{{.MatrixChart}}<figcaption>Checks per case. Simulated and not-enforced checks are drawn with skipped; unknown ones with not recorded.</figcaption></figure>
</div>

{{if .GroupBy}}<section class="groups" id="groups">
<h2>Cases by {{.GroupBy}}</h2>
<div class="scroll"><table class="group-totals"><thead><tr><th>{{.GroupBy}}</th><th>cases</th><th>accepted</th><th>not accepted</th><th>by verdict</th></tr></thead><tbody>
{{range $i, $g := .GroupViews}}<tr class="group-total" data-group="{{.Key}}"><td><a href="#group-{{$i}}">{{.Key}}</a></td><td class="num">{{.Totals.Cases}}</td><td class="num">{{.Accepted}}</td><td class="num">{{.NotAccepted}}</td><td>{{range $k, $n := .Totals.ByVerdict}}<span class="status {{$k}}">{{$k}}</span> {{$n}} {{end}}</td></tr>
{{end}}</tbody></table></div>
{{range $i, $g := .GroupViews}}<h3 id="group-{{$i}}">{{$.GroupBy}} {{.Key}} <span class="muted">— cases: {{.Totals.Cases}}, accepted: {{.Accepted}}, not accepted: {{.NotAccepted}}</span></h3>
<div class="scroll"><table class="cases group" data-group="{{.Key}}">
{{template "casehead"}}
<tbody>
{{range .Cases}}<tr class="group-row" data-run="{{.RunID}}">{{template "casecells" .}}</tr>
{{end}}</tbody>
</table></div>
{{end}}</section>{{end}}

{{range .Invocations}}{{$inv := .}}
<section class="invocation" id="inv-{{.ID}}">
<h2>Invocation {{if .ID}}<code>{{.ID}}</code>{{else}}not recorded (runs before schema v6){{end}}</h2>
{{if .Reference}}<p class="banner">Reference results: this invocation used the embedded reference provider, not a language model.</p>{{end}}
<dl class="facts">
<dt>started</dt><dd>{{utcv .StartedAt}}</dd>
<dt>ended</dt><dd>{{if .EndedAt}}{{utc .EndedAt}}{{else}}not ended: a run is neither finalized nor sealed{{end}}</dd>
<dt>wall time</dt><dd>{{seconds .WallSeconds "unknown (not ended)"}}</dd>
<dt>provider</dt><dd>{{range .Providers}}<div>{{.Name}} <code>{{.BaseURL}}</code> model <code>{{.Model}}</code>{{if .Reference}} <span class="k">reference</span>{{end}}</div>{{else}}not recorded{{end}}</dd>
<dt>environment</dt><dd>{{range .Environments}}<div><code class="hash">{{.Fingerprint}}</code> ({{.Runs}} runs){{if .PreimageUnreadable}}: <span class="status failed">its recorded preimage (environment.json) cannot be read</span> ({{.PreimageUnreadable}}): whether the fingerprint re-derives, and what it covers, is unknown{{else if .Recorded}}: assay {{nr .AssayVersion}}, commit <code>{{nr .Commit}}</code>{{if .CommitTime}} ({{.CommitTime}}){{end}}, modified {{boolText .Modified "yes" "no"}}, {{nr .GoVersion}} {{.GOOS}}/{{.GOARCH}}; fingerprint v{{.FingerprintVersion}}, re-derives: {{boolText .Matches "yes" "NO: the preimage does not hash to the fingerprint"}}{{else}}: preimage not recorded (assay version, commit and Go version unknown){{end}}</div>{{else}}not recorded{{end}}</dd>
<dt>policy digest</dt><dd>{{range .PolicyDigests}}<div><code class="hash">{{if .}}{{.}}{{else}}no policy{{end}}</code></div>{{else}}not recorded{{end}}</dd>
<dt>modes</dt><dd>{{join .Modes ", "}}</dd>
<dt>cases</dt><dd>{{.Totals.Cases}}{{range $k, $n := .Totals.ByVerdict}} · <span class="status {{$k}}">{{$k}}</span> {{$n}}{{end}}</dd>
<dt>tokens</dt><dd>{{if anyUsage .Cases}}{{range $i, $s := .Totals.Tokens}}{{if $i}} · {{end}}{{$s.Source}}: {{srcTotal $s}}{{end}}{{else}}no usage recorded{{end}}</dd>
<dt>wall time of cases</dt><dd>{{printf "%.1f" .Totals.WallSeconds}} s{{if .Totals.UnknownWall}} ({{.Totals.UnknownWall}} cases without one){{end}}</dd>
</dl>
<div class="scroll"><table class="cases">
{{template "casehead"}}
<tbody>
{{range .Cases}}<tr class="case-row" data-run="{{.RunID}}">{{template "casecells" .}}</tr>
{{end}}</tbody>
</table></div>

{{range .Cases}}{{$c := .}}
<section class="case" id="{{anchor .RunID}}" data-run="{{.RunID}}">
<h3>{{.Name}} <span class="status {{badge .}}">{{badge .}}</span>{{if .Reference}} <span class="k">reference</span>{{end}}</h3>
{{if .Reasons}}<ul class="reasons">{{range .Reasons}}<li>{{.}}</li>{{end}}</ul>{{end}}
<dl class="facts">
<dt>run</dt><dd><code>{{.RunID}}</code> ({{.Kind}}, {{.Mode}}, tenant {{nr .Tenant}})</dd>
<dt>formation · profile · language</dt><dd>{{.Formation}} · {{.Profile}} · {{.Language}}</dd>
<dt>provider · model</dt><dd>{{.Provider}} <code>{{.BaseURL}}</code> · <code>{{.Model}}</code></dd>
<dt>task · repeat</dt><dd class="task-axes">{{nr .Task}} · {{if .Repeat}}repeat #{{.Repeat}}{{else}}not a repeat{{end}}</dd>
{{with .TaskFile}}{{if .Status}}<dt id="{{anchor $c.RunID}}-task">task file</dt><dd class="task-file" data-status="{{.Status}}">{{if .Name}}{{.Name}}{{else}}not recorded{{end}}{{if .SHA256}}, SHA-256 <code class="hash">{{.SHA256}}</code>{{end}}: <span class="status {{if .Verified}}passed{{else if eq .Status "mismatch" "missing" "manifest_mismatch" "unreadable" "unverified"}}failed{{else}}unknown{{end}}">{{taskState .Status}}</span> — {{.Detail}}{{if .CheckFindings}}<ul>{{range .CheckFindings}}<li>{{.}}</li>{{end}}</ul>{{end}}{{if .ReferenceSolution}}<div>reference solution: {{if deref .ReferenceSolution}}<strong>used</strong> — the embedded reference provider answered with the task file's reference solution (not a model's work){{else}}not used{{end}}</div>{{end}}</dd>{{end}}{{end}}
<dt>created · finalized</dt><dd>{{utcv .CreatedAt}} · {{utc .FinalizedAt}} ({{seconds .WallSeconds "not finalized"}})</dd>
<dt>status</dt><dd>{{.Status}}{{if .Interrupted}} (interrupted){{end}}, {{.EventCount}} events</dd>
<dt>evidence</dt><dd>{{if .VerificationFailed}}<strong class="status rejected">does not verify ({{.Verification}})</strong>: the recorded verdict is not evidence of anything. {{.VerificationDetail}}{{else if .Verification}}verifies ({{.Verification}}): recomputed from the store when this report was built{{else}}not verified{{end}}</dd>
<dt>terminal hash</dt><dd><code class="hash">{{nr .TerminalHash}}</code>{{if .TerminalVersion}} (v{{.TerminalVersion}}){{end}}</dd>
<dt>manifest digest</dt><dd><code class="hash">{{nr .ManifestDigest}}</code></dd>
<dt>envelope digest</dt><dd><code class="hash">{{nr .EnvelopeDigest}}</code></dd>
<dt>policy digest</dt><dd><code class="hash">{{if .PolicyDigest}}{{.PolicyDigest}}{{else}}no policy{{end}}</code></dd>
<dt>environment</dt><dd><code class="hash">{{nr .EnvironmentFingerprint}}</code></dd>
</dl>
<h4>Checks</h4>
<table class="checks"><thead><tr><th>check</th><th>required</th><th>status</th><th>detail</th></tr></thead><tbody>
{{range .Checks}}<tr class="check" data-check="{{.Name}}"><td><code>{{.Name}}</code></td><td>{{if .Required}}required{{else}}advisory{{end}}</td><td><span class="status {{.Status}}">{{.Status}}</span></td><td>{{.Detail}}{{if .Evidence}}<details><summary>evidence</summary><pre>{{.Evidence}}</pre></details>{{end}}</td></tr>
{{else}}<tr><td colspan="4">No check recorded.</td></tr>{{end}}</tbody></table>
<h4>Members and usage</h4>
<table class="members"><thead><tr><th>member</th><th>session id</th><th>source</th><th>state</th><th>requests</th><th>prompt</th><th>completion</th><th>total</th><th>conservation</th></tr></thead><tbody>
{{range .Members}}{{$m := .}}{{range $i, $u := .Usage}}<tr>{{if not $i}}<td rowspan="{{len $m.Usage}}"><code>{{$m.ID}}</code></td><td rowspan="{{len $m.Usage}}"><code>{{nr $m.SessionID}}</code></td>{{end}}<td>{{$u.Source}}</td><td>{{$u.State}}</td><td class="num">{{tokens $u.Requests}}</td><td class="num">{{tokens $u.PromptTokens}}</td><td class="num">{{tokens $u.CompletionTokens}}</td><td class="num">{{tokens $u.TotalTokens}}</td>{{if not $i}}<td rowspan="{{len $m.Usage}}"><span class="status {{$m.Conservation}}">{{nr $m.Conservation}}</span> {{$m.ConservationDetail}}</td>{{end}}</tr>
{{else}}<tr><td><code>{{$m.ID}}</code></td><td><code>{{nr $m.SessionID}}</code></td><td colspan="6">no usage recorded</td><td>{{nr $m.Conservation}}</td></tr>{{end}}
{{else}}<tr><td colspan="9">No member recorded.</td></tr>{{end}}</tbody></table>
<h4>Timings</h4>
<table class="phases"><thead><tr><th>phase</th><th>seconds</th><th>how</th></tr></thead><tbody>
{{range .Phases}}<tr><td>{{.Name}}</td><td class="num">{{seconds .Seconds "not recorded"}}</td><td class="muted">{{.Note}}</td></tr>{{end}}</tbody></table>
{{if .Approvals}}<h4>Approvals</h4>
<table><thead><tr><th>approver</th><th>tool</th><th>call</th><th>payload SHA-256</th><th>at</th></tr></thead><tbody>
{{range .Approvals}}<tr><td>{{nr .Approver}}</td><td>{{.Tool}}</td><td><code>{{.CallID}}</code></td><td><code class="hash">{{.PayloadSHA256}}</code></td><td>{{utc .At}}</td></tr>{{end}}</tbody></table>{{end}}
{{if .Reconciliations}}<h4>Reconciliations</h4>
<table><thead><tr><th>idempotency key</th><th>tool</th><th>outcome</th><th>decided by</th><th>recorded in</th><th>note</th></tr></thead><tbody>
{{range .Reconciliations}}<tr><td><code>{{.IdempotencyKey}}</code></td><td>{{.Tool}}</td><td><span class="status {{.Outcome}}">{{.Outcome}}</span></td><td>{{if .Source}}{{.Source}}{{else}}unreconciled{{end}}</td><td><code>{{.RecordedInRunID}}</code></td><td>{{.Note}}</td></tr>{{end}}</tbody></table>{{end}}
{{with .Lineage}}{{if or .ResumesRunID .ResumedByRunID .CorrectsRunID .CorrectedBy .ReplayedBy}}<h4>Lineage</h4><ul>
{{if .ResumesRunID}}<li>resumes <a href="#{{anchor .ResumesRunID}}"><code>{{.ResumesRunID}}</code></a>{{if .CheckpointSeq}} from checkpoint event {{.CheckpointSeq}}{{end}}</li>{{end}}
{{if .ResumedByRunID}}<li>resumed by <a href="#{{anchor .ResumedByRunID}}"><code>{{.ResumedByRunID}}</code></a></li>{{end}}
{{if .CorrectsRunID}}<li>linked to (corrects) <a href="#{{anchor .CorrectsRunID}}"><code>{{.CorrectsRunID}}</code></a></li>{{end}}
{{range .CorrectedBy}}<li>corrected by <a href="#{{anchor .}}"><code>{{.}}</code></a></li>{{end}}
{{range .ReplayedBy}}<li>replayed by <a href="#{{anchor .RunID}}"><code>{{.RunID}}</code></a>: <span class="status {{.Verdict}}">{{if .Verdict}}{{.Verdict}}{{else}}no verdict recorded{{end}}</span></li>{{end}}
</ul>{{end}}{{end}}
{{with .Replay}}<h4>Replay</h4><p>replays <a href="#{{anchor .ReplaysRunID}}"><code>{{.ReplaysRunID}}</code></a> with tolerance {{.Tolerance}}: <span class="status {{.Verdict}}">{{if .Verdict}}{{.Verdict}}{{else}}no verdict recorded{{end}}</span> {{.Reason}}</p>{{end}}
{{if .Links}}<h4>Evidence files</h4><ul class="links">{{range .Links}}<li><a href="{{.Path}}">{{.Label}}</a> <code class="muted">{{.Path}}</code></li>{{end}}</ul>{{end}}
</section>
{{end}}
</section>
{{else}}<p>The selection holds no runs.</p>{{end}}
</body>
</html>
{{define "casehead"}}<thead><tr><th>case</th><th>formation</th><th>profile</th><th>language</th><th>task</th><th>provider</th><th>model</th><th>repeat</th><th>mode</th><th>verdict</th><th>checks not passed</th><th>wall time</th><th>run</th></tr></thead>{{end}}
{{define "casecells"}}<td><a href="#{{anchor .RunID}}">{{.Name}}</a></td><td>{{.Formation}}</td><td>{{.Profile}}</td><td>{{.Language}}</td><td class="task"><a href="#{{anchor .RunID}}-task" title="{{taskTitle .TaskFile}}">{{taskCell .}}</a></td><td class="provider">{{nr .Provider}}{{if .Reference}} <span class="k">reference</span>{{end}}</td><td class="model"><code>{{nr .Model}}</code></td><td class="repeat num">{{repeat .Repeat}}</td><td>{{.Mode}}</td><td><span class="status {{badge .}}">{{badge .}}</span></td><td class="num">{{failed .}} of {{len .Checks}}</td><td class="num">{{seconds .WallSeconds "not finalized"}}</td><td><code>{{.RunID}}</code></td>{{end}}
`
