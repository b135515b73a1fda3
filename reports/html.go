package reports

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/assay-audit/assay/reports/charts"
)

// maxChartCases bounds the cases the report's charts draw, failures first (the order the report
// lists them); every case is in the tables whatever the bound.
const maxChartCases = 60

// HTML writes r as one self-contained HTML page: inline CSS, inline SVG charts drawn by package
// charts (time per case by phase, tokens per member by source, the case × check matrix), no
// script, no font or other request from the network, a print layout. Failures come first, as in
// r. Every value is escaped by html/template; a fact the evidence does not hold reads "not
// recorded" or "unknown", never 0.
//
// Errors: the writer's, wrapped.
func HTML(w io.Writer, r Report) error {
	v := htmlView{Report: r, CSS: template.CSS(pageCSS)}
	var all []Case
	for _, inv := range r.Invocations {
		all = append(all, inv.Cases...)
		if inv.Reference {
			v.Reference = true
		}
	}
	v.Cases = len(all)
	byRun := map[string]Case{}
	for _, c := range all {
		byRun[c.RunID] = c
	}
	for _, g := range r.Groups {
		hg := htmlGroup{Group: g, Accepted: g.Totals.ByVerdict["accepted"]}
		hg.NotAccepted = g.Totals.Cases - hg.Accepted
		for _, id := range g.RunIDs {
			if c, ok := byRun[id]; ok {
				hg.Cases = append(hg.Cases, c)
			}
		}
		v.GroupViews = append(v.GroupViews, hg)
	}
	v.AnyUsage = anyUsage(all)
	shown := all[:min(len(all), maxChartCases)]
	v.Charted = len(shown)
	svg, err := charts.TimeByPhase(timeChartInput(shown), chartPhases...)
	v.TimeChart = chartHTML(svg, err, "No case recorded timings.")
	svg, err = charts.TokensByMember(tokenChartInput(shown))
	v.TokenChart = chartHTML(svg, err, "No case recorded members' usage.")
	checks, rows := matrixChartInput(shown)
	svg, err = charts.CheckMatrix(checks, rows)
	v.MatrixChart = chartHTML(svg, err, "No case recorded checks.")
	if err := evidencePage.Execute(w, v); err != nil {
		return fmt.Errorf("reports: html: %w", err)
	}
	return nil
}

type htmlView struct {
	Report
	// GroupViews are r.Groups with their cases, when the report is grouped.
	GroupViews                         []htmlGroup
	CSS                                template.CSS
	Reference                          bool
	AnyUsage                           bool
	Cases, Charted                     int
	TimeChart, TokenChart, MatrixChart template.HTML
}

// htmlGroup is one group of a grouped report with its cases, in report order.
type htmlGroup struct {
	Group
	Accepted, NotAccepted int
	Cases                 []Case
}

// repeatHTML is a repeat index as the page shows it: "#N", or "—" for a run that is not a repeat.
func repeatHTML(n int) string {
	if n == 0 {
		return "—"
	}
	return "#" + strconv.Itoa(n)
}

// taskTitle is the tooltip of a case's task: the full SHA-256 its stored evidence binds and what
// the stored bytes say.
func taskTitle(t TaskFile) string {
	if t.SHA256 == "" {
		return "task file " + taskFileStatusText(t.Status) + ": " + t.Detail
	}
	return "task file SHA-256 " + t.SHA256 + " (" + taskFileStatusText(t.Status) + ")"
}

// chartLabel names a case on a chart: its case name, its repeat index when it is a repeat, and the
// end of its run id, so two runs of one case stay apart.
func chartLabel(c Case) string {
	id := c.RunID
	if len(id) > 8 {
		id = id[len(id)-8:]
	}
	name := c.Name
	if c.Repeat > 0 {
		name += " #" + strconv.Itoa(c.Repeat)
	}
	return name + " · " + id
}

// chartPhases are the phases the time chart draws, in pipeline order ("tests" and "oracle" are
// inside "checks").
var chartPhases = []string{"team", "checks", "finalize"}

func timeChartInput(cases []Case) []charts.CaseTimes {
	out := make([]charts.CaseTimes, 0, len(cases))
	for _, c := range cases {
		ct := charts.CaseTimes{Case: chartLabel(c)}
		for _, ph := range c.Phases {
			// "tests" and "oracle" are summed member durations inside "checks": drawing them too
			// would count that time twice.
			if ph.Seconds == nil || ph.Name == "tests" || ph.Name == "oracle" {
				continue
			}
			ct.Phases = append(ct.Phases, charts.PhaseSeconds{Name: ph.Name, Seconds: *ph.Seconds})
		}
		out = append(out, ct)
	}
	return out
}

