package main

import (
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/metrics"
)

// indexFixture runs `assay index` on the metrics fixture into a fresh
// output directory and returns it. Without extra flags the directory is a copy of the shared
// index's (fixtureIndex): the same command's files, written once per test binary.
func indexFixture(t *testing.T, extra ...string) string {
	t.Helper()
	out := t.TempDir()
	if len(extra) == 0 {
		dir, _ := fixtureIndex(t)
		copyTree(t, dir, out)
		return out
	}
	r := runCLI(t, append([]string{"index", "--out", out, "../../metrics/testdata/fixture"}, extra...)...)
	if r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	return out
}

// sharedIndex is `assay index --out DIR --format json` of the metrics fixture, run once per test
// binary by the first test that asks (fixtureIndex): indexing costs about 0.6 CPU-s, a copy of its
// files a few milliseconds.
var sharedIndex struct {
	once sync.Once
	dir  string
	r    result
	err  string
}

// fixtureIndex returns the shared index's output directory, which tests only read (indexFixture
// copies it for a test that may write), and the result of the command that wrote it.
func fixtureIndex(t *testing.T) (string, result) {
	t.Helper()
	sharedIndex.once.Do(func() {
		// t.Fatal ends the goroutine before the assignment below: err stays.
		sharedIndex.err = "the shared index failed in the test that made it: " + t.Name()
		sharedIndex.dir = fixtureDir("index")
		sharedIndex.r = runCLI(t, "index", "--out", sharedIndex.dir, "--format", "json", "../../metrics/testdata/fixture")
		if sharedIndex.r.code != 0 {
			t.Fatalf("index exit %d: %s", sharedIndex.r.code, sharedIndex.r.stderr)
		}
		sharedIndex.err = ""
	})
	if sharedIndex.err != "" {
		t.Fatal(sharedIndex.err)
	}
	return sharedIndex.dir, sharedIndex.r
}

func TestMetricsTableJSONAndCSV(t *testing.T) {
	out := indexFixture(t)
	r := runCLI(t, "metrics", "--out", out)
	if r.code != 0 {
		t.Fatalf("metrics exit %d: %s", r.code, r.stderr)
	}
	for _, s := range []string{"SUBJECT", "CA", "INSTABILITY", "ABSTRACTNESS", "pkg:example.com/mx/app", "unavailable", "GOOS="} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("package table lacks %q:\n%s", s, r.stdout)
		}
	}

	j := runCLI(t, "metrics", "--out", out, "--scope", "type", "--sort", "lcom4", "--top", "1", "--format", "json")
	if j.code != 0 {
		t.Fatalf("metrics json exit %d: %s", j.code, j.stderr)
	}
	var rows []struct {
		Subject string
		Origin  string
		Values  map[string]struct {
			Value    *float64
			Kind     string
			Method   string
			Coverage float64
		}
	}
	if err := json.Unmarshal(listOf(t, j.stdout, "rows"), &rows); err != nil {
		t.Fatalf("%v: %s", err, j.stdout)
	}
	if len(rows) != 1 || rows[0].Subject != "type:example.com/mx/lcom.Split" {
		t.Fatalf("top lcom4 row = %+v, want Split (LCOM4 3)", rows)
	}
	all := runCLI(t, "metrics", "--out", out, "--scope", "type", "--variant", "all")
	if !strings.Contains(all.stdout, "type:example.com/mx/lcom [example.com/mx/lcom.test].Mixed") {
		t.Errorf("--variant all does not show the test variant's Mixed:\n%s", all.stdout)
	}
	if strings.Contains(r.stdout, ".test]") {
		t.Errorf("default output shows test variants:\n%s", r.stdout)
	}
	// Package metrics exist for base variants only: --variant all says so
	// instead of showing the same rows silently.
	pa := runCLI(t, "metrics", "--out", out, "--scope", "package", "--variant", "all")
	if pa.code != 0 || pa.stdout != r.stdout || !strings.Contains(pa.stderr, "base package variants only") {
		t.Errorf("--scope package --variant all: exit %d, same rows as base %v, stderr %q", pa.code, pa.stdout == r.stdout, pa.stderr)
	}
	if strings.Contains(all.stderr, "base package variants only") {
		t.Errorf("--scope type --variant all prints the package note: %q", all.stderr)
	}
	if v := rows[0].Values["lcom4"]; v.Value == nil || *v.Value != 3 || v.Kind != "measured" || !strings.HasPrefix(v.Method, "lcom4-") {
		t.Errorf("Split lcom4 = %+v", v)
	}

	c := runCLI(t, "metrics", "--out", out, "--scope", "package", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(c.stdout)).ReadAll()
	if c.code != 0 || err != nil || len(recs) < 2 {
		t.Fatalf("csv: exit %d, %v, %q", c.code, err, c.stdout)
	}
	sawUnavailable := false
	for _, rec := range recs[1:] {
		if rec[4] == "unavailable" {
			sawUnavailable = true
			if rec[3] != "" || rec[6] == "" {
				t.Errorf("unavailable row with value %q reason %q", rec[3], rec[6])
			}
		}
	}
	if !sawUnavailable {
		t.Errorf("no unavailable row in the package csv")
	}
}

