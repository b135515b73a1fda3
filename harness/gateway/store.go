package gateway

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" database/sql driver

	"github.com/assay-audit/assay/internal/filelock"
	"github.com/assay-audit/assay/internal/sqliteuri"
)

// SchemaVersion is the version of the usage database layout, kept in the meta
// table under the key "schema_version".
// Version 2 added requests.answered_model; Start migrates a version 1 database in place (the
// column is ” for the rows recorded before: the answered model was not read then).
// Version 3 admits usage_state 'suspect_zero' (a rebuild of the requests table: SQLite cannot
// alter a CHECK constraint); rows recorded before keep their state.
const SchemaVersion = "3"

// ErrSchemaVersion is returned (wrapped, with the path and both versions) by
// Start when the usage database was written with a different SchemaVersion.
var ErrSchemaVersion = errors.New("gateway: usage database schema version mismatch")

// ErrDatabaseInUse is returned (wrapped, with the path) by Start when another
// gateway holds the usage database: the gateway assigns record ids itself (at
// request arrival), which needs a single owner per database file. The lock is
// an flock(2) on the file DBPath+".lock" (internal/filelock: something other
// than a lock file at that path is refused with filelock.ErrUnusablePath).
var ErrDatabaseInUse = errors.New("gateway: usage database is in use by another gateway")

// timeLayout stores StartedAt as fixed-width UTC text so that text order is
// time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// requestsDDL creates the requests table under the name given to Sprintf.
const requestsDDL = `CREATE TABLE %s (
	id                INTEGER PRIMARY KEY,
	session_id        TEXT    NOT NULL,
	method            TEXT    NOT NULL,
	path              TEXT    NOT NULL,
	model             TEXT    NOT NULL,
	stream            INTEGER NOT NULL CHECK (stream IN (0, 1)),
	status            INTEGER NOT NULL,
	latency_ms        REAL    NOT NULL,
	request_sha256    TEXT    NOT NULL,
	response_sha256   TEXT    NOT NULL,
	request_bytes     INTEGER NOT NULL,
	response_bytes    INTEGER NOT NULL,
	usage_state       TEXT    NOT NULL CHECK (usage_state IN ('reported', 'unknown', 'suspect_zero')),
	prompt_tokens     INTEGER,
	completion_tokens INTEGER,
	total_tokens      INTEGER,
	cached_tokens     INTEGER,
	reasoning_tokens  INTEGER,
	relay_error       TEXT    NOT NULL,
	started_at        TEXT    NOT NULL,
	answered_model    TEXT    NOT NULL DEFAULT '',
	response_decoded_sha256 TEXT NOT NULL DEFAULT '',
	echoed_session    TEXT    NOT NULL DEFAULT ''
) STRICT;`

