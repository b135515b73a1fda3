package indexer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// ErrSchemaVersion is returned (wrapped in a *SchemaVersionError) when a
// graph database was written with a schema this build does not read.
var ErrSchemaVersion = errors.New("indexer: unsupported graph database schema version")

// SchemaVersionError names the versions of a refused graph database.
type SchemaVersionError struct {
	// Path is the database file.
	Path string
	// Found is the database's PRAGMA user_version.
	Found int
	// Supported is SchemaVersion.
	Supported int
}

func (e *SchemaVersionError) Error() string {
	rel := "older"
	if e.Found > e.Supported {
		rel = "newer"
	}
	return fmt.Sprintf("graph database %s has schema version %d, %s than the version %d this assay reads; re-index it with this assay (or use the assay that wrote it)",
		e.Path, e.Found, rel, e.Supported)
}

// Unwrap makes errors.Is(err, ErrSchemaVersion) hold.
func (e *SchemaVersionError) Unwrap() error { return ErrSchemaVersion }

// OpenDatabase opens a graph database read-only and checks that it is one
// and its schema version. Errors: a wrapped os error when the file is
// missing; ErrNotGraphDatabase (wrapped, naming the path) when the file is
// not SQLite or has no snapshots table (every graph database has one, at
// every schema version); a *SchemaVersionError (errors.Is
// ErrSchemaVersion) when its schema is not SchemaVersion; ErrHotJournal
// (wrapped) when another program's rollback journal lies next to it; a
// wrapped SQLite error when it cannot be read. The caller closes the
// *sql.DB. Safe for concurrent use like any *sql.DB.
func OpenDatabase(ctx context.Context, path string) (*sql.DB, error) {
	if fi, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("indexer: no graph database at %s (write one with 'assay index', or name it with --db or --out): %w", path, err)
		}
		return nil, fmt.Errorf("indexer: open graph database: %w", err)
	} else if fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a directory (name the graph database file, e.g. graph.db, with --db)", ErrNotGraphDatabase, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	// SQLite resolves a symbolic link to the database and looks for the
	// journal beside the file it names.
	resolved := abs
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		resolved = r
	}
	if err := checkNoHotJournal(resolved); err != nil {
		return nil, err
	}
	if walMode(resolved) {
		// SQLite would create -wal and -shm files beside another program's database just to read
		// it; assay index never writes a database in WAL mode, so this is not one of its own.
		return nil, fmt.Errorf("%w: %s is a SQLite database in WAL mode (assay index did not write it)", ErrNotGraphDatabase, path)
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=ro&_query_only=1"))
	if err != nil {
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	not, err := notGraphDatabase(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	if not != "" {
		db.Close()
		return nil, fmt.Errorf("%w: %s %s (assay index did not write it)", ErrNotGraphDatabase, path, not)
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("indexer: read schema version of %s: %w", path, err)
	}
	if v != SchemaVersion {
		db.Close()
		return nil, &SchemaVersionError{Path: path, Found: v, Supported: SchemaVersion}
	}
	return db, nil
}

// ReadSnapshot returns the snapshot recorded in the graph database at path
// (DBSHA256 is the file's current SHA-256). Errors as OpenDatabase, and a
// wrapped error when the snapshot row is missing or malformed.
func ReadSnapshot(ctx context.Context, path string) (Snapshot, error) {
	db, err := OpenDatabase(ctx, path)
	if err != nil {
		return Snapshot{}, err
	}
	defer db.Close()
	s, err := readSnapshot(ctx, db, path)
	if err != nil {
		return Snapshot{}, err
	}
	if s.DBSHA256, err = fileSHA256(path); err != nil {
		return Snapshot{}, err
	}
	return s, nil
}

// readSnapshot reads the snapshot row of the graph database db, opened
// from path (Snapshot.DBPath); DBSHA256 is left empty.
func readSnapshot(ctx context.Context, db *sql.DB, path string) (Snapshot, error) {
	var (
		s                       Snapshot
		modules, patterns, tags string
		rev, tool               sql.NullString
		dirty                   sql.NullInt64
		tests                   int
		c                       = &s.Counts
		matched, ok             int
	)
	err := db.QueryRowContext(ctx, `SELECT id, root_dir, module_paths, vcs_revision, vcs_dirty, go_version, goos, goarch,
		cgo_enabled, tool_version, tests, patterns, build_tags, input_key, coverage, nodes, edges, packages, files, types,
		funcs, methods, imports, load_errors, packages_with_errors, packages_ill_typed, unmatched_patterns,
		packages_matched, packages_ok FROM snapshots`).Scan(
		&s.ID, &s.Dir, &modules, &rev, &dirty, &s.GoVersion, &s.GOOS, &s.GOARCH, &s.CGOEnabled, &tool, &tests,
		&patterns, &tags, &s.InputKey, &s.Coverage, &c.Nodes, &c.Edges, &c.Packages, &c.Files, &c.Types, &c.Funcs,
		&c.Methods, &c.Imports, &c.LoadErrors, &c.PackagesWithErrors, &c.PackagesIllTyped, &c.UnmatchedPatterns,
		&matched, &ok)
	if err != nil {
		return Snapshot{}, fmt.Errorf("indexer: read snapshot of %s: %w", path, err)
	}
	s.VCSRevision, s.VCSDirty = rev.String, dirty.Valid && dirty.Int64 == 1
	s.ToolVersion, s.Tests = tool.String, tests == 1
	for _, f := range []struct {
		raw string
		dst *[]string
	}{{modules, &s.ModulePaths}, {patterns, &s.Patterns}, {tags, &s.Tags}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return Snapshot{}, fmt.Errorf("indexer: decode snapshot of %s: %w", path, err)
		}
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM load_errors WHERE kind = ?", ExcludedByBuildContext).
		Scan(&c.PackagesExcluded); err != nil {
		return Snapshot{}, fmt.Errorf("indexer: read excluded packages of %s: %w", path, err)
	}
	s.DBPath = path
	return s, nil
}

// fileSHA256 returns the SHA-256 hex of the file at path.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ErrNotGraphDatabase is returned (wrapped, naming the path) when a file that is not a graph
// database is given as one: by OpenDatabase (and so by every reader) for a file that is not SQLite
// or has no snapshots table, and by Index when DBPath names an existing file that is not a graph
// database: indexing replaces the file, and it must never replace an evidence store, a source file
// or anyone else's database.
var ErrNotGraphDatabase = errors.New("indexer: not a graph database")

// ErrHotJournal is returned (wrapped, naming both files) when something lies at DBPath+"-journal"
// other than an empty file: the rollback journal another program left when it stopped while writing
// the database (a "hot journal", sqlite.org/atomiccommit.html section 4.2). SQLite applies such a
// journal to the database at its next read-write open; assay opens graph databases read-only and
// writes new ones beside them, so it would never apply it, and it does not delete it. A reader
// (OpenDatabase) refuses the database, whose content may be half of that program's transaction;
// Index refuses to replace it, since SQLite would later apply the journal to the new file.
var ErrHotJournal = errors.New("indexer: a rollback journal lies next to the graph database")

// walMode reports whether the file at path is a SQLite database whose header says WAL mode (file
// format read and write versions 2, bytes 18 and 19: https://www.sqlite.org/fileformat.html#the_database_header).
func walMode(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [20]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return false
	}
	return string(hdr[:16]) == "SQLite format 3\x00" && (hdr[18] == 2 || hdr[19] == 2)
}

// checkNoHotJournal returns ErrHotJournal when path+"-journal" exists and is not an empty regular
// file (SQLite ignores an empty journal).
func checkNoHotJournal(path string) error {
	journal := path + "-journal"
	fi, err := os.Lstat(journal)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return nil
	}
	return fmt.Errorf("%w: %s is next to %s (a program was writing the database and did not finish; SQLite would apply the journal at the next write); assay neither applies nor deletes it: find what wrote it, move it away and run again",
		ErrHotJournal, journal, path)
}

