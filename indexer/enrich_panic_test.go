package indexer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestEnrichmentPanicIsAnError: an enrichment that panics while the graph
// is written (Options.Enrich) makes Index return an error naming the
// panic, writes no database, and leaves the process running.
func TestEnrichmentPanicIsAnError(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "out", "graph.db")
	_, err := indexer.Index(context.Background(), indexer.Options{
		Dir: "testdata/fixture", Tests: true, DBPath: db,
		Enrich: func(ctx context.Context, g *indexer.GraphView) (func(context.Context, *indexer.Tx) error, error) {
			panic("enrichment defect")
		},
	})
	if err == nil || !strings.Contains(err.Error(), "internal error: enrichment defect") {
		t.Fatalf("err = %v, want an internal error naming the panic", err)
	}
	if _, serr := os.Stat(db); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a database was left at %s after the failed index (stat: %v)", db, serr)
	}
}