var schemaSQL = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
` + strings.Replace(fmt.Sprintf(requestsDDL, "requests"), "CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1) + `
CREATE INDEX IF NOT EXISTS requests_session ON requests (session_id, id);
`

// requestColumns are the requests table's columns, in DDL order.
const requestColumns = `id, session_id, method, path, model, stream, status, latency_ms,
		request_sha256, response_sha256, request_bytes, response_bytes,
		usage_state, prompt_tokens, completion_tokens, total_tokens, cached_tokens, reasoning_tokens,
		relay_error, started_at, answered_model, response_decoded_sha256, echoed_session`

// migrateRequestsV3 rebuilds the requests table of a version 2 database with the version 3 CHECK
// constraint, keeping every row and id.
const migrateRequestsV3 = `
DROP INDEX IF EXISTS requests_session;
ALTER TABLE requests RENAME TO requests_v2;
` + "%s" + `
INSERT INTO requests (` + requestColumns + `) SELECT ` + requestColumns + ` FROM requests_v2;
DROP TABLE requests_v2;
CREATE INDEX requests_session ON requests (session_id, id);
`

// store is the SQLite usage database: one writer connection (WAL mode, so
// readers never block it) and a read-only pool for queries. Safe for
// concurrent use.
type store struct {
	path   string
	lock   *filelock.Lock
	w      *sql.DB
	r      *sql.DB
	lastID atomic.Int64 // highest record id handed out

	queue      chan pendingRow // rows for the writer goroutine (startWriter)
	insertStmt *sql.Stmt       // insertSQL prepared on the writer connection (the writer goroutine's)
	writerDone chan struct{}
}

// reserveID hands out the id of a request that has just arrived, so that ids
// follow arrival order even though rows are written when responses end.
func (s *store) reserveID() int64 { return s.lastID.Add(1) }

// openStore opens or creates the database at path and checks its schema
// version.
func openStore(ctx context.Context, path string) (*store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: usage database path %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("gateway: usage database directory for %s: %w", abs, err)
	}
	lock, err := filelock.Acquire(ctx, abs+".lock", filelock.Options{Command: "gateway"})
	var held *filelock.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w: %s (lock file %s, %s)", ErrDatabaseInUse, abs, held.Path, held.Holder())
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: lock usage database %s: %w", abs, err)
	}
	s, err := openLocked(ctx, abs)
	if err != nil {
		return nil, errors.Join(err, lock.Release())
	}
	s.lock = lock
	return s, nil
}

func openLocked(ctx context.Context, abs string) (*store, error) {
	w, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=rwc&_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=10000&_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("gateway: open usage database %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1) // the single writer
	w.SetConnMaxIdleTime(0)
	s := &store{path: abs, w: w}
	if err := s.migrate(ctx); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	r, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=ro&_busy_timeout=10000"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gateway: open usage database %s for reading: %w", abs, err), w.Close())
	}
	r.SetMaxOpenConns(4)
	s.r = r
	var last int64
	if err := w.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM requests`).Scan(&last); err != nil {
		return nil, errors.Join(fmt.Errorf("gateway: usage database %s: last record id: %w", abs, err), s.close())
	}
	s.lastID.Store(last)
	return s, nil
}

