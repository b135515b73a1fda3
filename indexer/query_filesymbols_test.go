package indexer_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
)

func TestQueryFileSymbolsByPathSuffix(t *testing.T) {
	db := lookupDB(t)
	ctx := context.Background()

	_, err := indexer.FileSymbols(ctx, db, "main.go")
	var amb *indexer.AmbiguousFileError
	if !errors.As(err, &amb) || !cmp.Equal(amb.Candidates, []string{"cmd/a/main.go", "cmd/b/main.go"}) {
		t.Fatalf("FileSymbols(main.go) = %v; want an *AmbiguousFileError listing cmd/a/main.go and cmd/b/main.go", err)
	}

	for _, tc := range []struct {
		file string
		want []string
	}{
		{"a/main.go", []string{"func:example.com/look/cmd/a.main", "func:example.com/look/cmd/a.run"}},
		{"cmd/b/main.go", []string{"func:example.com/look/cmd/b.main"}},
		{filepath.FromSlash("cmd/b/main.go"), []string{"func:example.com/look/cmd/b.main"}},
		{"hooks.go", []string{"type:example.com/look/cobra.Hook", "imethod:example.com/look/cobra.Hook.Run",
			"method:example.com/look/cobra.Command.runHooks",
			"type:example.com/look/cobra [example.com/look/cobra.test].Hook", "imethod:example.com/look/cobra [example.com/look/cobra.test].Hook.Run",
			"method:example.com/look/cobra [example.com/look/cobra.test].Command.runHooks"}},
	} {
		syms, err := indexer.FileSymbols(ctx, db, tc.file)
		if err != nil {
			t.Fatalf("FileSymbols(%q): %v", tc.file, err)
		}
		var ids []string
		for _, s := range syms {
			ids = append(ids, s.ID)
		}
		if diff := cmp.Diff(tc.want, ids); diff != "" {
			t.Errorf("FileSymbols(%q) ids (-want +got):\n%s", tc.file, diff)
		}
	}

	for _, file := range []string{"ain.go", "d/main.go", "x/cmd/a/main.go", "MAIN.go"} {
		if _, err := indexer.FileSymbols(ctx, db, file); !errors.Is(err, indexer.ErrSymbolNotFound) {
			t.Errorf("FileSymbols(%q) = %v; want ErrSymbolNotFound", file, err)
		}
	}
}
