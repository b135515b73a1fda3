package indexer

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Tx is the transaction Index writes a database in, as an enrichment's
// write function gets it (EnrichFunc): what is written through it is
// covered by the database's checks and SHA-256. InsertBatched inserts
// through it on the SQLite connection directly. Not safe for concurrent
// use; valid only during the write function's call.
type Tx struct {
	tx   *sql.Tx
	conn *sql.Conn // the connection tx runs on
}

// ExecContext runs a statement in the transaction (sql.Tx.ExecContext).
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a query in the transaction (sql.Tx.QueryContext).
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query for one row in the transaction
// (sql.Tx.QueryRowContext).
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement in the transaction
// (sql.Tx.PrepareContext).
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}

// Preparer is what InsertBatched inserts through: a *sql.Tx (or *sql.DB,
// *sql.Conn), or the *Tx Index writes in.
type Preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// insertRows inserts rows with multi-row INSERT statements (up to
// insertBatch rows each): one cgo call per batch instead of per row.
// query is a single-row "INSERT ... VALUES (?, ...)" statement.
func insertRows[T any](ctx context.Context, tx *Tx, table, query string, rows []T, args func(T) []any) error {
	return InsertBatched(ctx, tx, table, query, len(rows), func(i int) []any { return args(rows[i]) })
}

// insertBatch bounds the rows of one multi-row INSERT; with at most 13
// columns it stays far below SQLite's variable limit.
const insertBatch = 256

// InsertBatched executes query, a single-row "INSERT ... VALUES (?, ...)"
// statement, for rows 0..n-1 (args(i) gives row i's values), as multi-row
// INSERT statements of up to insertBatch rows in tx. It is exported for
// packages that write tables into the graph database (metrics). When tx is
// the *Tx Index writes in, the statements run on its SQLite connection
// directly, without database/sql's conversion of every call's arguments;
// otherwise through tx. Values must be nil, string, int, int64, float64,
// bool or a sql.Null of string, int, int64 or float64. args may return
// the same slice every call: its values are copied before the next.
// Errors name table and the first row of the failing batch.
func InsertBatched(ctx context.Context, tx Preparer, table, query string, n int, args func(i int) []any) error {
	head, group, ok := strings.Cut(query, "VALUES")
	if !ok {
		return fmt.Errorf("insert into %s: query has no VALUES clause", table)
	}
	group = strings.TrimSpace(group)
	multiRow := func(k int) string {
		var b strings.Builder
		b.WriteString(head)
		b.WriteString("VALUES ")
		for i := 0; i < k; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(group)
		}
		return b.String()
	}
	// go-sqlite3 binds what it is given and leaves the rest NULL, and
	// database/sql counts only a batch's values: a short or long row
	// would shift every later value silently. Count each row's.
	cols := strings.Count(group, "?")
	if t, ok := tx.(*Tx); ok {
		return t.conn.Raw(func(dc any) error {
			return insertDriver(ctx, dc, table, multiRow, n, cols, args)
		})
	}
	prepare := func(k int) (*sql.Stmt, error) {
		stmt, err := tx.PrepareContext(ctx, multiRow(k))
		if err != nil {
			return nil, fmt.Errorf("prepare insert into %s: %w", table, err)
		}
		return stmt, nil
	}
	var full *sql.Stmt
	defer func() {
		if full != nil {
			full.Close()
		}
	}()
	var vals []any
	for start := 0; start < n; start += insertBatch {
		end := min(start+insertBatch, n)
		vals = vals[:0]
		for i := start; i < end; i++ {
			row := args(i)
			if len(row) != cols {
				return fmt.Errorf("insert into %s (row %d): %d values for %d columns", table, i, len(row), cols)
			}
			for _, v := range row {
				vals = append(vals, plainValue(v))
			}
		}
		stmt := full
		if end-start == insertBatch {
			if full == nil {
				var err error
				if full, err = prepare(insertBatch); err != nil {
					return err
				}
			}
			stmt = full
		} else {
			var err error
			if stmt, err = prepare(end - start); err != nil {
				return err
			}
			defer stmt.Close()
		}
		if _, err := stmt.ExecContext(ctx, vals...); err != nil {
			return fmt.Errorf("insert into %s (rows %d..%d): %w", table, start, end-1, err)
		}
	}
	return nil
}