func TestMetricsExplain(t *testing.T) {
	r := runCLI(t, "metrics", "explain", "lcom4")
	if r.code != 0 {
		t.Fatalf("explain exit %d: %s", r.code, r.stderr)
	}
	for _, s := range []string{"Hitz", "Montazeri", "method:", "Choices", "embedded field", "method value", "closure", "generic", "no_state", "Known limits",
		"lcom4-receiver-graph@v4", "methods (only its methods: fields are not vertices)", "n_unused_fields", "not assessable"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("explain lcom4 lacks %q", s)
		}
	}
	// The superseded definition made fields vertices; the text must not
	// say so any more.
	if strings.Contains(r.stdout, "methods and fields") {
		t.Errorf("explain lcom4 still describes fields as vertices:\n%s", r.stdout)
	}
	// Every metric says what its coverage is the fraction of.
	for _, d := range metrics.Registry() {
		e := runCLI(t, "metrics", "explain", d.Name)
		if !strings.Contains(e.stdout, "\nCoverage\n  The fraction (0..1) of a value's inputs that loaded without errors, 1 when they all did; unavailable values have one too.\n  Inputs: "+d.Coverage+"\n  Packages the build context excluded") {
			t.Errorf("explain %s lacks its coverage:\n%s", d.Name, e.stdout)
		}
	}
	if ref := oneSpaced(cliReference(t, "## assay metrics")); !strings.Contains(ref, "an unavailable value has coverage 1 when nothing is missing") {
		t.Errorf("docs/cli.md does not say what coverage means for an unavailable value:\n%s", ref)
	}
	bad := runCLI(t, "metrics", "explain", "cohesion")
	if bad.code != 2 {
		t.Fatalf("unknown metric: exit %d", bad.code)
	}
	oneLine(t, bad, "unknown metric")
}

