package indexer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	// Registers the "sqlite3" database/sql driver.
	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// writeDatabase writes g, the key and what enrich computes to a temporary
// file next to dbPath, checks it (PRAGMA integrity_check and
// foreign_key_check) while syncing and hashing it, renames it over dbPath
// and returns its SHA-256 hex. On any error the temporary file is removed
// and dbPath is left as it was.
func writeDatabase(ctx context.Context, dbPath string, snap Snapshot, env goEnv, g *graph, enrich EnrichFunc, key contentKey, progress func(string)) (sum string, err error) {
	dir := filepath.Dir(dbPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("indexer: create database directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dbPath)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("indexer: create temporary database in %s: %w", dir, err)
	}
	tmpPath := tmp.Name()
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmpPath)
		return "", fmt.Errorf("indexer: close temporary database %s: %w", tmpPath, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmpPath)
			_ = os.Remove(tmpPath + "-journal")
		}
	}()

	if err := fillDatabase(ctx, tmpPath, snap, env, g, enrich, key, progress); err != nil {
		return "", err
	}
	// The checks read the closed file through a read-only connection while
	// it is synced and hashed: neither changes a byte of it.
	progress("checking (PRAGMA integrity_check, foreign_key_check), syncing and hashing the database")
	var hashErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, hashErr = syncAndHash(tmpPath)
	}()
	checkErr := checkClosedDatabase(ctx, tmpPath)
	<-done
	if checkErr != nil {
		return "", checkErr
	}
	if hashErr != nil {
		return "", hashErr
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("indexer: write %s: %w", dbPath, err)
	}
	if err := os.Chmod(tmpPath, 0o644); err != nil {
		return "", fmt.Errorf("indexer: chmod %s: %w", tmpPath, err)
	}
	if err := os.Rename(tmpPath, dbPath); err != nil {
		return "", fmt.Errorf("indexer: rename %s to %s: %w", tmpPath, dbPath, err)
	}
	// The next index reuses the database only if it still has this
	// SHA-256 (verifyRecordedSHA256). Without the record it indexes in
	// full: a failure here loses time, never correctness.
	recordSHA256(dbPath, sum)
	// The rename is durable once the directory entry is; a directory that
	// cannot be synced (some file systems) does not make the file wrong.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return sum, nil
}