// insertDriver is InsertBatched on the driver connection dc (go-sqlite3's):
// one argument slice serves every batch, and no per-call conversion runs.
// multiRow(k) is the INSERT statement for k rows. Statements run through
// the driver's Query, not Exec: go-sqlite3 (v1.14.53) binds a query's
// arguments and takes its first step in one cgo call, where Exec crosses
// into C once per bound value; an INSERT is done at that first step.
func insertDriver(ctx context.Context, dc any, table string, multiRow func(k int) string, n, cols int, args func(i int) []any) error {
	conn, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return fmt.Errorf("insert into %s: driver connection %T cannot prepare statements", table, dc)
	}
	prepare := func(k int) (driver.StmtQueryContext, func(), error) {
		stmt, err := conn.PrepareContext(ctx, multiRow(k))
		if err != nil {
			return nil, nil, fmt.Errorf("prepare insert into %s: %w", table, err)
		}
		query, ok := stmt.(driver.StmtQueryContext)
		if !ok {
			stmt.Close()
			return nil, nil, fmt.Errorf("insert into %s: driver statement %T cannot run with a context", table, stmt)
		}
		return query, func() { stmt.Close() }, nil
	}
	var full driver.StmtQueryContext
	var vals []driver.NamedValue
	for start := 0; start < n; start += insertBatch {
		// The index's transaction is not rolled back by database/sql when ctx
		// ends (see fillDatabase): stop here, with ctx's error.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("insert into %s: %w", table, err)
		}
		end := min(start+insertBatch, n)
		vals = vals[:0]
		for i := start; i < end; i++ {
			row := args(i)
			if len(row) != cols {
				return fmt.Errorf("insert into %s (row %d): %d values for %d columns", table, i, len(row), cols)
			}
			for _, v := range row {
				dv, err := driverValue(v)
				if err != nil {
					return fmt.Errorf("insert into %s (row %d): %w", table, i, err)
				}
				vals = append(vals, driver.NamedValue{Ordinal: len(vals) + 1, Value: dv})
			}
		}
		stmt := full
		if end-start == insertBatch && full != nil {
			stmt = full
		} else {
			s, closeStmt, err := prepare(end - start)
			if err != nil {
				return err
			}
			defer closeStmt()
			stmt = s
			if end-start == insertBatch {
				full = s
			}
		}
		rows, err := stmt.QueryContext(ctx, vals)
		if err == nil {
			err = rows.Close()
		}
		if err != nil {
			return fmt.Errorf("insert into %s (rows %d..%d): %w", table, start, end-1, err)
		}
	}
	return nil
}

// driverValue is plainValue for a driver: it refuses what is not a
// driver.Value once plain.
func driverValue(v any) (driver.Value, error) {
	switch v := plainValue(v).(type) {
	case nil:
		return nil, nil
	case string, int64, float64, bool, []byte:
		return v, nil
	default:
		return nil, fmt.Errorf("value of type %T is not an SQLite value", v)
	}
}

// sqlText is s as SQLite takes it: the string, or nil for NULL.
func sqlText(s sql.Null[string]) any {
	if !s.Valid {
		return nil
	}
	return s.V
}

// plainValue turns the nullable and integer types the rows use into the
// driver values they stand for (nil, int64, float64, string), so that
// database/sql passes them on without a conversion through driver.Valuer
// and reflection per value. Other values are returned unchanged.
func plainValue(v any) any {
	switch v := v.(type) {
	case sql.Null[string]:
		if !v.Valid {
			return nil
		}
		return v.V
	case sql.Null[int]:
		if !v.Valid {
			return nil
		}
		return int64(v.V)
	case sql.Null[int64]:
		if !v.Valid {
			return nil
		}
		return v.V
	case sql.Null[float64]:
		if !v.Valid {
			return nil
		}
		return v.V
	case int:
		return int64(v)
	}
	return v
}

// boolInt stores a bool the way the schema documents it: 0 or 1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullBoolInt(b sql.Null[bool]) sql.Null[int] {
	return sql.Null[int]{V: boolInt(b.V), Valid: b.Valid}
}

