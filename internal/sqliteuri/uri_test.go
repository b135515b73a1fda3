package sqliteuri_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/internal/sqliteuri"
	_ "github.com/mattn/go-sqlite3"
)

// TestFileOpensExactlyThatFile: names with '?', '#', '%' and spaces open
// the file of that name, read-only when asked, and never a file named by a
// prefix of it.
func TestFileOpensExactlyThatFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("not a database"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"victim?x.db", "victim#1.db", "victim%41.db", "victim ?mode=rwc.db", "v%3F.db"} {
		path := filepath.Join(dir, name)
		db, err := sql.Open("sqlite3", sqliteuri.File(path, "_journal_mode=MEMORY"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE t (x)"); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		db.Close()
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Errorf("%s: the named file was not written (%v)", name, err)
		}
		ro, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=ro"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ro.Exec("CREATE TABLE u (x)"); err == nil {
			t.Errorf("%s: mode=ro was not applied", name)
		}
		ro.Close()
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "not a database" {
		t.Fatalf("the file named by a prefix was touched: %q, %v", b, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 6 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files in the directory: %q, want the victim and the five named", names)
	}
}