func TestMetricsBadInput(t *testing.T) {
	t.Parallel()
	out := indexFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown scope", []string{"metrics", "--out", out, "--scope", "module"}, "--scope"},
		{"sort by a metric of another scope", []string{"metrics", "--out", out, "--sort", "lcom4"}, "--sort"},
		{"negative top", []string{"metrics", "--out", out, "--top", "-1"}, "--top"},
		{"other snapshot", []string{"metrics", "--out", out, "--snapshot", "ffff"}, "snapshot"},
		{"no database", []string{"metrics", "--out", t.TempDir()}, "graph database"},
		{"bad format", []string{"metrics", "--out", out, "--format", "xml"}, "--format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
		})
	}
	noMetrics := indexFixture(t, "--metrics=false")
	r := runCLI(t, "metrics", "--out", noMetrics)
	if r.code != 2 {
		t.Fatalf("database without metrics: exit %d", r.code)
	}
	oneLine(t, r, "no metric values")

	// A database from a newer schema is refused, naming both versions.
	db, err := sql.Open("sqlite3", filepath.Join(out, "graph.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 42"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	r = runCLI(t, "metrics", "--out", out)
	if r.code != 2 {
		t.Fatalf("newer schema: exit %d", r.code)
	}
	oneLine(t, r, "schema version 42, newer than the version")
}

func TestIndexReuseWarningsAndNoPackages(t *testing.T) {
	t.Parallel()
	out := indexFixture(t)
	again := runCLI(t, "index", "--out", out, "../../metrics/testdata/fixture")
	if again.code != 0 || !strings.Contains(again.stderr, "reused") {
		t.Fatalf("unchanged re-run: exit %d, stderr %q", again.code, again.stderr)
	}
	broken := runCLI(t, "index", "--out", t.TempDir(), "../../indexer/testdata/broken")
	if broken.code != 0 || !strings.Contains(broken.stderr, "warning") || !strings.Contains(broken.stderr, "load errors") {
		t.Fatalf("broken module: exit %d, stderr %q", broken.code, broken.stderr)
	}
	// The warning names the first error on one line, and no "0 patterns".
	if !strings.Contains(broken.stderr, "first load error: bad/bad.go:9:9: cannot use") || strings.Contains(broken.stderr, "0 patterns") {
		t.Errorf("broken module: stderr %q, want the first load error on one line and no count of 0", broken.stderr)
	}
	none := runCLI(t, "index", "--out", t.TempDir(), t.TempDir())
	if none.code != 2 {
		t.Fatalf("no packages: exit %d", none.code)
	}
	oneLine(t, none, "no Go package")
	tags := runCLI(t, "index", "--out", t.TempDir(), "--tags", "a b", "../../metrics/testdata/fixture")
	if tags.code != 2 {
		t.Fatalf("bad tag: exit %d", tags.code)
	}
	oneLine(t, tags, "build tag")
}

// TestMetricsTableMarksPartialCoverage: a value computed from inputs some of
// which did not load is marked "*" in the table, with a footer saying what
// the mark means; a snapshot where everything loaded has no mark.
func TestMetricsTableMarksPartialCoverage(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../indexer/testdata/broken"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, "metrics", "--out", out)
	if r.code != 0 {
		t.Fatalf("metrics exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "* marks") {
		t.Errorf("broken snapshot: no footer for the partial-coverage mark:\n%s", r.stdout)
	}
	marked := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "pkg:") && strings.Contains(line, "*") {
			marked++
		}
	}
	if marked == 0 {
		t.Errorf("broken snapshot: no package row carries a marked value:\n%s", r.stdout)
	}

	clean := indexFixture(t)
	c := runCLI(t, "metrics", "--out", clean)
	if c.code != 0 || strings.Contains(c.stdout, "*") {
		t.Errorf("fixture where everything loads: exit %d, a mark in:\n%s", c.code, c.stdout)
	}
}

