package indexer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestQueryNode: a node is described by its id (kind, module-relative
// file, declaration line); an id the graph lacks is ErrSymbolNotFound.
func TestQueryNode(t *testing.T) {
	t.Parallel()
	db := lookupDB(t)
	n, err := indexer.Node(context.Background(), db, "method:example.com/look/cobra.Command.runHooks")
	if err != nil {
		t.Fatal(err)
	}
	if n.Kind != "method" || n.Name != "runHooks" || n.File != "cobra/hooks.go" || n.Line != 6 {
		t.Errorf("Node = %+v, want method runHooks at cobra/hooks.go:6", n)
	}
	if _, err := indexer.Node(context.Background(), db, "func:example.com/look/cobra.Nope"); !errors.Is(err, indexer.ErrSymbolNotFound) {
		t.Errorf("Node of a missing id: %v, want ErrSymbolNotFound", err)
	}
}

// TestFirstLoadError: the error recorded first, with its position as
// recorded; none in a graph that loaded cleanly.
func TestFirstLoadError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Both graphs are shared indexes, read only.
	broken := sharedIndexOf(t, sharedBroken, nil, indexer.Options{Dir: "testdata/broken", Tests: true})
	db, err := indexer.OpenDatabase(ctx, broken.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pos, msg, ok, err := indexer.FirstLoadError(ctx, db)
	if err != nil || !ok || !strings.HasSuffix(pos, "bad/bad.go:9:9") || !strings.Contains(msg, "not an int") {
		t.Errorf("FirstLoadError = %q, %q, %v, %v; want the type error at bad/bad.go:9:9", pos, msg, ok, err)
	}
	clean := sharedIndexOf(t, sharedFixtureTests, nil, fixtureTestsOptions())
	db2, err := indexer.OpenDatabase(ctx, clean.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, _, ok, err := indexer.FirstLoadError(ctx, db2); ok || err != nil {
		t.Errorf("a clean graph: ok %v, err %v; want no error", ok, err)
	}
}
