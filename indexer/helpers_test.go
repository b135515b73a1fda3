package indexer_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// requireSameAsFull indexes opts.Dir afresh (no previous database) and
// fails unless got's database has the same rows.
func requireSameAsFull(t *testing.T, opts indexer.Options, got indexer.Snapshot) {
	t.Helper()
	fullOpts := opts
	fullOpts.DBPath = filepath.Join(t.TempDir(), "full.db")
	want, have := dump(t, index(t, fullOpts).DBPath), dump(t, got.DBPath)
	for table := range want {
		if diff := cmp.Diff(want[table], have[table]); diff != "" {
			t.Errorf("table %s differs from a fresh index (Reused %v, FullReason %q) (-fresh +got):\n%s",
				table, got.Reused, got.FullReason, diff)
		}
	}
}

func withMetricsEnrich(opts indexer.Options) indexer.Options {
	opts.Enrich = metrics.Enrich(metrics.Options{})
	opts.EnrichID = metrics.RegistryID()
	return opts
}

// dump renders every table of a graph database in a canonical order, with
// the surrogate keys (nodes.seq, dynamic_calls.seq) and the snapshot's
// bookkeeping left out: the graph, not its numbering.
func dump(t *testing.T, path string) map[string][][]string {
	t.Helper()
	db := openDB(t, path)
	out := map[string][][]string{}
	for table, q := range map[string]string{
		// seq is a surrogate key: the rows, not their numbering, are the graph.
		"nodes":         "SELECT id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path FROM nodes ORDER BY id",
		"edges":         "SELECT * FROM edges ORDER BY src, dst, kind",
		"packages":      "SELECT * FROM packages ORDER BY id",
		"files":         "SELECT * FROM files ORDER BY id",
		"types":         "SELECT * FROM types ORDER BY id",
		"funcs":         "SELECT * FROM funcs ORDER BY id",
		"members":       "SELECT * FROM members ORDER BY id",
		"imports":       "SELECT * FROM imports ORDER BY package_id, import_path",
		"load_errors":   "SELECT package_id, go_id, kind, position, message FROM load_errors ORDER BY 1, 2, 3, 4, 5",
		"dynamic_calls": "SELECT src, closure, mode, target, expr, signature, file_id, line, col, variant FROM dynamic_calls ORDER BY src, line, col",
		"metric_values": "SELECT * FROM metric_values ORDER BY metric, subject",
		"snapshot":      "SELECT id, nodes, edges, packages, files, types, funcs, methods, coverage FROM snapshots",
	} {
		out[table] = queryRows(t, db, q)
	}
	return out
}
