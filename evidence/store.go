// Package evidence is assay's DuckDB evidence store: runs and the envelopes
// they are bound to before execution, hash-chained events, content-addressed
// artifacts, usage rows from three sources and their reconciliation, check
// results, verdicts, and finalized traces (terminal hash, event count).
//
// Its worst failure is false acceptance: a run shown as finalized or accepted
// although its stored evidence no longer describes one causal history. So the
// store decides effective verdicts itself (Finalize never accepts on weaker
// evidence than every required check passing in a live run whose evidence
// verifies), refuses every write to a finalized run, chains each run's checks
// and verdict into its own events and each run's admission into a store-wide
// chain, and Verify recomputes the hash chains, terminal hash and artifact
// digests from the stored columns and reports runs that were deleted.
//
// Hashes are SHA-256 over RFC 8785 (JSON Canonicalization Scheme) encodings;
// docs/evidence-schema.md documents every table, column and hashed object.
//
// A store has a single writer: the writing process holds an exclusive flock on
// <path>.lock for the Store's lifetime; readers hold a shared one.
package evidence

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/assay-audit/assay/internal/filelock"
)

// lockRetry is how often a waiting Open retries the lock file.
const lockRetry = 25 * time.Millisecond

// OpenOptions controls how Open takes the store.
type OpenOptions struct {
	// ReadOnly opens the database in DuckDB's read_only access mode under a
	// shared lock; every write method then returns ErrReadOnly.
	ReadOnly bool
	// Wait is how long Open waits for a conflicting lock holder to go away
	// before returning *LockedError; 0 fails at once. A negative Wait is
	// refused (a *FieldError for field "wait").
	Wait time.Duration
	// Command is the holder's command line a writer records in the lock file
	// (e.g. "assay matrix run"), shown to anyone the lock turns away.
	Command string
}

// Store is an open evidence store. All methods are safe for concurrent use:
// they serialize on one mutex over a single DuckDB connection.
type Store struct {
	path     string
	dir      string
	readOnly bool

	mu       sync.Mutex
	closed   bool
	db       *sql.DB
	conn     *sql.Conn      // the one connection every method uses (DuckDB single-writer, Appender needs it raw)
	lock     *filelock.Lock // nil when a reader could not create the lock file (no writer can exist then)
	command  string         // the writer's command as recorded
	writerID int64          // this writer session's writers.writer_id; 0 for a reader and before the first write
	// writerHash is this session's writers.hash, which its closing record chains to.
	writerHash string

	required map[string][]string  // event type -> required payload keys (EventSchemas)
	chains   map[string]chainHead // run id -> cached chain head (writer only)
	hasher   hasher
	// recovered lists the runs this writer session sealed as interrupted.
	recovered []string
	// exporting opens read-only without the SQL lockdown, so the store's own
	// fixed COPY ... TO statements may write Parquet files (ExportParquet).
	exporting bool
	// probing marks the read-only look a writer takes at an existing file
	// before it creates a lock file beside it (probe).
	probing bool
}

// Open opens the evidence store at path (e.g. "assay-out/evidence.duckdb"),
// creating the file, its parent directory and the schema when it is missing and
// opts.ReadOnly is false.
//
// Errors: a missing file opened ReadOnly is a *NoStoreError (ErrNoStore, and
// fs.ErrNotExist); another failure to look the file up wraps the os error; a conflicting
// lock holder yields *LockedError (ErrLocked) after opts.Wait; a file that is
// not a DuckDB database or not an assay store wraps ErrNotStore; a store of
// another schema version yields *SchemaVersionError. ctx bounds the wait for
// the lock and the opening queries.
func Open(ctx context.Context, path string, opts OpenOptions) (*Store, error) {
	return open(ctx, path, opts, false)
}

// openForExport opens path read-only under the shared lock, with file access
// for the store's own COPY statements; no user SQL ever runs on it.
func openForExport(ctx context.Context, path string, opts OpenOptions) (*Store, error) {
	opts.ReadOnly = true
	return openWith(ctx, path, opts, false, true)
}

