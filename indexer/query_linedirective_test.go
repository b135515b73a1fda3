package indexer_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// lineSrc has one declaration before a //line directive and one under it:
// physically on lines 3 and 6, logically (per the directive) on parser.y:40.
const lineSrc = `package ld

func Before() {}

//line parser.y:40
func Under() {}
`

// TestFileSymbolsLineDirective: positions are physical (the line in the
// file on disk), and a declaration under a //line directive also carries
// the directive's logical position; one before it carries none. A file
// changed since the index makes the directive unknown, never "none".
func TestFileSymbolsLineDirective(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module example.com/ld\n\ngo 1.22\n", "ld.go": lineSrc} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	snap, err := indexer.Index(ctx, indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "graph.db")})
	if err != nil {
		t.Fatal(err)
	}
	db, err := indexer.OpenDatabase(ctx, snap.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	syms, err := indexer.FileSymbols(ctx, db, "ld.go")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]indexer.FileSymbol{}
	for _, s := range syms {
		by[s.Name] = s
	}
	if b := by["Before"]; b.Line != 3 || b.Directive != nil || b.DirectiveUnknown != "" {
		t.Errorf("Before: line %d directive %v unknown %q; want physical line 3 and no directive", b.Line, b.Directive, b.DirectiveUnknown)
	}
	u := by["Under"]
	if u.Line != 6 || u.File != "ld.go" {
		t.Errorf("Under at %s:%d; want the physical position ld.go:6, not the directive's", u.File, u.Line)
	}
	if u.Directive == nil || filepath.Base(u.Directive.File) != "parser.y" || u.Directive.Line != 40 {
		t.Errorf("Under: directive %v; want parser.y:40", u.Directive)
	}

	// The file changed since the index: whether a directive applies is
	// unknown, and said so.
	if err := os.WriteFile(filepath.Join(dir, "ld.go"), []byte(lineSrc+"// edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	syms, err = indexer.FileSymbols(ctx, db, "ld.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Directive != nil || s.DirectiveUnknown == "" {
			t.Errorf("%s after the file changed: directive %v unknown %q; want unknown with a reason", s.Name, s.Directive, s.DirectiveUnknown)
		}
	}
}
