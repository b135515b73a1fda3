package metrics_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/assay-audit/assay/metrics"
)

// TestSchemaOneOfChecks: every column whose CHECK allows one of a few
// values (written as an OR of equalities for speed, see indexer's
// schemaDDL) still refuses any other value, a case or spacing variant
// included, and accepts another listed value, in a database an index
// wrote. Each change runs in a transaction that is rolled back.
func TestSchemaOneOfChecks(t *testing.T) {
	t.Parallel()
	snap, _ := indexFixture(t, metrics.Options{})
	// The shared database is read by other tests: the updates go to a copy.
	db, err := sql.Open("sqlite3", "file:"+copyDB(t, snap.DBPath))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	cases := []struct {
		table, column, where string
		ok                   string   // another listed value
		bad                  []string // refused
	}{
		{"nodes", "kind", "seq = (SELECT min(seq) FROM nodes WHERE kind = 'func')", "closure", []string{"Func", "func ", "function"}},
		{"nodes", "origin", "seq = (SELECT min(seq) FROM nodes WHERE origin = 'production')", "dependency", []string{"Production", "prod"}},
		{"packages", "variant", "id = (SELECT min(id) FROM packages WHERE variant = 'base')", "xtest", []string{"Base", "tests"}},
		{"types", "type_kind", "id = (SELECT min(id) FROM types WHERE type_kind = 'struct')", "unknown", []string{"structs", "class"}},
		{"members", "kind", "id = (SELECT min(id) FROM members WHERE kind = 'field')", "interface_method", []string{"method", "Field"}},
		{"dynamic_calls", "mode", "seq = (SELECT min(seq) FROM dynamic_calls)", "func_value", []string{"static", "interface "}},
		{"metric_descriptors", "scope", "name = 'cyclomatic'", "type", []string{"module", "Func"}},
		{"metric_value_rows", "kind", "(metric, subject) = (SELECT metric, subject FROM metric_value_rows WHERE kind = 'measured' LIMIT 1)", "proxy", []string{"estimated", "Measured"}},
	}
	for _, c := range cases {
		update := "UPDATE " + c.table + " SET " + c.column + " = ? WHERE " + c.where
		try := func(value string) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			res, err := tx.ExecContext(ctx, update, value)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				t.Fatalf("%s with %q: %d rows changed (%v), want 1: the fixture lacks the row this case needs", update, value, n, err)
			}
			return nil
		}
		if err := try(c.ok); err != nil {
			t.Errorf("%s.%s = %q (listed) refused: %v", c.table, c.column, c.ok, err)
		}
		for _, bad := range c.bad {
			if err := try(bad); err == nil || !strings.Contains(err.Error(), "CHECK constraint failed") {
				t.Errorf("%s.%s = %q: err %v, want a CHECK constraint failure", c.table, c.column, bad, err)
			}
		}
	}
}