// open is Open; migrating lets Migrate open a store of an older schema
// version (as a writer) to upgrade it.
func open(ctx context.Context, path string, opts OpenOptions, migrating bool) (*Store, error) {
	return openWith(ctx, path, opts, migrating, false)
}

func openWith(ctx context.Context, path string, opts OpenOptions, migrating, exporting bool) (*Store, error) {
	if path == "" {
		return nil, fieldErr(ErrInvalidArgument, "path", "empty")
	}
	if strings.Contains(path, "?") {
		return nil, fieldErr(ErrInvalidArgument, "path", "%q contains '?', which DuckDB reads as options", path)
	}
	if opts.Wait < 0 {
		return nil, fieldErr(ErrInvalidArgument, "wait", "%s is negative", opts.Wait)
	}
	s := &Store{path: path, dir: filepath.Dir(path), readOnly: opts.ReadOnly, command: opts.Command,
		required: requiredPayloadKeys(), chains: map[string]chainHead{}, exporting: exporting}
	if opts.ReadOnly {
		if _, err := statExisting(path); err != nil {
			return nil, err
		}
	}
	// A file that is there is checked before anything is created beside it,
	// so that opening something that is not a store of this version, or a
	// damaged one, leaves no lock file behind.
	exists, err := s.checkHeader()
	if err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		if _, err := os.Lstat(s.lockPath()); exists && errors.Is(err, fs.ErrNotExist) {
			// No lock file: no assay writer holds the store.
			if err := s.probe(ctx, migrating); err != nil {
				return nil, err
			}
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("evidence: create directory for %s: %w", path, err)
		}
	}
	if err := s.acquireLock(ctx, opts); err != nil {
		return nil, err
	}
	if err := s.openDB(ctx, migrating); err != nil {
		s.releaseLock()
		return nil, err
	}
	return s, nil
}

// Path returns the store path as given to Open.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether the store was opened with OpenOptions.ReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Close closes the database and releases the lock. It is idempotent; the
// first call's error is returned.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.writerID != 0 && s.conn != nil {
		// A clean close: runs this writer left open are later recorded as
		// closed without finalizing, not as crashed.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.recordClose(ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if s.conn != nil {
		if err := s.conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("evidence: close %s: %w", s.path, err))
		}
	}
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("evidence: close %s: %w", s.path, err))
		}
	}
	if err := s.releaseLock(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Store) lockPath() string { return s.path + ".lock" }

// acquireLock takes the exclusive (writer) or shared (reader) lock on
// <path>.lock (internal/filelock), waiting up to opts.Wait; a writer
// records "pid command" in it. A reader in a directory where the lock file
// does not exist and cannot be created goes on without it: no writer can
// hold it either.
func (s *Store) acquireLock(ctx context.Context, opts OpenOptions) error {
	if opts.ReadOnly {
		// A reader creates nothing: without a lock file no assay writer holds
		// the store (a writer creates it before it opens the database), and
		// DuckDB's own file lock refuses a writer that starts meanwhile.
		if _, err := os.Lstat(s.lockPath()); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	l, err := filelock.Acquire(ctx, s.lockPath(), filelock.Options{Shared: opts.ReadOnly, Wait: opts.Wait,
		Retry: lockRetry, Command: opts.Command})
	var held *filelock.HeldError
	switch {
	case err == nil:
		s.lock = l
		return nil
	case opts.ReadOnly && errors.Is(err, filelock.ErrCannotCreate):
		return nil
	case errors.As(err, &held):
		return &LockedError{Path: s.path, PID: held.PID, Command: held.Command}
	}
	return fmt.Errorf("evidence: lock %s: %w", s.path, err)
}

// releaseLock lets go of the lock, emptying the lock file first so that
// nobody is later told a finished process holds the store.
func (s *Store) releaseLock() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Release()
	s.lock = nil
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	return nil
}

// duckdbMagic is the magic number DuckDB writes at byte offset 8 of every
// database file (DuckDB storage format, MainHeader::MAGIC_BYTES).
const duckdbMagic = "DUCK"

