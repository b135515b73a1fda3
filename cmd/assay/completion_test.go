package main

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
)

// complete runs cobra's completion request for args and returns the values offered.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	r := runCLI(t, append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, r.code, r.stderr)
	}
	var values []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if !strings.HasPrefix(l, ":") {
			values = append(values, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return values
}

// Shell completion offers the values the flags and arguments take: the registries' names, the
// formats a command prints, the runs of the store named.
func TestCompletionOffersValues(t *testing.T) {
	t.Parallel()
	path := storeWithRuns(t, t.TempDir(), "run-a", "run-b")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"matrix", "run", "--formations", ""}, append(harness.CatalogNames(), "all")},
		{[]string{"matrix", "run", "--profile", ""}, harness.ProfileNames()},
		{[]string{"matrix", "run", "--language", ""}, harness.Languages()},
		{[]string{"matrix", "run", "--format", ""}, []string{"table", "json"}},
		{[]string{"matrix", "run", "--progress", ""}, []string{"auto", "tty", "plain", "none"}},
		{[]string{"resume", "--progress", ""}, []string{"auto", "tty", "plain", "none"}},
		{[]string{"graph", "callers", "--format", ""}, []string{"table", "json", "dot"}},
		{[]string{"sql", "--format", ""}, []string{"table", "csv", "json"}},
		{[]string{"oracle", "check", "--spec", ""}, []string{"double", "abs", "clamp"}},
		{[]string{"verify", "--store", path, ""}, []string{"run-b", "run-a"}},
		{[]string{"effects", "--store", path, "run-a", "run-"}, []string{"run-b"}},
		{[]string{"verify", "--out", t.TempDir(), ""}, nil},
	} {
		if got := complete(t, tc.args...); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v: completes %q, want %q", tc.args, got, tc.want)
		}
	}
}
