package indexer

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// TestMergeKeptRefusesDanglingRelations: a kept relation whose end is not
// in the new graph means the incremental plan kept a package whose
// dependency changed. The merge must fail rather than drop the relation
// silently (INSERT OR IGNORE skips a NOT NULL violation too).
func TestMergeKeptRefusesDanglingRelations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"go.mod": "module example.com/mk\n\ngo 1.22\n",
		"a/a.go": "package a\n\ntype Inner struct{}\n\nfunc (Inner) M() {}\n",
		"k/k.go": "package k\n\nimport \"example.com/mk/a\"\n\nfunc F() { var t a.Inner; t.M() }\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	oldDB := filepath.Join(t.TempDir(), "old.db")
	if _, err := Index(ctx, Options{Dir: dir, DBPath: oldDB, Env: []string{"GOPROXY=off"}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "new.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "ATTACH DATABASE ? AS old", "file:"+oldDB+"?mode=ro"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range schemaDDL() {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// The new graph without the method k's kept body calls.
	const target = "method:example.com/mk/a.Inner.M"
	if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path)
		SELECT id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path FROM old.nodes WHERE id != ? ORDER BY id`, target); err != nil {
		t.Fatal(err)
	}
	var calls int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM old.edges WHERE src = 'func:example.com/mk/k.F' AND dst = ? AND kind = 'calls'`, target).Scan(&calls); err != nil || calls != 1 {
		t.Fatalf("previous database: %d calls edges to %s (%v), want 1", calls, target, err)
	}
	if err := mergeKept(ctx, tx, []string{"pkg:example.com/mk/k"}); err == nil {
		var n int
		_ = tx.QueryRowContext(ctx, `SELECT count(*) FROM edges WHERE src = 'func:example.com/mk/k.F' AND kind = 'calls'`).Scan(&n)
		t.Fatalf("mergeKept kept a relation to a declaration the graph no longer has without an error (%d calls edges of k.F merged)", n)
	}
}