// TestMetricsSortLCOM4RanksNoStateLast: an LCOM4 value of a type whose
// methods touch no receiver state (reason no_state) counts methods, not a
// lack of cohesion. The table marks it "?" and explains the mark, and
// --sort lcom4 ranks it after every other value (a user saw a bare 11 ranked
// 2nd among incohesive types), before the unavailable ones; json keeps that order.
func TestMetricsSortLCOM4RanksNoStateLast(t *testing.T) {
	out := indexFixture(t)
	r := runCLI(t, "metrics", "--out", out, "--scope", "type", "--sort", "lcom4")
	if r.code != 0 {
		t.Fatalf("metrics exit %d: %s", r.code, r.stderr)
	}
	var subjects, cells []string
	for _, line := range strings.Split(r.stdout, "\n") {
		// SUBJECT ORIGIN LCOM4 N_FIELDS N_UNUSED_FIELDS
		if f := strings.Fields(line); len(f) == 5 && strings.HasPrefix(f[0], "type:") {
			subjects, cells = append(subjects, f[0]), append(cells, f[2])
		}
	}
	// The types whose methods use no field, with the paper's values: two
	// methods not linked by calls are 2, one method is 1 whatever its fields.
	noState := map[string]string{"type:example.com/mx/lcom.Stateless": "2?", "type:example.com/mx/lcom.StatelessFields": "2?",
		"type:example.com/mx/lcom.Bystander": "1?"}
	first, last := len(subjects), -1
	for name, want := range noState {
		i := slices.Index(subjects, name)
		if i < 0 || cells[i] != want {
			t.Fatalf("%s (no_state) not shown as %s:\n%s", name, want, r.stdout)
		}
		first, last = min(first, i), max(last, i)
	}
	for i, c := range cells {
		_, flagged := noState[subjects[i]]
		switch {
		case !flagged && strings.HasSuffix(c, "?"):
			t.Errorf("%s marked %q: only no_state values are", subjects[i], c)
		case !flagged && i > first && i < last:
			t.Errorf("%s %s ranked among the no_state values:\n%s", subjects[i], c, r.stdout)
		case i < first && c == "unavailable", i > last && c != "unavailable":
			t.Errorf("row %d %s %s: no_state values rank after every value and before unavailable ones:\n%s", i, subjects[i], c, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "? marks 3 LCOM4 values of types whose methods use no field of their receiver (reason no_state)") ||
		!strings.Contains(r.stdout, "--sort lcom4 ranks them after the other values") {
		t.Errorf("no footer for the no_state mark:\n%s", r.stdout)
	}

	j := runCLI(t, "metrics", "--out", out, "--scope", "type", "--sort", "lcom4", "--format", "json")
	var rows []struct{ Subject string }
	if err := json.Unmarshal(listOf(t, j.stdout, "rows"), &rows); err != nil || j.code != 0 {
		t.Fatalf("json: exit %d, %v", j.code, err)
	}
	var got []string
	for _, row := range rows {
		got = append(got, row.Subject)
	}
	if !slices.Equal(got, subjects) {
		t.Errorf("json order %v, table order %v", got, subjects)
	}
	help := runCLI(t, "metrics", "--help")
	if !strings.Contains(oneSpaced(help.stdout), "? an LCOM4 value of a type whose methods use no field of their receiver") ||
		!strings.Contains(help.stdout, "values marked ? after the others") {
		t.Errorf("--help does not explain the ? mark and its sort order:\n%s", help.stdout)
	}
	if ref := oneSpaced(cliReference(t, "## assay metrics")); !strings.Contains(ref, `marks with "?" an LCOM4 value`) ||
		!strings.Contains(ref, "ranks such values after the others") {
		t.Errorf("docs/cli.md does not explain the ? mark and its sort order:\n%s", ref)
	}
}

// tableCells parses a metrics table into subject -> column -> cell.
func tableCells(t *testing.T, stdout string) map[string]map[string]string {
	t.Helper()
	lines := strings.Split(stdout, "\n")
	header := strings.Fields(lines[0])
	out := map[string]map[string]string{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != len(header) || !strings.Contains(f[0], ":") {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		out[f[0]] = row
	}
	return out
}

// TestMetricsTableFormatsByMetric: a metric's value prints the same in every
// listing: counts and complexities as integers, ratios and centralities with
// four decimals, whatever the shown rows happen to hold (instability 1 of
// app read 1.0000 in the full table and 1 under --top 1).
func TestMetricsTableFormatsByMetric(t *testing.T) {
	out := indexFixture(t)
	for _, scope := range []string{"package", "type", "func"} {
		full := runCLI(t, "metrics", "--out", out, "--scope", scope)
		if full.code != 0 {
			t.Fatalf("%s: exit %d: %s", scope, full.code, full.stderr)
		}
		all := tableCells(t, full.stdout)
		if len(all) == 0 {
			t.Fatalf("%s: no rows in\n%s", scope, full.stdout)
		}
		for subject, row := range all {
			for col, c := range row {
				d, ok := metrics.Lookup(strings.ToLower(col))
				if !ok || c == "unavailable" || c == "-" {
					continue
				}
				num := strings.TrimRight(strings.TrimLeft(c, "~"), "*?")
				if _, err := strconv.ParseFloat(num, 64); err != nil {
					t.Errorf("%s %s: cell %q is not a number", subject, col, c)
				}
				if hasDot := strings.Contains(num, "."); hasDot == d.Integer || (hasDot && len(num)-strings.Index(num, ".") != 5) {
					t.Errorf("%s %s = %q: want %s", subject, col, c, map[bool]string{true: "an integer", false: "four decimals"}[d.Integer])
				}
			}
		}
		for _, name := range metrics.Names(metrics.Scope(scope)) {
			top := runCLI(t, "metrics", "--out", out, "--scope", scope, "--sort", name, "--top", "1")
			for subject, row := range tableCells(t, top.stdout) {
				for col, c := range row {
					if all[subject][col] != c {
						t.Errorf("--sort %s --top 1: %s %s = %q, full table %q", name, subject, col, c, all[subject][col])
					}
				}
			}
		}
	}
	top := runCLI(t, "metrics", "--out", out, "--sort", "instability", "--top", "1")
	if got := tableCells(t, top.stdout)["pkg:example.com/mx/app"]["INSTABILITY"]; got != "1.0000" {
		t.Errorf("instability of app under --top 1 = %q, want 1.0000:\n%s", got, top.stdout)
	}
}

// TestMetricsTableMarksFanInOfBrokenCallers: fan_in of a function called
// from a package with type errors is marked "*" (it showed a bare 3, JSON
// coverage 1, while Ca of its package was marked).
func TestMetricsTableMarksFanInOfBrokenCallers(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../metrics/testdata/brokencallers"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	f := runCLI(t, "metrics", "--out", out, "--scope", "func")
	p := runCLI(t, "metrics", "--out", out, "--scope", "package")
	if got := tableCells(t, f.stdout)["func:example.com/brokencallers/good.Add"]["FAN_IN"]; got != "3*" {
		t.Errorf("fan_in of good.Add = %q, want 3*:\n%s", got, f.stdout)
	}
	if got := tableCells(t, p.stdout)["pkg:example.com/brokencallers/good"]["CA"]; got != "2*" {
		t.Errorf("ca of good = %q, want 2*:\n%s", got, p.stdout)
	}
}

// TestMetricsTableMarksExactlyThePartialValues: "*" marks a computed value
// whose coverage is below 1 and nothing else: not a value whose inputs all
// loaded, not an unavailable value (which now has a coverage too: 1 when
// nothing is missing), and the footer counts exactly the marked values.
func TestMetricsTableMarksExactlyThePartialValues(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "../../metrics/testdata/brokencallers"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	unavailableByCoverage := map[bool]int{}
	for _, scope := range []string{"package", "type", "func"} {
		tr := runCLI(t, "metrics", "--out", out, "--scope", scope)
		j := runCLI(t, "metrics", "--out", out, "--scope", scope, "--format", "json")
		var rows []struct {
			Subject string
			Values  map[string]metrics.Value
		}
		if err := json.Unmarshal(listOf(t, j.stdout, "rows"), &rows); err != nil || tr.code != 0 {
			t.Fatalf("%s: exit %d, %v", scope, tr.code, err)
		}
		cells := tableCells(t, tr.stdout)
		partial := 0
		for _, row := range rows {
			for name, v := range row.Values {
				c := cells[row.Subject][strings.ToUpper(name)]
				want := v.Value != nil && v.Coverage < 1
				if want {
					partial++
				}
				if v.Value == nil {
					unavailableByCoverage[v.Coverage == 1]++
				}
				if strings.Contains(c, "*") != want {
					t.Errorf("%s of %s: cell %q, value %v coverage %v: want a mark %v", name, row.Subject, c, v.Value, v.Coverage, want)
				}
			}
		}
		if footer := fmt.Sprintf("* marks %d values computed from incomplete inputs", partial); (partial > 0) != strings.Contains(tr.stdout, footer) {
			t.Errorf("%s: %d partial values, footer %q expected %v:\n%s", scope, partial, footer, partial > 0, tr.stdout)
		}
	}
	if unavailableByCoverage[true] == 0 || unavailableByCoverage[false] == 0 {
		t.Errorf("unavailable values by coverage 1: %v; the module should have both", unavailableByCoverage)
	}
}
