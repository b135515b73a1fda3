package indexer_test

import (
	"context"
	"slices"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

func TestQueryFileSymbolsCarryTheirVariant(t *testing.T) {
	db := lookupDB(t)
	syms, err := indexer.FileSymbols(context.Background(), db, "cobra/command.go")
	if err != nil {
		t.Fatal(err)
	}
	variants := map[string][]string{}
	for _, s := range syms {
		variants[s.Variant] = append(variants[s.Variant], s.ID)
	}
	if len(variants["base"]) == 0 || len(variants["base"]) != len(variants["test"]) || len(variants) != 2 {
		t.Fatalf("variants of command.go's declarations = %v; want the same declarations in base and test", variants)
	}
	if !slices.Contains(variants["base"], "method:example.com/look/cobra.Command.Execute") ||
		!slices.Contains(variants["test"], "method:example.com/look/cobra [example.com/look/cobra.test].Command.Execute") {
		t.Errorf("variants = %v", variants)
	}

	test, err := indexer.FileSymbols(context.Background(), db, "command_test.go")
	if err != nil || len(test) != 1 || test[0].Variant != "test" || test[0].ID != "func:example.com/look/cobra [example.com/look/cobra.test].TestExecute" {
		t.Fatalf("FileSymbols(command_test.go) = %+v, %v", test, err)
	}
}
