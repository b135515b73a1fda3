package indexer_test

import (
	"context"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

func TestQueryDynamicCallSitePosition(t *testing.T) {
	db := lookupDB(t)
	_, dyn, err := indexer.Callees(context.Background(), db, "method:example.com/look/cobra.Command.runHooks")
	if err != nil {
		t.Fatal(err)
	}
	// h.Run() goes to the interface method (an edge); f() has no target.
	// A site's position is its opening parenthesis.
	if len(dyn) != 1 || dyn[0].Expr != "f" || dyn[0].CallLine != 8 || dyn[0].CallCol != 3 || dyn[0].Src.Line != 6 || dyn[0].CallFile != "cobra/hooks.go" {
		t.Fatalf("dynamic sites of runHooks = %+v; want f() with its ( at cobra/hooks.go:8:3 in a declaration at line 6", dyn)
	}
}