func tokenChartInput(cases []Case) []charts.MemberTokens {
	var out []charts.MemberTokens
	for _, c := range cases {
		for _, m := range c.Members {
			mt := charts.MemberTokens{Member: chartLabel(c) + " / " + m.ID}
			for _, src := range usageSources {
				st := charts.SourceTokens{Source: src}
				for _, u := range m.Usage {
					if u.Source == src && u.TotalTokens != nil {
						st.Tokens, st.Known = *u.TotalTokens, true
					}
				}
				mt.Sources = append(mt.Sources, st)
			}
			out = append(out, mt)
		}
	}
	return out
}

// chartStatus maps a recorded check status onto the matrix's four: simulated and not_enforced
// did not certify anything, so they are drawn with skipped; unknown is drawn with not recorded.
func chartStatus(s string) charts.Status {
	switch s {
	case "passed":
		return charts.Passed
	case "failed":
		return charts.Failed
	case "skipped", "simulated", "not_enforced":
		return charts.Skipped
	}
	return charts.NotRecorded
}

func matrixChartInput(cases []Case) ([]string, []charts.MatrixRow) {
	var checks []string
	seen := map[string]bool{}
	rows := make([]charts.MatrixRow, 0, len(cases))
	for _, c := range cases {
		row := charts.MatrixRow{Case: chartLabel(c), Statuses: map[string]charts.Status{}}
		for _, ch := range c.Checks {
			if !seen[ch.Name] {
				seen[ch.Name] = true
				checks = append(checks, ch.Name)
			}
			row.Statuses[ch.Name] = chartStatus(ch.Status)
		}
		rows = append(rows, row)
	}
	return checks, rows
}

// seconds prints a duration in seconds, or why there is none.
func seconds(s *float64, none string) string {
	if s == nil {
		return none
	}
	return strconv.FormatFloat(*s, 'f', 2, 64) + " s"
}

func tokens(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return strconv.FormatInt(*n, 10)
}

func utc(t *time.Time) string {
	if t == nil || t.IsZero() {
		return NotRecorded
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// orNotRecorded prints s, or "not recorded" for "".
func orNotRecorded(s string) string {
	if s == "" {
		return NotRecorded
	}
	return s
}

// verdictOrStatus is what a case's badge says: its verdict, else its run status.
func verdictOrStatus(c Case) string {
	switch {
	case c.VerificationFailed():
		return "evidence does not verify (" + c.Verification + ")"
	case c.Verdict != "":
		return c.Verdict
	case c.Interrupted:
		return "interrupted"
	}
	return orNotRecorded(c.Status)
}

func sourceTotal(s SourceTokens) string {
	if !s.Known {
		return fmt.Sprintf("at least %d (some readings unknown)", s.Tokens)
	}
	return strconv.FormatInt(s.Tokens, 10)
}

// anyUsage reports whether any member of cases has a usage reading: without one, token totals
// are "no usage recorded", not a sum of 0.
func anyUsage(cases []Case) bool {
	for _, c := range cases {
		for _, m := range c.Members {
			if len(m.Usage) > 0 {
				return true
			}
		}
	}
	return false
}

func failedChecks(c Case) int {
	n := 0
	for _, ch := range c.Checks {
		if ch.Status != "passed" {
			n++
		}
	}
	return n
}

// anchor is a case section's id: "run-" and the run id with anything outside [A-Za-z0-9_-] as "_".
func anchor(runID string) string {
	return "run-" + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, runID)
}

func boolText(b *bool, yes, no string) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return yes
	}
	return no
}

var evidencePage = template.Must(template.New("evidence").Funcs(template.FuncMap{
	"seconds":   seconds,
	"tokens":    tokens,
	"utc":       utc,
	"utcv":      func(t time.Time) string { return utc(&t) },
	"nr":        orNotRecorded,
	"badge":     verdictOrStatus,
	"srcTotal":  sourceTotal,
	"failed":    failedChecks,
	"anyUsage":  anyUsage,
	"anchor":    anchor,
	"boolText":  boolText,
	"join":      strings.Join,
	"hasPrefix": strings.HasPrefix,
	"repeat":    repeatHTML,
	"taskTitle": taskTitle,
	"taskState": taskFileStatusText,
	"taskCell":  taskCell,
	"deref":     func(b *bool) bool { return b != nil && *b },
}).Parse(evidenceTemplate))