// syncAndHash fsyncs the closed database file and returns its SHA-256 hex.
func syncAndHash(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("indexer: open %s for sync: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("indexer: sync %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fillDatabase creates the schema in path, inserts g in one transaction
// (with what enrich writes), sets the schema version and closes the
// database.
func fillDatabase(ctx context.Context, path string, snap Snapshot, env goEnv, g *graph, enrich EnrichFunc, key contentKey, progress func(string)) (err error) {
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "_journal_mode=MEMORY&_synchronous=OFF"))
	if err != nil {
		return fmt.Errorf("indexer: open database %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("indexer: close database %s: %w", path, cerr)
		}
	}()
	db.SetMaxOpenConns(1)

	// Rows in primary-key order make every B-tree insert an append. A
	// node's seq is its position in id order; edges refer to nodes by seq.
	nodes, seqOf := g.sortedNodes, g.seqOf
	// The edges are numbered and sorted while the nodes are inserted, for
	// edge_rows and for the enrichment (GraphView.EdgeOrder): on the
	// enrichment's goroutine when there is one (a third goroutine took CPU
	// time from the inserts: on golang.org/x/tools the time after the load
	// was 0.635 s with one, 0.595 s without, medians of 12).
	edges := numberEdges(g.edges, seqOf)
	if enrich == nil {
		go edges.run()
	}

	// The enrichment is computed from a copy of the graph while the graph
	// is inserted.
	type enriched struct {
		write func(context.Context, *Tx) error
		err   error
	}
	var fromGraph chan enriched
	if enrich != nil {
		// The view holds the trees until the enrichment drops them. It is
		// copied on the enrichment's goroutine: g is only read from here on.
		syntax := g.syntax
		g.syntax = nil
		fromGraph = make(chan enriched, 1)
		gctx, cancel := context.WithCancel(ctx)
		defer cancel() // on an early return, stop the enrichment
		go func() {
			var w func(context.Context, *Tx) error
			var err error
			defer func() {
				// A defect met in the enrichment is an error of this Index
				// call, not a crash of the process that called it.
				if r := recover(); r != nil {
					w, err = nil, fmt.Errorf("internal error: %v", r)
				}
				fromGraph <- enriched{w, err}
			}()
			edges.run()
			view := g.view(snap)
			view.Syntax = syntax
			view.seq = seqOf
			view.edgeOrder = edges.order
			w, err = enrich(gctx, view)
		}()
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("indexer: open database %s: %w", path, err)
	}
	defer conn.Close()
	// Not bound to ctx: database/sql would roll the transaction back from
	// another goroutine when ctx ends while the driver-level inserts go on
	// outside it. The inserts check ctx between batches instead, and every
	// error path below rolls back.
	sqlTx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("indexer: begin transaction on %s: %w", path, err)
	}
	// The connection closes only once the transaction is over: a path
	// that neither commits nor rolls back would block that close forever.
	defer func() { _ = sqlTx.Rollback() }() // after Commit: ErrTxDone, ignored
	tx := &Tx{tx: sqlTx, conn: conn}
	if err := insertAll(ctx, tx, snap, env, g, nodes, edges); err != nil {
		return fmt.Errorf("indexer: write %s: %w", path, err)
	}
	if err := insertReuseCheck(ctx, tx, snap.InputKey, key); err != nil {
		return fmt.Errorf("indexer: write %s: %w", path, err)
	}
	if fromGraph != nil {
		progress("enriching the database (metrics)")
		r := <-fromGraph
		if r.err == nil {
			r.err = r.write(ctx, tx)
		}
		if r.err != nil {
			return fmt.Errorf("indexer: enrich %s: %w", path, r.err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("indexer: commit %s: %w", path, err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return fmt.Errorf("indexer: set user_version on %s: %w", path, err)
	}
	return nil
}

// checkClosedDatabase runs PRAGMA integrity_check (which must answer
// exactly "ok") and PRAGMA foreign_key_check (which must answer nothing)
// on the closed database at path, each through its own read-only
// connection, concurrently. The integrity check's error comes first when
// both fail.
func checkClosedDatabase(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=ro"))
	if err != nil {
		return fmt.Errorf("indexer: open database %s for checking: %w", path, err)
	}
	defer db.Close()
	fkErr := make(chan error, 1)
	go func() { fkErr <- foreignKeyCheck(ctx, db, path) }()
	ierr := integrityCheck(ctx, db, path)
	ferr := <-fkErr
	if ierr != nil {
		return ierr
	}
	return ferr
}

// integrityCheck runs PRAGMA integrity_check, which must answer exactly
// "ok".
func integrityCheck(ctx context.Context, db *sql.DB, path string) error {
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("indexer: integrity_check on %s: %w", path, err)
	}
	var report []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return fmt.Errorf("indexer: integrity_check on %s: %w", path, err)
		}
		report = append(report, s)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("indexer: integrity_check on %s: %w", path, err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("indexer: integrity_check on %s: %w", path, err)
	}
	if len(report) != 1 || report[0] != "ok" {
		return fmt.Errorf("%w: integrity_check on %s: %s", ErrDatabaseCheck, path, strings.Join(report, "; "))
	}
	return nil
}