func (s *store) migrate(ctx context.Context) error {
	var mode string
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("gateway: usage database %s: %w", s.path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("gateway: usage database %s: journal mode is %q, want wal", s.path, mode)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("gateway: usage database %s: begin schema: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("gateway: usage database %s: create schema: %w", s.path, err)
	}
	var got string
	err = tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema_version', ?)`, SchemaVersion); err != nil {
			return fmt.Errorf("gateway: usage database %s: write schema version: %w", s.path, err)
		}
	case err != nil:
		return fmt.Errorf("gateway: usage database %s: read schema version: %w", s.path, err)
	case got == "1" || got == "2":
		if got == "1" {
			for _, col := range []string{"answered_model", "response_decoded_sha256", "echoed_session"} {
				if _, err := tx.ExecContext(ctx, `ALTER TABLE requests ADD COLUMN `+col+` TEXT NOT NULL DEFAULT ''`); err != nil {
					return fmt.Errorf("gateway: usage database %s: migrate to schema version 2: %w", s.path, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(migrateRequestsV3, fmt.Sprintf(requestsDDL, "requests"))); err != nil {
			return fmt.Errorf("gateway: usage database %s: migrate to schema version 3: %w", s.path, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'schema_version'`, SchemaVersion); err != nil {
			return fmt.Errorf("gateway: usage database %s: write schema version: %w", s.path, err)
		}
	case got != SchemaVersion:
		return fmt.Errorf("%w: %s has version %q, this gateway writes %q", ErrSchemaVersion, s.path, got, SchemaVersion)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("gateway: usage database %s: commit schema: %w", s.path, err)
	}
	return nil
}

// insertSQL writes one row of the requests table; its arguments are insertArgs.
const insertSQL = `INSERT INTO requests (` + requestColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertArgs are insertSQL's arguments for rec, in requestColumns order.
func insertArgs(rec *Record) []any {
	return []any{rec.ID, rec.SessionID, rec.Method, rec.Path, rec.Model, rec.Stream, rec.Status, rec.LatencyMS,
		rec.RequestSHA256, rec.ResponseSHA256, rec.RequestBytes, rec.ResponseBytes,
		rec.UsageState, nullable(rec.PromptTokens), nullable(rec.CompletionTokens), nullable(rec.TotalTokens),
		nullable(rec.CachedTokens), nullable(rec.ReasoningTokens),
		rec.RelayError, rec.StartedAt.UTC().Format(timeLayout), rec.AnsweredModel, rec.ResponseDecodedSHA256, rec.EchoedSession}
}

// insertRow writes rec under its reserved rec.ID through stmt (insertSQL prepared on the writer,
// or that statement bound to one of its transactions).
func insertRow(ctx context.Context, stmt *sql.Stmt, path string, rec *Record) error {
	if _, err := stmt.ExecContext(ctx, insertArgs(rec)...); err != nil {
		return fmt.Errorf("record %d (%s %s of session %q) in %s: %w", rec.ID, rec.Method, rec.Path, rec.SessionID, path, err)
	}
	return nil
}

func nullable(v *int64) sql.NullInt64 {
	if v == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *v, Valid: true}
}

func fromNullable(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	n := v.Int64
	return &n
}

// records returns the rows of session (or of every session starting with it,
// when prefix is set), ordered by id.
func (s *store) records(ctx context.Context, session string, prefix bool) ([]Record, error) {
	where := `session_id = ?1`
	if prefix {
		// substr, not LIKE: session ids may contain % and _.
		where = `substr(session_id, 1, length(?1)) = ?1`
	}
	return s.query(ctx, fmt.Sprintf("session %q", session), where, session)
}

// recordsIn returns the rows with after < id <= upTo, of any session, ordered by id.
func (s *store) recordsIn(ctx context.Context, after, upTo int64) ([]Record, error) {
	return s.query(ctx, fmt.Sprintf("ids %d..%d", after+1, upTo), `id > ?1 AND id <= ?2`, after, upTo)
}

func (s *store) query(ctx context.Context, what, where string, args ...any) ([]Record, error) {
	const cols = requestColumns
	rows, err := s.r.QueryContext(ctx, `SELECT `+cols+` FROM requests WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("gateway: query records of %s in %s: %w", what, s.path, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var (
			rec                                          Record
			prompt, completion, total, cached, reasoning sql.NullInt64
			started                                      string
		)
		if err := rows.Scan(&rec.ID, &rec.SessionID, &rec.Method, &rec.Path, &rec.Model, &rec.Stream, &rec.Status, &rec.LatencyMS,
			&rec.RequestSHA256, &rec.ResponseSHA256, &rec.RequestBytes, &rec.ResponseBytes,
			&rec.UsageState, &prompt, &completion, &total, &cached, &reasoning,
			&rec.RelayError, &started, &rec.AnsweredModel, &rec.ResponseDecodedSHA256, &rec.EchoedSession); err != nil {
			return nil, fmt.Errorf("gateway: scan record of %s in %s: %w", what, s.path, err)
		}
		rec.PromptTokens = fromNullable(prompt)
		rec.CompletionTokens = fromNullable(completion)
		rec.TotalTokens = fromNullable(total)
		rec.CachedTokens = fromNullable(cached)
		rec.ReasoningTokens = fromNullable(reasoning)
		t, err := time.Parse(timeLayout, started)
		if err != nil {
			return nil, fmt.Errorf("gateway: record %d in %s: started_at %q is not a time in the stored form (UTC, nanoseconds: 2026-12-02T15:04:05.000000000Z)", rec.ID, s.path, started)
		}
		rec.StartedAt = t.UTC()
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("gateway: read records of %s in %s: %w", what, s.path, err)
	}
	return out, nil
}

func (s *store) close() error {
	s.stopWriter()
	var errs []error
	if s.r != nil {
		if err := s.r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("gateway: close usage database reader %s: %w", s.path, err))
		}
	}
	if err := s.w.Close(); err != nil {
		errs = append(errs, fmt.Errorf("gateway: close usage database %s: %w", s.path, err))
	}
	if s.lock != nil {
		if err := s.lock.Release(); err != nil {
			errs = append(errs, fmt.Errorf("gateway: unlock usage database %s: %w", s.path, err))
		}
	}
	return errors.Join(errs...)
}

// ErrNotGatewayDB is returned (wrapped, with the path) by ReadDatabase for a
// file that is not a gateway usage database (not SQLite, or without the meta
// and requests tables and a schema_version).
var ErrNotGatewayDB = errors.New("gateway: not a gateway usage database")

// ReadDatabase returns every record of the usage database at path, ordered by
// ID, reading the rows themselves (read-only, as ReadRecords: it never creates,
// migrates or locks anything, so it can read the database of a gateway that is
// serving).
//
// Errors: one wrapping fs.ErrNotExist when path does not exist; ErrNotGatewayDB
// when the file is not a usage database; ErrSchemaVersion when its version is
// neither 2 nor SchemaVersion (a version 1 database is migrated by opening it
// with Start); database errors.
func ReadDatabase(ctx context.Context, path string) ([]Record, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: usage database path %q: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("gateway: usage database %s: %w", abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrNotGatewayDB, abs)
	}
	db, err := sql.Open("sqlite3", sqliteuri.ReadOnlyFile(abs))
	if err != nil {
		return nil, fmt.Errorf("gateway: open usage database %s: %w", abs, err)
	}
	defer db.Close()
	var version string
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&version); err != nil {
		// Not SQLite ("file is not a database"), no meta table, or no version row.
		return nil, fmt.Errorf("%w: %s: %v", ErrNotGatewayDB, abs, err)
	}
	if !readableVersion(version) {
		return nil, fmt.Errorf("%w: %s has version %q, this reader reads \"2\" and %q", ErrSchemaVersion, abs, version, SchemaVersion)
	}
	s := &store{path: abs, r: db}
	recs, err := s.query(ctx, "every session", `1 = 1`)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotGatewayDB, err)
	}
	return recs, nil
}