// sqliteMagic is the first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html).
const sqliteMagic = "SQLite format 3\x00"

// notGraphDatabase returns why the SQLite file opened as db is not a graph database ("is not an
// SQLite database", "has no snapshots table"), or "" when it has the snapshots table every graph
// database has had since schema version 1. An error is one reading it for another reason.
func notGraphDatabase(ctx context.Context, db *sql.DB) (string, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").Scan(&n)
	var se sqlite3.Error
	switch {
	case errors.As(err, &se) && se.Code == sqlite3.ErrNotADB:
		return "is not an SQLite database", nil
	case err != nil:
		return "", err
	case n == 0:
		return "has no snapshots table", nil
	}
	return "", nil
}

// checkReplaceable refuses a DBPath that exists and is not a graph database written by this
// package: not a regular file, not SQLite, or SQLite without a snapshots table; and any DBPath
// with another program's rollback journal beside it (ErrHotJournal). An empty file or a missing
// path is fine.
func checkReplaceable(ctx context.Context, path string) error {
	if err := checkNoHotJournal(path); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file; refusing to replace it", ErrNotGraphDatabase, path)
	}
	if fi.Size() == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	head := make([]byte, len(sqliteMagic))
	_, rerr := io.ReadFull(f, head)
	f.Close()
	if rerr != nil || string(head) != sqliteMagic {
		return fmt.Errorf("%w: %s is not an SQLite database; refusing to replace it", ErrNotGraphDatabase, path)
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=ro&_query_only=1"))
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	defer db.Close()
	not, err := notGraphDatabase(ctx, db)
	if err != nil {
		return fmt.Errorf("%w: %s: %v; refusing to replace it", ErrNotGraphDatabase, path, err)
	}
	if not != "" {
		return fmt.Errorf("%w: %s %s; refusing to replace it", ErrNotGraphDatabase, path, not)
	}
	return nil
}
