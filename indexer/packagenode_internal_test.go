package indexer

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageNodeSuffix: a package argument names a package by node id,
// import path, or the whole last elements of exactly one base package's
// import path; a shared end is ambiguous (listing both), a partial element
// or a test variant's id end matches nothing.
func TestPackageNodeSuffix(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "n.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE nodes (id TEXT, kind TEXT);
		INSERT INTO nodes VALUES ('pkg:example.com/a/cache', 'package'), ('pkg:example.com/b/cache', 'package'),
			('pkg:example.com/b/cache [example.com/b/cache.test]', 'package'), ('pkg:example.com/x/lsp/source', 'package'),
			('func:example.com/x/lsp/source.F', 'func')`); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"pkg:example.com/a/cache": "pkg:example.com/a/cache",
		"example.com/b/cache":     "pkg:example.com/b/cache",
		"lsp/source":              "pkg:example.com/x/lsp/source",
		"source":                  "pkg:example.com/x/lsp/source",
		"a/cache":                 "pkg:example.com/a/cache",
	} {
		if got, err := packageNode(ctx, db, name); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", name, got, err, want)
		}
	}
	var amb *AmbiguousSymbolError
	if _, err := packageNode(ctx, db, "cache"); !errors.As(err, &amb) || len(amb.Candidates) != 2 || !strings.HasPrefix(err.Error(), `package "cache" matches 2`) {
		t.Errorf("cache: err = %v, want ambiguous between the two base packages", err)
	}
	for _, name := range []string{"ource", "sp/source", "cache.test]", "source.F", ""} {
		if got, err := packageNode(ctx, db, name); !errors.Is(err, ErrSymbolNotFound) {
			t.Errorf("%q: %q, %v; want ErrSymbolNotFound", name, got, err)
		}
	}
}
