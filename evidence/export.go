package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/assay-audit/assay/internal/digest"
)

// ExportOptions controls ExportParquet.
type ExportOptions struct {
	Wait    time.Duration // how long to wait for a writer holding the store (OpenOptions.Wait)
	Command string        // recorded as the reader's command
	// Runs restricts the export to these runs (and the artifacts, writers and
	// meta rows they need); empty exports everything.
	Runs []string
}

// ExportedTable is one Parquet file ExportParquet wrote.
type ExportedTable struct {
	Table  string `json:"table"`
	File   string `json:"file"`   // file name inside the export directory, "<table>.parquet"
	Rows   int64  `json:"rows"`   // rows written
	SHA256 string `json:"sha256"` // of the file
}

// ExportResult is what ExportParquet wrote: the directory, one entry per
// table, and the index file "export.json" holding the same list.
type ExportResult struct {
	Dir           string          `json:"dir"`
	SchemaVersion int             `json:"schema_version"`
	Runs          []string        `json:"runs"` // the run filter; empty = all
	Tables        []ExportedTable `json:"tables"`
}

// ExportParquet writes every table of the store at path into dir as one
// Parquet file per table (DuckDB COPY ... (FORMAT parquet)), ordered by the
// table's key, plus export.json listing the files, row counts and SHA-256
// digests, so other engines (DuckDB, Spark, Trino, pandas) can query the
// evidence. Payload files of large artifacts stay under artifacts/sha256 and
// are not copied.
//
// dir must not exist or be empty. Files are written into a temporary sibling
// directory that is renamed to dir only when every table is written: a failed
// export leaves nothing that looks complete.
//
// Errors: those of Open (read-only; ErrNoStore when path names no file);
// *FieldError (ErrInvalidArgument) for a malformed run id, an empty dir, or a
// dir that is a non-empty directory or a file; ErrNoRun
// for a named run that does not exist; I/O and DuckDB errors naming the table.
func ExportParquet(ctx context.Context, path, dir string, opts ExportOptions) (ExportResult, error) {
	if dir == "" {
		return ExportResult{}, fieldErr(ErrInvalidArgument, "dir", "is required: name the directory to write the Parquet files into")
	}
	for i, r := range opts.Runs {
		if !validRunID(r) {
			return ExportResult{}, fieldErr(ErrInvalidArgument, fmt.Sprintf("runs[%d]", i), "%q is not a run id", r)
		}
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return ExportResult{}, fieldErr(ErrInvalidArgument, "dir", "%s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ExportResult{}, fieldErr(ErrInvalidArgument, "dir", "%s: %v", dir, err)
	}
	if _, err := statExisting(path); err != nil {
		return ExportResult{}, err
	}
	s, err := openForExport(ctx, path, OpenOptions{Wait: opts.Wait, Command: opts.Command})
	if err != nil {
		return ExportResult{}, err
	}
	defer s.Close()
	if err := s.beginRead(); err != nil {
		return ExportResult{}, err
	}
	defer s.mu.Unlock()
	for _, r := range opts.Runs {
		var n int
		if err := s.conn.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE run_id = ?`, r).Scan(&n); err != nil {
			return ExportResult{}, fmt.Errorf("evidence: export: %w", err)
		}
		if n == 0 {
			return ExportResult{}, fmt.Errorf("evidence: export run %s: %w", r, ErrNoRun)
		}
	}
	tables, err := s.tableKeys(ctx)
	if err != nil {
		return ExportResult{}, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return ExportResult{}, fmt.Errorf("evidence: export: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return ExportResult{}, fmt.Errorf("evidence: export: %w", err)
	}
	defer os.RemoveAll(tmp)
	res := ExportResult{Dir: dir, SchemaVersion: SchemaVersion, Runs: append([]string{}, opts.Runs...), Tables: []ExportedTable{}}
	for _, t := range tables {
		file := t.name + ".parquet"
		sel := "SELECT * FROM " + t.name + exportFilter(t.name, opts.Runs) + " ORDER BY " + t.order
		stmt := fmt.Sprintf("COPY (%s) TO '%s' (FORMAT parquet)", sel, strings.ReplaceAll(filepath.Join(tmp, file), "'", "''"))
		if _, err := s.conn.ExecContext(ctx, stmt); err != nil {
			return ExportResult{}, fmt.Errorf("evidence: export table %s: %w", t.name, err)
		}
		var rows int64
		if err := s.conn.QueryRowContext(ctx, "SELECT count(*) FROM ("+sel+")").Scan(&rows); err != nil {
			return ExportResult{}, fmt.Errorf("evidence: export table %s: %w", t.name, err)
		}
		sum, err := digest.File(filepath.Join(tmp, file))
		if err != nil {
			return ExportResult{}, fmt.Errorf("evidence: export table %s: %w", t.name, err)
		}
		res.Tables = append(res.Tables, ExportedTable{Table: t.name, File: file, Rows: rows, SHA256: sum})
	}
	index, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return ExportResult{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "export.json"), append(index, '\n'), 0o644); err != nil {
		return ExportResult{}, fmt.Errorf("evidence: export: %w", err)
	}
	_ = os.Remove(dir) // an empty directory may be replaced
	if err := os.Rename(tmp, dir); err != nil {
		return ExportResult{}, fmt.Errorf("evidence: export: install %s: %w", dir, err)
	}
	return res, nil
}

type tableKey struct{ name, order string }

// tableKeys lists the store's tables with the ORDER BY that makes their
// export deterministic (the primary key, else every column).
func (s *Store) tableKeys(ctx context.Context) ([]tableKey, error) {
	rows, err := s.conn.QueryContext(ctx, `SELECT t.table_name,
			coalesce((SELECT array_to_string(c.constraint_column_names, ', ') FROM duckdb_constraints() c
				WHERE c.table_name = t.table_name AND c.schema_name = 'main' AND c.constraint_type = 'PRIMARY KEY' LIMIT 1), '')
		FROM duckdb_tables() t WHERE t.database_name = current_database() AND t.schema_name = 'main' ORDER BY t.table_name`)
	if err != nil {
		return nil, fmt.Errorf("evidence: export: list tables: %w", err)
	}
	defer rows.Close()
	var out []tableKey
	for rows.Next() {
		var k tableKey
		if err := rows.Scan(&k.name, &k.order); err != nil {
			return nil, fmt.Errorf("evidence: export: list tables: %w", err)
		}
		if k.order == "" {
			k.order = "ALL"
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// exportFilter restricts a table to runs (validated run ids).
func exportFilter(table string, runs []string) string {
	if len(runs) == 0 {
		return ""
	}
	list := "'" + strings.Join(runs, "', '") + "'"
	switch table {
	case "meta":
		return ""
	case "artifacts":
		return " WHERE digest IN (SELECT digest FROM run_artifacts WHERE run_id IN (" + list + "))"
	case "writers":
		return " WHERE writer_id IN (SELECT writer_id FROM runs WHERE run_id IN (" + list + ")) OR writer_id IN (SELECT writer_id FROM run_status_changes WHERE run_id IN (" + list + "))"
	default:
		return " WHERE run_id IN (" + list + ")"
	}
}