// insertAll writes every table. Nodes go first so that references
// resolve in insertion order.
func insertAll(ctx context.Context, tx *Tx, snap Snapshot, env goEnv, g *graph, nodes []nodeRow, edges *numberedEdges) (err error) {
	var indexes []string
	for _, stmt := range schemaDDL() {
		// Indexes are built after the rows are in: one sort instead of a
		// B-tree insert per row.
		if strings.HasPrefix(stmt, "CREATE INDEX") {
			indexes = append(indexes, stmt)
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	defer func() {
		if err != nil {
			return
		}
		for _, stmt := range indexes {
			if _, ierr := tx.ExecContext(ctx, stmt); ierr != nil {
				err = fmt.Errorf("create index: %w", ierr)
				return
			}
		}
	}()
	if err := insertSnapshot(ctx, tx, snap, env, g); err != nil {
		return err
	}

	// nodes are in id order: a node's seq is its position (nodeSeqs). The
	// values are given as SQLite takes them, in one slice reused for every
	// row (InsertBatched copies them).
	nodeVals := make([]any, 12)
	err = InsertBatched(ctx, tx, "nodes",
		`INSERT INTO nodes (seq, id, kind, name, package_id, file_id, start_line, start_col, end_line, end_col, origin, object_path)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, len(nodes),
		func(i int) []any {
			n, r := &nodes[i], nodeVals
			r[0], r[1], r[2], r[3], r[4], r[5] = int64(i+1), n.id, n.kind, sqlText(n.name), sqlText(n.packageID), sqlText(n.fileID)
			r[6], r[7], r[8], r[9] = nil, nil, nil, nil
			if n.pos != nil {
				r[6], r[7], r[8], r[9] = int64(n.pos.startLine), int64(n.pos.startCol), int64(n.pos.endLine), int64(n.pos.endCol)
			}
			r[10], r[11] = n.origin, sqlText(n.objectPath)
			return r
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "packages",
		`INSERT INTO packages (id, go_id, import_path, name, dir, module_path, module_version, module_dir, module_main, variant, for_test, ill_typed, error_count)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, g.packages,
		func(p packageRow) []any {
			return []any{p.id, p.goID, p.importPath, p.name, p.dir, p.modulePath, p.moduleVersion, p.moduleDir,
				nullBoolInt(p.moduleMain), p.variant, p.forTest, boolInt(p.illTyped), p.errorCount}
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "files",
		`INSERT INTO files (id, package_id, path, rel_path, name, is_test, generated, synthesized, compiled, indexed, sha256, size_bytes, lines)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sortedByID(g.files, func(r fileRow) string { return r.id }),
		func(f fileRow) []any {
			return []any{f.id, f.packageID, f.path, f.relPath, f.name, boolInt(f.isTest), nullBoolInt(f.generated),
				boolInt(f.synthesized), boolInt(f.compiled), boolInt(f.indexed), f.sha256, f.sizeBytes, f.lines}
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "types",
		`INSERT INTO types (id, package_id, name, type_kind, exported, type_params, resolved) VALUES (?, ?, ?, ?, ?, ?, ?)`, sortedByID(g.types, func(r typeRow) string { return r.id }),
		func(t typeRow) []any {
			return []any{t.id, t.packageID, t.name, t.typeKind, boolInt(t.exported), t.typeParams, boolInt(t.resolved)}
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "funcs",
		`INSERT INTO funcs (id, package_id, name, is_method, receiver, receiver_type_name, receiver_pointer, receiver_type_id, exported, type_params, signature, resolved)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, sortedByID(g.funcs, func(r funcRow) string { return r.id }),
		func(f funcRow) []any {
			return []any{f.id, f.packageID, f.name, boolInt(f.isMethod), f.receiver, f.receiverTypeName,
				nullBoolInt(f.receiverPointer), f.receiverTypeID, boolInt(f.exported), f.typeParams, f.signature, boolInt(f.resolved)}
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "imports",
		`INSERT INTO imports (package_id, import_path, imported_id, imported_indexed) VALUES (?, ?, ?, ?)`, g.imports,
		func(i importRow) []any {
			return []any{i.packageID, i.importPath, i.importedID, boolInt(i.importedIndexed)}
		})
	if err != nil {
		return err
	}
	// An edge is a relation, not an occurrence: g.edges is deduplicated.
	<-edges.done
	if edges.err != nil {
		return edges.err
	}
	edgeVals := make([]any, 4)
	err = InsertBatched(ctx, tx, "edge_rows",
		`INSERT INTO edge_rows (src, dst, kind, variant) VALUES (?, ?, ?, ?)`, len(edges.rows),
		func(i int) []any {
			e, r := &edges.rows[i], edgeVals
			r[0], r[1], r[2], r[3] = e.src, e.dst, e.kind, e.variant
			return r
		})
	if err != nil {
		return err
	}
	err = insertRows(ctx, tx, "members",
		`INSERT INTO members (id, type_id, package_id, name, kind, embedded, exported) VALUES (?, ?, ?, ?, ?, ?, ?)`, sortedByID(g.members, func(r memberRow) string { return r.id }),
		func(m memberRow) []any {
			return []any{m.id, m.typeID, m.packageID, m.name, m.kind, boolInt(m.embedded), boolInt(m.exported)}
		})
	if err != nil {
		return err
	}
	dseq := 0
	err = insertRows(ctx, tx, "dynamic_calls",
		`INSERT INTO dynamic_calls (seq, src, closure, mode, target, expr, signature, file_id, line, col, variant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, g.dynamicCalls,
		func(d dynamicCallRow) []any {
			dseq++
			return []any{dseq, d.src, d.closure, d.mode, d.target, d.expr, d.signature, d.fileID, d.line, d.col, d.variant}
		})
	if err != nil {
		return err
	}
	seq := 0
	return insertRows(ctx, tx, "load_errors",
		`INSERT INTO load_errors (seq, package_id, go_id, kind, position, file, line, col, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, g.loadErrors,
		func(e loadErrorRow) []any {
			seq++
			return []any{seq, e.packageID, e.goID, e.kind, e.position, e.file, e.line, e.col, e.message}
		})
}

// nodeSeqs returns every node row sorted by id, and each node's seq: its
// position in that order, from 1.
func nodeSeqs(g *graph) ([]nodeRow, map[string]int64) {
	nodes := g.allNodes()
	slices.SortFunc(nodes, func(a, b nodeRow) int { return strings.Compare(a.id, b.id) })
	seqOf := make(map[string]int64, len(nodes))
	for i, n := range nodes {
		seqOf[n.id] = int64(i + 1)
	}
	return nodes, seqOf
}

func insertSnapshot(ctx context.Context, tx *Tx, snap Snapshot, env goEnv, g *graph) error {
	modulePaths, err := json.Marshal(nonNil(snap.ModulePaths))
	if err != nil {
		return fmt.Errorf("encode module paths: %w", err)
	}
	patterns, err := json.Marshal(nonNil(snap.Patterns))
	if err != nil {
		return fmt.Errorf("encode patterns: %w", err)
	}
	tags, err := json.Marshal(nonNil(snap.Tags))
	if err != nil {
		return fmt.Errorf("encode build tags: %w", err)
	}
	var dirty sql.Null[int]
	if snap.VCSRevision != "" {
		dirty = valid(boolInt(snap.VCSDirty))
	}
	c := snap.Counts
	_, err = tx.ExecContext(ctx, `INSERT INTO snapshots (
		id, schema_version, root_dir, module_paths, vcs_revision, vcs_dirty, go_version, goos, goarch, cgo_enabled, goflags,
		tool_version, tests, patterns, packages, files, types, funcs, methods, imports, load_errors, packages_with_errors,
		packages_ill_typed, unmatched_patterns, packages_matched, packages_ok, coverage, build_tags, nodes, edges, input_key,
		config_key, incremental, reindexed
	) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		snap.ID, SchemaVersion, snap.Dir, string(modulePaths), nonEmpty(snap.VCSRevision), dirty, env.GoVersion, env.GOOS,
		env.GOARCH, env.CGOEnabled, env.GOFLAGS, nonEmpty(snap.ToolVersion), boolInt(snap.Tests), string(patterns),
		c.Packages, c.Files, c.Types, c.Funcs, c.Methods, c.Imports, c.LoadErrors, c.PackagesWithErrors,
		c.PackagesIllTyped, c.UnmatchedPatterns, g.matched(), g.ok(), snap.Coverage, string(tags), c.Nodes, c.Edges, snap.InputKey,
		"", 0, nil) // config_key, incremental, reindexed: no incremental index (issue 21)
	if err != nil {
		return fmt.Errorf("insert snapshot: %w", err)
	}
	return nil
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sortedByID returns a copy of rows sorted by id: inserted in primary-key
// order, every insert into the table's id index is an append.
func sortedByID[T any](rows []T, id func(T) string) []T {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return out
}
