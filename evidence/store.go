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
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/assay-audit/assay/internal/filelock"
)

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
