package indexer

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// incrementalPlan says what an incremental index re-indexes: the units
// (import paths, with all their variants) whose files or imports changed,
// and every unit importing one of them, transitively. Everything else is
// type-checked without bodies and keeps its body relations from oldDB.
type incrementalPlan struct {
	oldDB    string
	affected map[string]bool // units re-indexed
	strip    *bodyStrip      // files of the other units
	// kept are the package node ids (pkg:<ID>) whose body relations are
	// copied from oldDB.
	kept []string
	// roots are the package IDs the plan was made for.
	roots map[string]bool
}

func (p *incrementalPlan) affectedUnits() []string {
	return slices.Sorted(maps.Keys(p.affected))
}

// signatureOnly reports whether pkg's function bodies are not walked.
func (p *incrementalPlan) signatureOnly(pkg *packages.Package) bool {
	return p != nil && !p.affected[unitOf(pkg.PkgPath, pkg.ForTest)]
}

// matches returns "" when the typed load found the packages the plan was
// made for, and every package that was not re-indexed loaded
// without errors (stripping bodies must not change what the type checker
// reports; it only ever plans for packages that had none).
func (p *incrementalPlan) matches(res *loadResult) string {
	if len(res.roots) != len(p.roots) {
		return "the typed load found other packages than the listing"
	}
	for _, r := range res.roots {
		if !p.roots[r.ID] {
			return "the typed load found package " + r.ID + " the listing did not"
		}
		if p.signatureOnly(r) && (len(r.Errors) > 0 || r.IllTyped) {
			msg := "a dependency is ill-typed"
			if len(r.Errors) > 0 {
				msg = r.Errors[0].Msg
			}
			return "package " + r.ID + " does not type-check without function bodies: " + msg
		}
	}
	return ""
}

// planIncremental compares the listing with the database at dbPath. It
// returns nil (index everything) when the root packages differ or when
// more than half of the units are affected.
func planIncremental(ctx context.Context, dbPath string, l *listing) (*incrementalPlan, string, error) {
	db, err := OpenDatabase(ctx, dbPath)
	if err != nil {
		return nil, "the previous database cannot be read: " + err.Error(), nil
	}
	defer db.Close()

	type oldPkg struct {
		bad     bool // had load errors or was ill-typed
		unit    string
		files   map[string]string
		imports []string
	}
	old := map[string]*oldPkg{}
	rows, err := db.QueryContext(ctx, `SELECT go_id, import_path, coalesce(for_test, ''), error_count + ill_typed FROM packages`)
	if err != nil {
		return nil, "", fmt.Errorf("indexer: read previous packages: %w", err)
	}
	for rows.Next() {
		var id, path, forTest string
		var bad int
		if err := rows.Scan(&id, &path, &forTest, &bad); err != nil {
			rows.Close()
			return nil, "", fmt.Errorf("indexer: read previous packages: %w", err)
		}
		old[id] = &oldPkg{unit: unitOf(path, forTest), files: map[string]string{}, bad: bad > 0}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("indexer: read previous packages: %w", err)
	}
	if len(old) != len(l.roots) {
		return nil, fmt.Sprintf("the package list changed (%d packages before, %d now)", len(old), len(l.roots)), nil
	}
	for id := range l.roots {
		if old[id] == nil {
			return nil, fmt.Sprintf("package %s is new", id), nil
		}
	}
	err = scan(ctx, db, `SELECT p.go_id, f.path, coalesce(f.sha256, '') FROM files f JOIN packages p ON p.id = f.package_id WHERE f.synthesized = 0`,
		func(r *sql.Rows) error {
			var id, path, sum string
			if err := r.Scan(&id, &path, &sum); err != nil {
				return err
			}
			old[id].files[path] = sum
			return nil
		})
	if err != nil {
		return nil, "", err
	}
	err = scan(ctx, db, `SELECT p.go_id, i.imported_id FROM imports i JOIN packages p ON p.id = i.package_id`,
		func(r *sql.Rows) error {
			var id, imp string
			if err := r.Scan(&id, &imp); err != nil {
				return err
			}
			old[id].imports = append(old[id].imports, strings.TrimPrefix(imp, "pkg:"))
			return nil
		})
	if err != nil {
		return nil, "", err
	}

	plan := &incrementalPlan{oldDB: dbPath, affected: map[string]bool{}, strip: &bodyStrip{files: map[string]bool{}, names: l.names}, roots: map[string]bool{}}
	units := map[string]bool{}
	unitRoots := map[string][]string{} // unit -> its root package IDs
	for id, lp := range l.roots {
		plan.roots[id] = true
		units[lp.unit] = true
		unitRoots[lp.unit] = append(unitRoots[lp.unit], id)
		o := old[id]
		slices.Sort(o.imports)
		if o.bad || !maps.Equal(o.files, lp.files) || !slices.Equal(slices.Compact(o.imports), slices.Compact(slices.Clone(lp.imports))) {
			plan.affected[lp.unit] = true
		}
	}
	// Every package importing a package of an affected unit, directly or
	// through packages no pattern matches (k imports d imports a: k's
	// body can call a method d's type promotes from a's), is affected.
	var queue []string
	seen := map[string]bool{}
	for u := range plan.affected {
		queue = append(queue, unitRoots[u]...)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, imp := range l.importers[id] {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			lp, ok := l.roots[imp]
			switch {
			case !ok:
				queue = append(queue, imp)
			case !plan.affected[lp.unit]:
				plan.affected[lp.unit] = true
				queue = append(queue, unitRoots[lp.unit]...)
			}
		}
	}
	if 2*len(plan.affected) > len(units) {
		return nil, fmt.Sprintf("%d of %d packages are affected", len(plan.affected), len(units)), nil
	}
	for id, lp := range l.roots {
		if plan.affected[lp.unit] {
			continue
		}
		plan.kept = append(plan.kept, packageNodeID(id))
		for f := range lp.files {
			plan.strip.files[filepath.Clean(f)] = true
		}
	}
	slices.Sort(plan.kept)
	return plan, "", nil
}

