// Package storetest holds test helpers shared by packages that search what assay stored.
package storetest

import (
	"database/sql"
	"fmt"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // the evidence store's engine
)

// EachValue opens the DuckDB database at path read-only and calls fn with every value of every row
// of every table in schema main, as text (a []byte value as its bytes, anything else as fmt.Sprint
// prints it). DuckDB may compress what it stores, so a search of the file's bytes alone can miss a
// value; this reads each one back. It fails the test on any database error.
func EachValue(t testing.TB, path string, fn func(table, text string)) {
	t.Helper()
	db, err := sql.Open("duckdb", path+"?access_mode=read_only&threads=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatalf("no tables in %s", path)
	}
	for _, table := range tables {
		rs, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				text := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					text = string(b)
				}
				fn(table, text)
			}
		}
		rs.Close()
	}
}

// Exec runs stmts, in order, on the closed DuckDB database at path, as a tamperer or a broken tool
// would edit a store directly; it fails the test on the first statement that errs.
func Exec(t testing.TB, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", path+"?threads=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}
