package main

import (
	"crypto/sha256"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphDatabasePathWithURICharacters: a --db path with '?', '#' or '%'
// names exactly that file. Pasted into an SQLite URI it used to end the
// path early: index wrote its tables into another program's database
// named by the prefix (exit 0) and readers read that database.
func TestGraphDatabasePathWithURICharacters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	db, err := sql.Open("sqlite3", victim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE foo (x); INSERT INTO foo VALUES ('precious')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	sum := func() [32]byte {
		b, err := os.ReadFile(victim)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	before := sum()
	for _, name := range []string{"victim?x.db", "victim#1.db", "victim%41.db"} {
		path := filepath.Join(dir, name)
		r := runCLI(t, "index", "--db", path, "../../metrics/testdata/fixture")
		if r.code != 0 {
			t.Fatalf("%s: index exit %d: %s", name, r.code, r.stderr)
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: the named database was not written (%v)", name, err)
		}
		m := runCLI(t, "metrics", "--db", path)
		if m.code != 0 || !strings.Contains(m.stdout, "pkg:example.com/mx/app") {
			t.Errorf("%s: metrics exit %d, stdout %q, stderr %q", name, m.code, m.stdout, m.stderr)
		}
	}
	if sum() != before {
		t.Fatal("another program's database named by a prefix of the path was modified")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := strings.TrimSuffix(e.Name(), "-sha256"); n != "victim" && n != "victim?x.db" && n != "victim#1.db" && n != "victim%41.db" {
			t.Errorf("stray file %q left in the directory", n)
		}
	}
}
