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
	"strconv"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

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
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		what := "a directory"
		if !fi.IsDir() {
			what = "not a regular file"
		}
		return true, fmt.Errorf("evidence: %s is %s, not a DuckDB database: %w", s.path, what, ErrNotStore)
	}
	var hdr [12]byte
	if n, err := io.ReadFull(f, hdr[:]); err != nil {
		return true, fmt.Errorf("evidence: %s is not a DuckDB database (%d bytes, shorter than its header): %w", s.path, n, ErrNotStore)
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

// SmallStoreBytes is the size of a store file, in bytes (256 MiB), below
// which (and for a store not yet written) the store is opened with one DuckDB
// thread (DuckDB's `threads` setting = 1); a larger store keeps DuckDB's default
// of one thread per core for its scans. The stores of a matrix run are small:
// on them DuckDB's worker pool costs more than it saves. Measured on the 2-core
// CI machine: opening, verifying and closing a 14 MB two-run store took 30-35%
// less CPU with one thread, writing a run of 50 events and finalizing it 35-40%
// less; the reports/audit tests 57 -> 41 CPU-s. What a store holds and how it
// is checked do not depend on the setting.
const SmallStoreBytes = 256 << 20

// dsn is the DuckDB data source name the store opens: its path, with
// access_mode=read_only for a reader and threads=1 for a small store
// (SmallStoreBytes).
func (s *Store) dsn() string {
	var params []string
	if s.readOnly {
		params = append(params, "access_mode=read_only")
	}
	if fi, err := os.Stat(s.path); err != nil || fi.Size() < SmallStoreBytes {
		params = append(params, "threads=1")
	}
	if len(params) == 0 {
		return s.path
	}
	return s.path + "?" + strings.Join(params, "&")
}

func (s *Store) openDB(ctx context.Context, migrating bool) error {
	dsn := s.dsn()
	var init func(driver.ExecerContext) error
	if s.readOnly && !s.exporting {
		init = lockDownConnection
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
