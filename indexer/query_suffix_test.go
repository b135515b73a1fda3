package indexer_test

import (
	"context"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestQueryResolveClosuresAndFieldsBySuffix: closures and fields can be
// named by a unique suffix like other declarations (a bad-input pass found
// only their full ids worked), and a short type name stays unique when
// fields share it: declarations are searched before closures and fields.
func TestQueryResolveClosuresAndFieldsBySuffix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"go.mod": "module example.com/sfx\n\ngo 1.22\n",
		"p/p.go": "package p\n\ntype Name struct{}\n\ntype T struct {\n\tkids []int\n\tName Name\n}\n\n" +
			"func (t *T) Len() int { return len(t.kids) }\n\nfunc F() int {\n\tg := func() int { return 1 }\n\treturn g()\n}\n",
	})
	snap := index(t, indexer.Options{Dir: dir, Env: []string{"GOPROXY=off"}})
	db, err := indexer.OpenDatabase(context.Background(), snap.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for symbol, want := range map[string]string{
		"T.kids": "field:example.com/sfx/p.T.kids",
		"p.F$1":  "func:example.com/sfx/p.F$1",
		"F$1":    "func:example.com/sfx/p.F$1",
		"Name":   "type:example.com/sfx/p.Name",
		"T.Name": "field:example.com/sfx/p.T.Name",
	} {
		got, err := indexer.ResolveSymbol(context.Background(), db, symbol)
		if err != nil || got != want {
			t.Errorf("ResolveSymbol(%q) = %q, %v; want %q", symbol, got, err, want)
		}
	}
}
