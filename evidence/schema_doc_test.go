package evidence

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/evidence-schema.md documents every table and column the store creates.
func TestSchemaDocCoversEveryColumn(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "docs", "evidence-schema.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	s := mustOpen(t, storePath(t), OpenOptions{})
	rows, err := s.conn.QueryContext(ctx, `SELECT table_name, column_name FROM duckdb_columns() WHERE schema_name = 'main' AND database_name = current_database() AND NOT internal ORDER BY table_name, column_index`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var table, col string
		if err := rows.Scan(&table, &col); err != nil {
			t.Fatal(err)
		}
		n++
		start := strings.Index(doc, "### `"+table+"`")
		if start < 0 {
			t.Errorf("table %s is not documented", table)
			continue
		}
		section := doc[start:]
		if end := strings.Index(section[4:], "\n### "); end >= 0 {
			section = section[:end+4]
		}
		if !strings.Contains(section, "| `"+col+"`") && !strings.Contains(section, "`"+col+"`, `") &&
			!strings.Contains(section, "`"+col+"` …") && !strings.Contains(section, "… `"+col+"`") && !strings.Contains(section, ", `"+col+"` |") {
			t.Errorf("column %s.%s is not documented in its table's section", table, col)
		}
	}
	if n < 80 {
		t.Fatalf("only %d columns listed", n)
	}
}
