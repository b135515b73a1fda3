package metrics_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// TestRelPathMatchesTheIndexer: relPath gives every indexed file of real
// modules (test variants and an external test package included) the
// rel_path the indexer records. testdata/fixture and testdata/syntaxerrors
// are read from the indexes the test binary shares (with the metrics,
// which leave the graph's tables as they are).
func TestRelPathMatchesTheIndexer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, dir := range []string{"../indexer/testdata/fixture", "testdata/fixture", "testdata/syntaxerrors"} {
		var db string
		if dir == "../indexer/testdata/fixture" {
			db = filepath.Join(t.TempDir(), "graph.db")
			if _, err := indexer.Index(ctx, indexer.Options{Dir: dir, Tests: true, DBPath: db}); err != nil {
				t.Fatal(err)
			}
		} else {
			db = sharedEnrichedIndex(t, dir).DBPath
		}
		q, err := indexer.OpenDatabase(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		in, err := metrics.Load(ctx, q, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		rows, err := q.QueryContext(ctx, `SELECT id, rel_path FROM files WHERE indexed = 1 AND synthesized = 0`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, rel string
			if err := rows.Scan(&id, &rel); err != nil {
				t.Fatal(err)
			}
			want[id] = rel
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		q.Close()
		if len(want) != len(in.Files) || len(want) == 0 {
			t.Fatalf("%s: %d files with rel_path, %d loaded", dir, len(want), len(in.Files))
		}
		for id, f := range in.Files {
			if got := in.RelPath(f); got != want[id] {
				t.Errorf("%s: relPath(%s) = %q, rel_path %q", dir, id, got, want[id])
			}
		}
	}
}
