package evidence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Damage is structural harm to the store found by Verify: a table missing,
// unexpected or of another shape, a lost key constraint with duplicate keys
// behind it, a table whose blocks cannot be read, or a file shorter than the
// database it holds. Damage is reported as VerifyDamaged, never as a raw
// database error, and Verify goes on where it can.
type Damage struct {
	Table  string // the table concerned; "" for the file as a whole
	Row    string // the key of the row concerned, e.g. "run_id=r1, seq=3"; "" for the whole table
	RunID  string // the run the row belongs to, when its key names one
	Reason string // what is wrong
}

// engineReason returns the database engine's message without the driver's
// prefixes, on one line, for use in parentheses after assay's own words.
func engineReason(err error) string {
	msg := err.Error()
	var de *duckdb.Error
	if errors.As(err, &de) {
		msg = de.Msg
	}
	msg = strings.TrimPrefix(msg, "database/sql/driver: ")
	msg = strings.TrimPrefix(msg, "could not connect to database: ")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}

// isStorageDamage reports whether err is the engine failing to read the
// file (I/O, checksum, deserialization), as opposed to a refused statement.
func isStorageDamage(err error) bool {
	var de *duckdb.Error
	if errors.As(err, &de) {
		switch de.Type {
		case duckdb.ErrorTypeIO, duckdb.ErrorTypeSerialization, duckdb.ErrorTypeFatal, duckdb.ErrorTypeInternal:
			return true
		}
	}
	msg := err.Error()
	for _, s := range []string{"IO Error", "Corrupt database file", "Serialization Error", "INTERNAL Error", "FATAL Error",
		"Could not read enough bytes", "Could not read from file", "not a valid DuckDB database file", "checksum"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// isLockConflict reports whether err is DuckDB refusing the file because
// another process holds it.
func isLockConflict(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not set lock on file") || strings.Contains(msg, "Conflicting lock")
}

// openError classifies DuckDB's refusal to open the file: another process
// holding it (*LockedError), a damaged file (*DamagedError), or anything
// else, wrapped.
func (s *Store) openError(err error) error {
	switch {
	case isLockConflict(err):
		return &LockedError{Path: s.path}
	case isStorageDamage(err):
		return &DamagedError{Path: s.path, Reason: fmt.Sprintf("the database cannot be opened: truncated or corrupt (%s)", engineReason(err))}
	}
	return fmt.Errorf("evidence: open %s: %w", s.path, err)
}

// tableShape is a table as the catalog describes it: its columns (name, type
// and nullability, in order) and its key and check constraints.
type tableShape struct {
	columns     []string
	keys        [][]string // PRIMARY KEY and UNIQUE column lists
	constraints []string   // every constraint, as "TYPE(columns) text"
}

func (t tableShape) describeColumns() string { return strings.Join(t.columns, ", ") }

// readShapes reads the shape of every user table in schema main of q's database.
func readShapes(ctx context.Context, q queryer) (map[string]*tableShape, error) {
	out := map[string]*tableShape{}
	rows, err := q.QueryContext(ctx, `SELECT table_name FROM duckdb_tables()
		WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal ORDER BY table_name`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		out[name] = &tableShape{}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	rows, err = q.QueryContext(ctx, `SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal ORDER BY table_name, column_index`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var table, col, typ string
		var nullable bool
		if err := rows.Scan(&table, &col, &typ, &nullable); err != nil {
			rows.Close()
			return nil, err
		}
		if t := out[table]; t != nil {
			c := col + " " + typ
			if !nullable {
				c += " NOT NULL"
			}
			t.columns = append(t.columns, c)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	rows, err = q.QueryContext(ctx, `SELECT table_name, constraint_type, constraint_column_names, coalesce(constraint_text, '')
		FROM duckdb_constraints() WHERE database_name = current_database() AND schema_name = 'main'
		ORDER BY table_name, constraint_index`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var table, typ, text string
		var cols any
		if err := rows.Scan(&table, &typ, &cols, &text); err != nil {
			return nil, err
		}
		t := out[table]
		if t == nil {
			continue
		}
		names, _ := toStrings(cols)
		if typ == "PRIMARY KEY" || typ == "UNIQUE" {
			t.keys = append(t.keys, names)
		}
		if typ != "NOT NULL" {
			t.constraints = append(t.constraints, fmt.Sprintf("%s(%s) %s", typ, strings.Join(names, ", "), text))
		}
	}
	for _, t := range out {
		sort.Strings(t.constraints)
	}
	return out, rows.Err()
}

// expectedShapes returns the shapes of the current schema and each table's CREATE TABLE statement:
// the reference a store's catalog is compared with. The schema is fixed for a build, so it is built
// (in an in-memory database) once per process; callers share the result and must not change it.
var expectedShapes = sync.OnceValues(func() (expectedSchema, error) {
	shapes, ddl, err := buildExpectedShapes(context.Background())
	return expectedSchema{shapes: shapes, ddl: ddl}, err
})

// expectedSchema is the reference expectedShapes returns: the shape of each table of the schema
// and its CREATE TABLE statement, by table name.
type expectedSchema struct {
	shapes map[string]*tableShape
	ddl    map[string]string
}

// buildExpectedShapes builds the current schema in an in-memory database and reads its shapes.
func buildExpectedShapes(ctx context.Context) (map[string]*tableShape, map[string]string, error) {
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ddl := map[string]string{}
	for _, stmt := range schemaDDL() {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, nil, fmt.Errorf("evidence: build the reference schema: %w", err)
		}
		f := strings.Fields(stmt)
		if len(f) > 2 && f[0] == "CREATE" && f[1] == "TABLE" {
			ddl[f[2]] = stmt
		}
	}
	shapes, err := readShapes(ctx, db)
	if err != nil {
		return nil, nil, fmt.Errorf("evidence: read the reference schema: %w", err)
	}
	return shapes, ddl, nil
}

// damageScan compares the store's catalog with the current schema, reads
// every row of every table (DuckDB checks each block's checksum as it reads
// it), looks for duplicate keys where a table lost its key constraint, and
// compares the file's size with the blocks the database says it holds. For
// each missing table it creates an empty temporary stand-in, so the rest of
// Verify can go on; the caller drops them (dropStandIns). Must be called
// with s.mu held.
func (s *Store) damageScan(ctx context.Context) ([]Damage, []string, error) {
	ref, err := expectedShapes()
	if err != nil {
		return nil, nil, err
	}
	want, ddl := ref.shapes, ref.ddl
	var out []Damage
	have, err := readShapes(ctx, s.conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return []Damage{{Reason: fmt.Sprintf("the catalog cannot be read (%s)", engineReason(err))}}, nil, nil
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	var standIns []string
	for _, name := range names {
		w, h := want[name], have[name]
		if h == nil {
			out = append(out, Damage{Table: name, Reason: "the table is missing (dropped or never created): every row it held is gone"})
			stmt := strings.Replace(ddl[name], "CREATE TABLE", "CREATE TEMP TABLE", 1)
			if _, err := s.conn.ExecContext(ctx, stmt); err != nil {
				return nil, nil, fmt.Errorf("evidence: stand in for missing table %s: %w", name, err)
			}
			standIns = append(standIns, name)
			continue
		}
		if got, exp := h.describeColumns(), w.describeColumns(); got != exp {
			out = append(out, Damage{Table: name, Reason: fmt.Sprintf("its columns are (%s), the schema's are (%s)", got, exp)})
		}
		if got, exp := strings.Join(h.constraints, "; "), strings.Join(w.constraints, "; "); got != exp {
			out = append(out, Damage{Table: name, Reason: fmt.Sprintf("its constraints are [%s], the schema's are [%s]: the table was rebuilt", got, exp)})
			dups, err := s.duplicateKeys(ctx, name, w.keys)
			if err != nil {
				return nil, nil, err
			}
			out = append(out, dups...)
		}
	}
	var extra []string
	for n := range have {
		if want[n] == nil {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		out = append(out, Damage{Table: n, Reason: fmt.Sprintf("table %s is not part of schema %d", n, SchemaVersion)})
	}
	// Every row of every table is read in one statement; only when that fails is each table read
	// on its own, to name the tables whose blocks cannot be read.
	var present, reads []string
	for _, name := range names {
		if have[name] != nil {
			present = append(present, name)
			reads = append(reads, `SELECT count(*), bit_xor(hash(t)) FROM "`+name+`" t`)
		}
	}
	if len(reads) > 0 && scanAll(ctx, s.conn, strings.Join(reads, " UNION ALL ")) != nil {
		for i, name := range present {
			if err := scanAll(ctx, s.conn, reads[i]); err != nil {
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				out = append(out, Damage{Table: name, Reason: fmt.Sprintf("its rows cannot be read: a block of the file is corrupt (%s)", engineReason(err))})
			}
		}
	}
	if d := s.sizeDamage(ctx); d != nil {
		out = append(out, *d)
	}
	return out, standIns, nil
}

// scanAll runs query and reads every row it returns, discarding them.
func scanAll(ctx context.Context, q queryer, query string) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// sizeDamage reports a file shorter than the blocks the database says are in
// use (three 4 KiB headers, then used_blocks blocks): truncated. It is a lower
// bound, never a false alarm: DuckDB counts free blocks in total_blocks and
// may leave trailing free blocks out of the file, so total_blocks is no
// measure of the size a whole file has; a truncation this bound misses
// leaves blocks that cannot be read, which the table reads report.
func (s *Store) sizeDamage(ctx context.Context) *Damage {
	var blockSize, used int64
	if err := s.conn.QueryRowContext(ctx, `SELECT block_size, used_blocks FROM pragma_database_size()`).Scan(&blockSize, &used); err != nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return &Damage{Reason: fmt.Sprintf("the file cannot be examined: %v", err)}
	}
	if want := 3*4096 + used*blockSize; fi.Size() < want {
		return &Damage{Reason: fmt.Sprintf("the file is %d bytes, shorter than the %d bytes its %d used blocks need: it was truncated", fi.Size(), want, used)}
	}
	return nil
}

// duplicateKeys lists keys held by more than one row of table, for each of
// keys (column lists), up to 50 per key.
func (s *Store) duplicateKeys(ctx context.Context, table string, keys [][]string) ([]Damage, error) {
	var out []Damage
	for _, key := range keys {
		cols := make([]string, len(key))
		for i, k := range key {
			cols[i] = `CAST("` + k + `" AS VARCHAR)`
		}
		rows, err := s.conn.QueryContext(ctx, `SELECT `+strings.Join(cols, ", ")+`, count(*) FROM "`+table+`" GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL LIMIT 50`)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			out = append(out, Damage{Table: table, Reason: fmt.Sprintf("its keys (%s) cannot be checked (%s)", strings.Join(key, ", "), engineReason(err))})
			continue
		}
		for rows.Next() {
			vals := make([]sql.NullString, len(key))
			var n int64
			dest := make([]any, 0, len(key)+1)
			for i := range vals {
				dest = append(dest, &vals[i])
			}
			dest = append(dest, &n)
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, err
			}
			var parts []string
			d := Damage{Table: table}
			for i, k := range key {
				parts = append(parts, fmt.Sprintf("%s=%s", k, vals[i].String))
				if k == "run_id" {
					d.RunID = vals[i].String
				}
			}
			d.Row = strings.Join(parts, ", ")
			d.Reason = fmt.Sprintf("%d rows hold the key (%s), which is unique in the schema: a row was duplicated", n, d.Row)
			out = append(out, d)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dropStandIns drops the temporary tables damageScan created.
func (s *Store) dropStandIns(ctx context.Context, names []string) {
	for _, n := range names {
		_, _ = s.conn.ExecContext(ctx, `DROP TABLE IF EXISTS temp."`+n+`"`)
	}
}
