package main

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/browsertest"
)

// checkReportInChromium opens the report.html a `matrix run --formations all` wrote in out in
// headless Chromium (issue 17's "done when"): no console errors or warnings, no network request,
// one row per catalog case with its name, every check the store recorded for each case shown with
// its status, and the SVG charts drawn. The screenshot goes under the test's temp dir.
func checkReportInChromium(t *testing.T, out string) {
	t.Helper()
	browsertest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := browsertest.Load(ctx, filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	names, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("tr.case-row td:first-child")].map(td => td.innerText.trim())`)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	want := harness.CatalogNames()
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("case rows %v, want one per catalog case %v", names, want)
	}
	runs := storeRuns(t, out)
	for _, r := range runs {
		shown, err := browsertest.Eval[map[string]string](p, `Object.fromEntries([...document.querySelectorAll('section.case[data-run="`+r.RunID+
			`"] tr.check')].map(r => [r.dataset.check, r.querySelector(".status").textContent]))`)
		if err != nil {
			t.Fatal(err)
		}
		if len(shown) != len(r.Checks) || len(r.Checks) == 0 {
			t.Errorf("run %s: the page shows checks %v, the store holds %d", r.RunID, shown, len(r.Checks))
		}
		for _, c := range r.Checks {
			if shown[c.Name] != c.Status {
				t.Errorf("run %s check %s: page says %q, the store %q", r.RunID, c.Name, shown[c.Name], c.Status)
			}
		}
	}
	charts, err := browsertest.Eval[int](p, `[...document.querySelectorAll("svg.assay-chart")].filter(s => s.getBoundingClientRect().width > 200 && s.querySelectorAll("path").length > 5).length`)
	if err != nil {
		t.Fatal(err)
	}
	if charts < 3 {
		t.Errorf("%d SVG charts drawn, want the three of issue 17 (time by phase, tokens by member, case x check)", charts)
	}
	res, err := p.Finish(filepath.Join(t.TempDir(), "report.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() || len(res.Exceptions) > 0 {
		t.Errorf("report.html is not self-contained or logs problems: console %v, exceptions %v, requests %v", res.Console, res.Exceptions, res.Requests)
	}
}