// pendingRow is a record waiting for the writer; done is called once it is written (nil) or not.
type pendingRow struct {
	rec  *Record
	done func(error)
}

// maxBatchRows bounds how many rows the writer commits in one transaction.
const maxBatchRows = 256

// startWriter starts the goroutine that writes enqueued rows, many per transaction: a request's
// handler only hands its row over, so a client does not wait for SQLite, and under concurrency
// one commit covers many requests.
func (s *store) startWriter() {
	s.queue = make(chan pendingRow, 4*maxBatchRows)
	s.writerDone = make(chan struct{})
	go func() {
		defer close(s.writerDone)
		batch := make([]pendingRow, 0, maxBatchRows)
		for first := range s.queue {
			batch = append(batch[:0], first)
		drain:
			for len(batch) < maxBatchRows {
				select {
				case p, ok := <-s.queue:
					if !ok {
						break drain
					}
					batch = append(batch, p)
				default:
					break drain
				}
			}
			s.writeBatch(batch)
		}
	}()
}

// enqueue hands rec to the writer; done is called from the writer goroutine.
func (s *store) enqueue(rec *Record, done func(error)) { s.queue <- pendingRow{rec: rec, done: done} }

// stopWriter writes every row enqueued and stops the writer. No enqueue may follow.
func (s *store) stopWriter() {
	if s.queue == nil {
		return
	}
	close(s.queue)
	<-s.writerDone
	s.queue = nil
	if s.insertStmt != nil {
		_ = s.insertStmt.Close() // only frees it; every row it wrote is committed
		s.insertStmt = nil
	}
}

// writeBatch writes batch in one transaction; when that fails, each row on its own, so that one
// bad row loses only itself. A row's statement is prepared once (insertStmt): SQLite re-prepares
// it by itself if the schema changes under it.
func (s *store) writeBatch(batch []pendingRow) {
	ctx := context.Background() // a row is written even when its client has left
	if s.insertStmt == nil {
		stmt, err := s.w.PrepareContext(ctx, insertSQL)
		if err != nil {
			err = fmt.Errorf("prepare insert in %s: %w", s.path, err)
			for _, p := range batch {
				p.done(err)
			}
			return
		}
		s.insertStmt = stmt
	}
	if len(batch) > 1 {
		if err := s.insertTx(ctx, batch); err == nil {
			for _, p := range batch {
				p.done(nil)
			}
			return
		}
	}
	for _, p := range batch {
		p.done(insertRow(ctx, s.insertStmt, s.path, p.rec))
	}
}

func (s *store) insertTx(ctx context.Context, batch []pendingRow) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	stmt := tx.StmtContext(ctx, s.insertStmt)
	for _, p := range batch {
		if err := insertRow(ctx, stmt, s.path, p.rec); err != nil {
			return err
		}
	}
	return tx.Commit()
}
