package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
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
		{"a numbered parameter", "SELECT $1", "the query has parameters"},
		{"a question mark", "SELECT run_id FROM runs WHERE run_id = ?", "the query has parameters"},
		{"a named parameter", "SELECT $name", "the query has parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "sql", "--store", path, "--", tc.query)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
			for _, leak := range []string{"PrepareContext", "field ", "driver", "argument count"} {
				if strings.Contains(r.stderr, leak) {
					t.Errorf("the error names %q: %s", leak, r.stderr)
				}
			}
		})
	}
	// A statement after a comment line runs; "--" ends the flags so that a query may start with "--".
	// A comment given before "--" is said to belong after it, not called an unknown flag.
	if r := runCLI(t, "sql", "--store", path, "-- the runs"); r.code != 2 || !strings.Contains(r.stderr, `put arguments that start with "--" after "--"`) {
		t.Fatalf("a comment before --: exit %d %q", r.code, r.stderr)
	}
	// JSON rows are objects keyed by column: two columns of one name are refused, not printed twice.
	if r := runCLI(t, "sql", "--store", path, "--format", "json", `SELECT 2 AS "run_id", 3 AS "run_id"`); r.code != 2 ||
		!strings.Contains(r.stderr, `two columns named "run_id"`) || r.stdout != "" {
		t.Fatalf("duplicate columns in JSON: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A "$1" inside a string is text, not a parameter.
	if r := runCLI(t, "sql", "--store", path, "--format", "csv", "SELECT '$1' AS s"); r.code != 0 || r.stdout != "s\n$1\n" {
		t.Fatalf("a string holding $1: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	r := runCLI(t, "sql", "--store", path, "--format", "csv", "--", "-- the runs\nSELECT count(*) AS n FROM runs")
	if r.code != 0 || r.stdout != "n\n1\n" {
		t.Fatalf("a commented query: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestSQLJSONKeepsTypesAndColumnOrder(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	s, err := evidence.Open(ctx, filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := runCLI(t, "sql", "--out", out, "--format", "json",
		`SELECT 2 AS z, 1.50::DECIMAL(10,2) AS d, 'nan'::DOUBLE AS n, NULL AS nul, 'NULL' AS s, [1, 2] AS l, {'k': 'v'} AS st`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := `{
  "schema_version": 1,
  "columns": ["z","d","n","nul","s","l","st"],
  "rows": [
    {"z": 2, "d": 1.5, "n": "NaN", "nul": null, "s": "NULL", "l": [1,2], "st": {"k":"v"}}
  ]
}
`
	if r.stdout != want {
		t.Fatalf("json:\n%s\nwant:\n%s", r.stdout, want)
	}
	tbl := runCLI(t, "sql", "--out", out, "SELECT [1, 2] AS l, NULL AS nul")
	if tbl.code != 0 || !strings.Contains(tbl.stdout, "[1,2]") || !strings.Contains(tbl.stdout, "NULL") {
		t.Fatalf("table: %d %q %q", tbl.code, tbl.stdout, tbl.stderr)
	}
	missing := runCLI(t, "sql", "--out", filepath.Join(out, "nowhere"), "SELECT 1")
	if missing.code != 2 {
		t.Fatalf("missing store: exit %d", missing.code)
	}
	oneLine(t, missing, "no evidence store at "+filepath.Join(out, "nowhere", "evidence.duckdb")+"; run 'assay matrix run' first")
}