// foreignKeyCheck runs PRAGMA foreign_key_check, which must answer
// nothing.
func foreignKeyCheck(ctx context.Context, db *sql.DB, path string) error {
	fk, err := db.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return fmt.Errorf("indexer: foreign_key_check on %s: %w", path, err)
	}
	defer fk.Close()
	var violations []string
	for fk.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int64
		if err := fk.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("indexer: foreign_key_check on %s: %w", path, err)
		}
		violations = append(violations, fmt.Sprintf("%s row %v -> %s", table, rowid.Int64, parent))
	}
	if err := fk.Err(); err != nil {
		return fmt.Errorf("indexer: foreign_key_check on %s: %w", path, err)
	}
	if len(violations) > 0 {
		return fmt.Errorf("%w: foreign_key_check on %s: %d violations, first %s", ErrDatabaseCheck, path, len(violations), violations[0])
	}
	return nil
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

// recordSHA256 writes sum, the database's SHA-256 hex, to sha256Path(dbPath)
// through a temporary file and a rename; on failure it removes any older
// record.
func recordSHA256(dbPath, sum string) {
	path := sha256Path(dbPath)
	tmp, err := os.CreateTemp(filepath.Dir(dbPath), "."+filepath.Base(dbPath)+".tmp-sha256-*")
	if err == nil {
		_, err = tmp.WriteString(sum + "\n")
		if err == nil {
			err = tmp.Chmod(0o644) // as readable as the database
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		// An older record must not outlive the database it describes (it
		// would not match it anyway); what is not a file is left alone.
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode().IsRegular() {
			_ = os.Remove(path)
		}
	}
}

// edgeSeq is an edge_rows row: an edge with its nodes' seqs, and the
// edge's index in the graph's edges.
type edgeSeq struct {
	src, dst      int64
	kind, variant string
	index         int32
}

// numberedEdges are a graph's edges as numberEdges numbers and sorts them:
// rows and err are set once done is closed.
type numberedEdges struct {
	run  func() // numbers, sorts and closes done; call it once
	done chan struct{}
	rows []edgeSeq // by (src, dst, kind): edge_rows' primary key order
	err  error     // an edge names a node that is not in the graph (ErrDatabaseCheck)
}

// numberEdges returns the numbering of edges with their nodes' seqs,
// sorted by (src, dst, kind): its run does the work (once, on the
// goroutine that calls it) and closes done.
func numberEdges(edges []edgeRow, seqOf map[string]int64) *numberedEdges {
	ne := &numberedEdges{done: make(chan struct{})}
	ne.run = func() {
		defer close(ne.done)
		// Until the rows are in place (a panic ends run early).
		ne.err = fmt.Errorf("internal error: the edges were not numbered")
		if len(edges) > math.MaxInt32 {
			ne.err = fmt.Errorf("%w: %d edges, more than this index numbers", ErrDatabaseCheck, len(edges))
			return
		}
		rows := make([]edgeSeq, len(edges))
		for i, e := range edges {
			src, ok1 := seqOf[e.src]
			dst, ok2 := seqOf[e.dst]
			if !ok1 || !ok2 {
				ne.err = fmt.Errorf("%w: %s edge %s -> %s names a node that is not in the graph", ErrDatabaseCheck, e.kind, e.src, e.dst)
				return
			}
			rows[i] = edgeSeq{src, dst, e.kind, e.variant, int32(i)}
		}
		slices.SortFunc(rows, func(a, b edgeSeq) int {
			if c := cmp.Compare(a.src, b.src); c != 0 {
				return c
			}
			if c := cmp.Compare(a.dst, b.dst); c != 0 {
				return c
			}
			return strings.Compare(a.kind, b.kind)
		})
		ne.rows, ne.err = rows, nil
	}
	return ne
}

// order returns the indexes of the edges in the order of rows, waiting
// for them, and false when they could not be numbered.
func (ne *numberedEdges) order() ([]int, bool) {
	<-ne.done
	if ne.err != nil {
		return nil, false
	}
	idx := make([]int, len(ne.rows))
	for i, r := range ne.rows {
		idx[i] = int(r.index)
	}
	return idx, true
}
