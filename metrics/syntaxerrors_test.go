package metrics_test

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/metrics"
)

// TestComplexityOfAFileWithSyntaxErrors: a function of a file that does not
// parse is reported as such, the file named module-relative. Sign (in a file
// with more than ten errors, on which go/parser gives up) and Lost (a broken
// parameter list) have no recovered body: unavailable, saying the file has
// syntax errors, not "no function body ... a declaration without body" (a
// user read that for a function that has a body). Before, measured on the
// recovered tree, carries the file's reason and coverage 0. Max, in a file
// that parses, is measured with coverage 1 (cognitive: 0, see
// TestCoverageOfEveryKind). The index (from its graph in memory) and
// Compute from the written database say the same.
func TestComplexityOfAFileWithSyntaxErrors(t *testing.T) {
	t.Parallel()
	for _, graph := range []bool{false, true} {
		_, vals := indexValues(t, "testdata/syntaxerrors", !graph, metrics.Filter{Metrics: []string{"cyclomatic", "cyclomatic_folded", "cognitive"}})
		got := map[string]metrics.Value{}
		for _, v := range vals {
			got[v.Metric+" "+strings.TrimPrefix(v.Subject, "func:example.com/syntaxerrors/p.")] = v
		}
		for _, metric := range []string{"cyclomatic", "cyclomatic_folded", "cognitive"} {
			for fn, file := range map[string]string{"Sign": "p/p.go", "Lost": "p/one.go"} {
				v, ok := got[metric+" "+fn]
				switch {
				case !ok:
					t.Errorf("graph %v: no %s of %s", graph, metric, fn)
				case v.Kind != metrics.Unavailable || v.Value != nil:
					t.Errorf("graph %v: %s of %s = %s, want unavailable", graph, metric, fn, v.Kind)
				case !strings.Contains(v.Reason, "the file "+file+" has syntax errors (the first at ") ||
					!strings.Contains(v.Reason, "the parser recovered no body for this function") ||
					strings.Contains(v.Reason, "without body") || strings.Contains(v.Reason, "/testdata/"):
					t.Errorf("graph %v: %s of %s: reason %q, want the syntax errors of %s named module-relative", graph, metric, fn, v.Reason, file)
				}
			}
			before := got[metric+" Before"]
			if before.Value == nil || before.Coverage != 0 ||
				!strings.Contains(before.Reason, "the file p/one.go has syntax errors (the first at 12:16: ") ||
				!strings.Contains(before.Reason, "measured on the tree the parser recovered") {
				t.Errorf("graph %v: %s of Before = %s, coverage %v, reason %q; want measured on the recovered tree, coverage 0, the file's reason",
					graph, metric, fmtVal(before), before.Coverage, before.Reason)
			}
			// Max's file parses; cognitive's recursion increment also rests
			// on the package's call graph, which did not load cleanly.
			maxCoverage := map[bool]float64{true: 0, false: 1}[metric == "cognitive"]
			max := got[metric+" Max"]
			if max.Value == nil || max.Coverage != maxCoverage || strings.Contains(max.Reason, "syntax errors") {
				t.Errorf("graph %v: %s of Max (a file that parses) = %s, coverage %v, reason %q", graph, metric, fmtVal(max), max.Coverage, max.Reason)
			}
		}
		if v := got["cyclomatic Before"]; v.Value == nil || *v.Value != 2 {
			t.Errorf("graph %v: cyclomatic of Before = %s, want 2", graph, fmtVal(v))
		}
	}
}