func scan(ctx context.Context, db *sql.DB, q string, f func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("indexer: read previous database: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return fmt.Errorf("indexer: read previous database: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("indexer: read previous database: %w", err)
	}
	return nil
}

// bodyEdgeKinds are the relations found in function bodies.
const bodyEdgeKinds = `'calls', 'calls_dynamic', 'references', 'field_access', 'receiver_method', 'instantiates', 'contains'`

// mergeKept copies, from the previous database attached as "old", what
// the kept packages' function bodies contributed: closure nodes, body
// relations, dynamic call sites, and the dependency nodes they point at.
// Relations that the signatures contribute again are already there and
// are ignored.
func mergeKept(ctx context.Context, tx *sql.Tx, kept []string) error {
	stmts := []string{
		`CREATE TEMP TABLE kept_packages (id TEXT PRIMARY KEY)`,
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("merge previous index: %w", err)
		}
	}
	if err := InsertBatched(ctx, tx, "kept_packages", `INSERT INTO kept_packages (id) VALUES (?)`, len(kept),
		func(i int) []any { return []any{kept[i]} }); err != nil {
		return err
	}
	// Nodes are copied by id and get new seqs; kept edges are mapped from
	// the previous seqs to the new ones through the ids. The dependency
	// and synthesized nodes kept edges point at are copied before the
	// edges; an edge whose end is still missing is an error rather than a
	// relation that vanishes (INSERT OR IGNORE, there for relations the
	// signatures contribute again, would skip it silently).
	const nodeCols = `id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path`
	keptEdges := `SELECT e.src, e.dst, e.kind, e.variant FROM old.edge_rows e JOIN old.nodes n ON n.seq = e.src
			WHERE n.package_id IN (SELECT id FROM kept_packages) AND n.kind IN ('func', 'method', 'closure') AND e.kind IN (` + bodyEdgeKinds + `)`
	for _, s := range []string{
		`INSERT OR IGNORE INTO nodes (` + nodeCols + `) SELECT ` + nodeCols + ` FROM old.nodes
			WHERE kind = 'closure' AND package_id IN (SELECT id FROM kept_packages) ORDER BY id`,
		`INSERT OR IGNORE INTO nodes (` + nodeCols + `) SELECT ` + nodeCols + ` FROM old.nodes o
			WHERE o.origin IN ('dependency', 'synthesized') AND o.kind != 'package' AND o.seq IN (SELECT k.dst FROM (` + keptEdges + `) k) ORDER BY id`,
		`INSERT OR IGNORE INTO edge_rows (src, dst, kind, variant)
			SELECT ns.seq, nd.seq, k.kind, k.variant FROM (` + keptEdges + `) k
			JOIN old.nodes os ON os.seq = k.src JOIN old.nodes od ON od.seq = k.dst
			LEFT JOIN nodes ns ON ns.id = os.id LEFT JOIN nodes nd ON nd.id = od.id`,
		`INSERT INTO dynamic_calls (src, closure, mode, target, expr, signature, file_id, line, col, variant)
			SELECT d.src, d.closure, d.mode, d.target, d.expr, d.signature, d.file_id, d.line, d.col, d.variant
			FROM old.dynamic_calls d JOIN old.nodes n ON n.id = d.src WHERE n.package_id IN (SELECT id FROM kept_packages) ORDER BY d.seq`,
		`INSERT OR IGNORE INTO nodes (` + nodeCols + `) SELECT ` + nodeCols + ` FROM old.nodes o
			WHERE o.kind = 'package' AND o.origin = 'dependency' AND o.id IN (SELECT package_id FROM nodes) ORDER BY id`,
		`UPDATE snapshots SET nodes = (SELECT count(*) FROM nodes), edges = (SELECT count(*) FROM edge_rows)`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("merge previous index: %w", err)
		}
	}
	var dangling int
	var first string
	err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(min(os.id || ' -> ' || od.id || ' (' || k.kind || ')'), '') FROM (`+keptEdges+`) k
			JOIN old.nodes os ON os.seq = k.src JOIN old.nodes od ON od.seq = k.dst
			LEFT JOIN nodes ns ON ns.id = os.id LEFT JOIN nodes nd ON nd.id = od.id
			WHERE ns.seq IS NULL OR nd.seq IS NULL`).Scan(&dangling, &first)
	if err != nil {
		return fmt.Errorf("merge previous index: %w", err)
	}
	if dangling > 0 {
		return fmt.Errorf("merge previous index: %d kept relation(s) end at a declaration the new graph does not have (first %s): a kept package depends on a changed one; index with Reuse off", dangling, first)
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE kept_packages`); err != nil {
		return fmt.Errorf("merge previous index: %w", err)
	}
	return nil
}
