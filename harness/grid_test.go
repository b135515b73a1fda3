//go:build grid

package harness

import (
	"strings"
	"testing"
)

// The matrix grid: every catalog case in each language × profile. The default test run has every
// case once through the CLI (cmd/assay, python/single-file) and the main job's own combination
// (go/standard, sequential and parallel); -tags grid (as .ci/run runs it) adds the rest of the grid,
// here and in cmd/assay.

func TestEveryCatalogCaseIsAcceptedOnTheReferenceProvider(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code for 30 members per combination; skipped with -short")
	}
	// The whole grid (every case in each language × profile) is four runs of every case: this test
	// runs go/standard and python/standard, the CLI's test python/single-file in the default test
	// run and go/single-file with -tags grid. .ci/run runs both with -tags grid.
	for _, c := range []struct{ language, profile string }{{"go", "standard"}, {"python", "standard"}} {
		t.Run(c.language+"/"+c.profile, func(t *testing.T) {
			var progress strings.Builder
			sum := runMatrix(t, Options{Formations: []string{"all"}, Language: c.language, Profile: c.profile, Concurrency: 2, Progress: &progress})
			if len(sum.Cases) != len(Catalog()) || !sum.Accepted() {
				for _, cr := range sum.Cases {
					if cr.Verdict.Verdict != "accepted" {
						t.Errorf("%s: %s %v", cr.Case, cr.Verdict.Verdict, cr.Verdict.Reasons)
					}
				}
				t.Fatalf("%d cases, accepted %v", len(sum.Cases), sum.Accepted())
			}
			for i, cr := range sum.Cases {
				if cr.Catalog != CatalogNames()[i] || cr.Language != c.language || cr.Profile != c.profile || cr.Timings["team"] <= 0 {
					t.Fatalf("case %d: %s %s %s %s timings %v", i, cr.Catalog, cr.Language, cr.Profile, cr.Verdict.Verdict, cr.Timings)
				}
			}
			if n := strings.Count(progress.String(), ": accepted in "); n != len(Catalog()) {
				t.Fatalf("%d progress lines for accepted cases:\n%s", n, progress.String())
			}
		})
	}
}
