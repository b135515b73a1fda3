package main

import (
	"strings"
	"testing"
)

// A query that cannot run says what is wrong with it, in the query's terms: not the driver's API
// ("try using PrepareContext"), not a Go field ("field query").
func TestSQLSaysWhatIsWrongWithTheQuery(t *testing.T) {
	path := storeWithRuns(t, t.TempDir(), "run-a")
	for _, tc := range []struct {
		name, query, want string
	}{
		{"only a comment, after --", "-- comment", "the query is only a comment"},
		{"only a block comment", "/* nothing */", "the query is only a comment"},
		{"empty", "   ", "the query is empty: give one SQL statement"},
		{"two statements", "SELECT 1; SELECT 2", "query must be exactly one SQL statement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "sql", "--store", path, "--", tc.query)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
			for _, leak := range []string{"PrepareContext", "field ", "driver"} {
				if strings.Contains(r.stderr, leak) {
					t.Errorf("the error names %q: %s", leak, r.stderr)
				}
			}
		})
	}
	// A statement after a comment line runs; "--" ends the flags so that a query may start with "--".
	r := runCLI(t, "sql", "--store", path, "--format", "csv", "--", "-- the runs\nSELECT count(*) AS n FROM runs")
	if r.code != 0 || r.stdout != "n\n1\n" {
		t.Fatalf("a commented query: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
