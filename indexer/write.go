package indexer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// enrichment's goroutine when there is one, since a third goroutine
	// takes CPU time from the inserts (docs/performance.md).
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