// checkHeader refuses an existing file that is not a DuckDB database before
// DuckDB is allowed to touch it. It reports whether the file exists.
func (s *Store) checkHeader() (bool, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("evidence: open %s: %w", s.path, err)
	}
	defer f.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return true, fmt.Errorf("evidence: %s is not a DuckDB database (too short): %w", s.path, ErrNotStore)
	}
	if string(hdr[8:12]) != duckdbMagic {
		return true, fmt.Errorf("evidence: %s is not a DuckDB database: %w", s.path, ErrNotStore)
	}
	return true, nil
}

// probe opens the file read-only, checks it is a store this build may open
// (or, migrating, upgrade), and closes it: nothing is created or written.
func (s *Store) probe(ctx context.Context, migrating bool) error {
	p := &Store{path: s.path, dir: s.dir, readOnly: true, exporting: true, probing: true}
	if err := p.openDB(ctx, migrating); err != nil {
		return err
	}
	_ = p.conn.Close()
	return p.db.Close()
}

func (s *Store) openDB(ctx context.Context, migrating bool) error {
	dsn := s.path
	var init func(driver.ExecerContext) error
	if s.readOnly {
		dsn += "?access_mode=read_only"
		if !s.exporting {
			init = lockDownConnection
		}
	}
	connector, err := duckdb.NewConnector(dsn, init)
	if err != nil {
		return s.openError(err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return s.openError(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("evidence: open %s: %w", s.path, err)
	}
	s.db, s.conn = db, conn
	fail := func(err error) error {
		_ = conn.Close()
		_ = db.Close()
		s.db, s.conn = nil, nil
		return err
	}
	version, err := s.checkSchema(ctx)
	if err != nil {
		return fail(err)
	}
	if version != SchemaVersion && !(migrating && version < SchemaVersion) {
		return fail(&SchemaVersionError{Path: s.path, Found: version, Supported: SchemaVersion})
	}
	if !s.readOnly {
		// DuckDB checkpoints the WAL into the database file once it passes
		// checkpoint_threshold (16 MiB by default), rewriting the events
		// primary-key index each time; with batched appends that made the cost
		// per event grow with the trace. Commits stay durable in the WAL;
		// checkpoints happen at this size and on Close.
		if _, err := conn.ExecContext(ctx, `SET checkpoint_threshold = '256MiB'`); err != nil {
			return fail(fmt.Errorf("evidence: configure %s: %w", s.path, err))
		}
	}
	return nil
}

// startWriter records this writer session and seals every run an earlier
// writer left unfinished. Holding the exclusive lock proves no other writer
// is live, so an open run has nobody left to finish it: it was interrupted
// (its writer crashed, was killed, or closed without finalizing). Each such
// run is recorded interrupted in run_status_changes, then sealed
// (sealInterrupted): finalized rejected with the reason "interrupted", its
// terminal hash fixed and chained into finalizations, keeping status
// interrupted. Its recorded events stay as they were; the seal appends the
// run_finalized event that records the verdict. The session row is chained
// to the previous session and pins the admissions and finalizations chains
// as found. Must be called with s.mu held; everything happens in one
// transaction.
func (s *Store) startWriter(ctx context.Context) error {
	host, _ := os.Hostname()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	defer tx.Rollback()
	w := Writer{PID: int64(os.Getpid()), Command: s.command, Host: host, OpenedAt: utcMicro(time.Now()), PrevHash: ZeroHash}
	if !utf8.ValidString(w.Command) {
		w.Command = strings.ToValidUTF8(w.Command, "\uFFFD")
	}
	if !utf8.ValidString(w.Host) {
		w.Host = strings.ToValidUTF8(w.Host, "\uFFFD")
	}
	var last sql.NullInt64
	var prevHash, prevClose sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT writer_id, hash, close_hash FROM writers ORDER BY writer_id DESC LIMIT 1`).Scan(&last, &prevHash, &prevClose)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	default:
		w.PrevHash = prevHash.String
		if prevClose.Valid && prevClose.String != "" {
			w.PrevHash = prevClose.String
		}
		if !isDigest(w.PrevHash) {
			return fmt.Errorf("evidence: start writer on %s: stored hash of writer %d is not SHA-256 hex; run assay verify", s.path, last.Int64)
		}
	}
	w.WriterID = last.Int64 + 1
	if err := tx.QueryRowContext(ctx, `SELECT coalesce((SELECT min(value) FROM meta WHERE key = 'created_at'), '')`).Scan(&w.StoreCreatedAt); err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	adm, fin, err := logHeads(ctx, tx)
	if err != nil {
		return err
	}
	w.AdmissionsAtOpen, w.FinalizationsAtOpen = &adm, &fin
	if w.Hash, err = WriterHash(w.PrevHash, w); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO writers (writer_id, pid, command, host, opened_at, backfilled,
			admissions_at_open, admissions_head_at_open, finalizations_at_open, finalizations_head_at_open, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, false, ?, ?, ?, ?, ?, ?)`,
		w.WriterID, w.PID, w.Command, w.Host, w.OpenedAt, adm.Size, adm.Head, fin.Size, fin.Head, w.PrevHash, w.Hash); err != nil {
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	orphans, err := unfinishedRuns(ctx, tx)
	if err != nil {
		return fmt.Errorf("evidence: recover open runs in %s: %w", s.path, err)
	}
	s.writerID = w.WriterID // the status changes and seals below are this session's
	var sealed []string
	for _, o := range orphans {
		reason := o.reason
		if o.status == StatusOpen {
			if err := recordStatusChange(ctx, tx, o.runID, StatusOpen, StatusInterrupted, "interrupted: "+reason, w.WriterID, w.OpenedAt); err != nil {
				s.writerID = 0
				return err
			}
		}
		if err := s.sealInterrupted(ctx, tx, o.runID, reason); err != nil {
			s.writerID = 0
			return err
		}
		sealed = append(sealed, o.runID)
	}
	if err := tx.Commit(); err != nil {
		s.writerID = 0
		return fmt.Errorf("evidence: start writer on %s: %w", s.path, err)
	}
	s.writerHash = w.Hash
	s.recovered = sealed
	return nil
}

// unfinishedRun is a run startWriter seals: its status and why it is unfinished.
type unfinishedRun struct {
	runID, status, reason string
}

// unfinishedRuns lists, in creation order, the runs no writer is left to
// finish: status open (every writer before this one has ended), or
// interrupted without a seal (recorded by a writer of schema 2 to 4). A run
// showing any trace of a finalization (terminal hash, event count,
// finalization time, a verdict, a finalizations entry, a run_finalized event)
// is not among them: it was finalized and its status changed since, which
// Verify reports as tampering; sealing it would launder the change.
func unfinishedRuns(ctx context.Context, q queryer) ([]unfinishedRun, error) {
	rows, err := q.QueryContext(ctx, `SELECT r.run_id, r.status, w.writer_id, w.pid, w.command, w.closed_at IS NOT NULL,
			(SELECT c.reason FROM run_status_changes c WHERE c.run_id = r.run_id ORDER BY c.ordinal DESC LIMIT 1)
		FROM runs r LEFT JOIN writers w ON w.writer_id = r.writer_id
		WHERE r.status IN ('open', 'interrupted') AND r.terminal_hash IS NULL AND r.event_count IS NULL AND r.finalized_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.run_id = r.run_id)
			AND NOT EXISTS (SELECT 1 FROM finalizations f WHERE f.run_id = r.run_id)
			AND NOT EXISTS (SELECT 1 FROM events e WHERE e.run_id = r.run_id AND e.type = 'run_finalized')
		ORDER BY r.ordinal`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []unfinishedRun
	for rows.Next() {
		var o unfinishedRun
		var wid, pid sql.NullInt64
		var cmd, last sql.NullString
		var closed sql.NullBool
		if err := rows.Scan(&o.runID, &o.status, &wid, &pid, &cmd, &closed, &last); err != nil {
			return nil, err
		}
		switch {
		case o.status == StatusInterrupted:
			o.reason = strings.TrimPrefix(last.String, "interrupted: ")
			if o.reason == "" {
				o.reason = "recorded interrupted without a reason"
			}
		case wid.Valid:
			how := "ended without closing the store (crashed or killed)"
			if closed.Bool {
				how = "closed the store without finalizing the run"
			}
			o.reason = fmt.Sprintf("writer %d (pid %d, %s) %s", wid.Int64, pid.Int64, cmd.String, how)
		default:
			o.reason = "opened before writer sessions were recorded (schema v1); no writer is live to finish it"
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// recordClose writes this session's closing record: the time, the
// admissions and finalizations chains as the session leaves them, and the
// closing hash chained to the session's hash.
func (s *Store) recordClose(ctx context.Context) error {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	defer tx.Rollback()
	w := Writer{WriterID: s.writerID, Hash: s.writerHash}
	closed := utcMicro(time.Now())
	w.ClosedAt = &closed
	adm, fin, err := logHeads(ctx, tx)
	if err != nil {
		return err
	}
	w.AdmissionsAtClose, w.FinalizationsAtClose = &adm, &fin
	if w.CloseHash, err = WriterCloseHash(w); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE writers SET closed_at = ?, admissions_at_close = ?, admissions_head_at_close = ?,
			finalizations_at_close = ?, finalizations_head_at_close = ?, close_hash = ? WHERE writer_id = ?`,
		closed, adm.Size, adm.Head, fin.Size, fin.Head, w.CloseHash, s.writerID); err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: record clean close in %s: %w", s.path, err)
	}
	return nil
}

// recordStatusChange changes a run's status and records why, without an event.
func recordStatusChange(ctx context.Context, tx *sql.Tx, runID, from, to, reason string, writerID int64, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ? WHERE run_id = ? AND status = ?`, to, runID, from); err != nil {
		return fmt.Errorf("evidence: run %s: %s -> %s: %w", runID, from, to, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_status_changes (run_id, ordinal, from_status, to_status, reason, writer_id, changed_at)
		SELECT ?, coalesce(max(ordinal), 0) + 1, ?, ?, ?, ?, ? FROM run_status_changes WHERE run_id = ?`,
		runID, from, to, reason, writerID, at, runID); err != nil {
		return fmt.Errorf("evidence: run %s: record %s -> %s: %w", runID, from, to, err)
	}
	return nil
}

// StartSession starts this writer's session now rather than at its first
// write: it records the session (chained to the previous one) and seals
// every run an earlier writer left unfinished (see Recovered). It does
// nothing when the session has started. Errors: ErrReadOnly; ErrClosed;
// database errors.
func (s *Store) StartSession(ctx context.Context) error {
	if err := s.beginWrite(ctx); err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Recovered returns the runs this writer session found unfinished and sealed
// as interrupted (in creation order); nil for a reader, and for a writer
// before its first write (startWriter).
func (s *Store) Recovered() []string { return append([]string(nil), s.recovered...) }

// lockDownConnection runs on every connection of a read-only store: no file,
// network or extension access, and no way for a later statement to undo that.
// DuckDB's read_only access mode already refuses writes to the database.
func lockDownConnection(ex driver.ExecerContext) error {
	ctx := context.Background()
	if _, err := ex.ExecContext(ctx, "SET enable_external_access = false", nil); err != nil {
		// The configuration is database-wide: a later connection finds it
		// already locked, which is the state we want.
		var de *duckdb.Error
		if errors.As(err, &de) && strings.Contains(de.Msg, "locked") {
			return nil
		}
		return fmt.Errorf("evidence: disable external access: %w", err)
	}
	if _, err := ex.ExecContext(ctx, "SET lock_configuration = true", nil); err != nil {
		return fmt.Errorf("evidence: lock configuration: %w", err)
	}
	return nil
}

// checkSchema recognises an assay store by its meta table and returns its
// schema version, creating the schema when a writer finds a DuckDB file
// without any tables.
func (s *Store) checkSchema(ctx context.Context) (int, error) {
	rows, err := s.conn.QueryContext(ctx, `SELECT table_name FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = 'main'`)
	if err != nil {
		return 0, fmt.Errorf("evidence: list tables of %s: %w", s.path, err)
	}
	tables := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return 0, fmt.Errorf("evidence: list tables of %s: %w", s.path, err)
		}
		tables[name] = true
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("evidence: list tables of %s: %w", s.path, err)
	}
	if len(tables) == 0 {
		if s.probing {
			return SchemaVersion, nil // a writer creates the schema in an empty database
		}
		if s.readOnly {
			return 0, fmt.Errorf("evidence: %s is an empty DuckDB database: %w", s.path, ErrNotStore)
		}
		return SchemaVersion, s.createSchema(ctx)
	}
	if !tables["meta"] {
		return 0, fmt.Errorf("evidence: %s is a DuckDB database without an assay meta table: %w", s.path, ErrNotStore)
	}
	meta := map[string]string{}
	mrows, err := s.conn.QueryContext(ctx, `SELECT key, value FROM meta`)
	if err != nil {
		return 0, fmt.Errorf("evidence: %s: read meta table: %v: %w", s.path, err, ErrNotStore)
	}
	for mrows.Next() {
		var k, v string
		if err := mrows.Scan(&k, &v); err != nil {
			mrows.Close()
			return 0, fmt.Errorf("evidence: %s: read meta table: %v: %w", s.path, err, ErrNotStore)
		}
		meta[k] = v
	}
	if err := mrows.Close(); err != nil {
		return 0, fmt.Errorf("evidence: %s: read meta table: %w", s.path, err)
	}
	if meta["app"] != appMarker {
		return 0, fmt.Errorf("evidence: %s: meta.app is %q, not %q: %w", s.path, meta["app"], appMarker, ErrNotStore)
	}
	v, err := strconv.Atoi(meta["schema_version"])
	if err != nil {
		return 0, fmt.Errorf("evidence: %s: meta.schema_version %q is not a number: %w", s.path, meta["schema_version"], ErrNotStore)
	}
	if v < 1 {
		return 0, fmt.Errorf("evidence: %s: meta.schema_version %d is not a version: %w", s.path, v, ErrNotStore)
	}
	return v, nil
}

func (s *Store) createSchema(ctx context.Context) error {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: create schema in %s: %w", s.path, err)
	}
	defer tx.Rollback()
	for _, stmt := range schemaDDL() {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("evidence: create schema in %s: %w", s.path, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('app', ?), ('schema_version', ?), ('created_at', ?)`,
		appMarker, strconv.Itoa(SchemaVersion), time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("evidence: create schema in %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: create schema in %s: %w", s.path, err)
	}
	return nil
}

// beginWrite locks the store for a write and checks it may be written. The
// first write of a writer starts its session (startWriter): the session is
// recorded, and interrupted runs sealed, only when something is written, so
// a command that refuses before writing leaves the store as it found it.
func (s *Store) beginWrite(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.readOnly {
		s.mu.Unlock()
		return fmt.Errorf("evidence: %s: %w", s.path, ErrReadOnly)
	}
	if s.writerID == 0 {
		if err := s.startWriter(ctx); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

// beginRead locks the store for a read.
func (s *Store) beginRead() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// statExisting returns the FileInfo of the store file at path: a
// *NoStoreError (ErrNoStore, fs.ErrNotExist) when there is none, the stat
// error naming the path when it cannot be looked up (a path through a file,
// a permission).
func statExisting(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoStoreError{Path: path, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: %s: %w", path, err)
	}
	return fi, nil
}

// inRunTx runs fn in one write transaction on run runID: it takes the writer's lock, refuses a run
// that does not accept writes (writableRun: ErrNoRun, ErrFinalized, ErrRunNotOpen; ErrReadOnly and
// ErrClosed from beginWrite), and commits only when fn returns nil. what names the operation in
// errors, e.g. "record usage".
func (s *Store) inRunTx(ctx context.Context, runID, what string, fn func(tx *sql.Tx) error) error {
	if err := s.beginWrite(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("evidence: %s in run %s: %w", what, runID, err)
	}
	defer tx.Rollback()
	if err := writableRun(ctx, tx, runID); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("evidence: %s in run %s: %w", what, runID, err)
	}
	return nil
}
