package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// SQLOptions are the parsed flags of `assay sql`.
type SQLOptions struct {
	IO     IOStreams
	Store  storeFlags
	Format string
	Query  string
}

// NewCmdSQL builds `assay sql QUERY`.
func NewCmdSQL(io IOStreams, runF func(context.Context, *SQLOptions) error) *cobra.Command {
	opts := &SQLOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "sql QUERY",
		Short: "Query the evidence store with SQL (read-only)",
		Long: `Run one SQL statement against the DuckDB evidence store, opened read-only. Statements that would write —
INSERT, UPDATE, CREATE, COPY ... TO, ATTACH, INSTALL, LOAD — are refused by the read-only connection
and its locked configuration, not by parsing your SQL. Tables: runs, envelopes, events, artifacts,
run_artifacts, usage, usage_verdicts, checks, verdicts, checkpoints (see docs/evidence-schema.md).`,
		Example: `  assay sql "SELECT run_id, verdict FROM verdicts"
  assay sql --format json "SELECT member_id, source, state, total_tokens FROM usage"`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return badInput(fmt.Errorf("assay sql takes exactly one QUERY argument, got %d", len(args)))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Query = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runSQL(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table, csv or json")
	return cmd
}

func runSQL(ctx context.Context, opts *SQLOptions) error {
	if err := checkFormat(opts.Format, "table", "csv", "json"); err != nil {
		return err
	}
	store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Command: "assay sql"})
	if err != nil {
		return badInput(err)
	}
	defer store.Close()
	res, err := store.Query(ctx, opts.Query)
	if err != nil {
		return badInput(fmt.Errorf("query refused or failed: %w", err))
	}
	if opts.Format == "json" {
		out := make([]map[string]any, 0, len(res.Rows))
		for _, row := range res.Rows {
			m := map[string]any{}
			for i, c := range res.Columns {
				m[c] = jsonValue(row[i])
			}
			out = append(out, m)
		}
		return writeJSON(opts.IO.Out, out)
	}
	t := table{header: res.Columns}
	for _, row := range res.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = textValue(v)
		}
		t.rows = append(t.rows, cells)
	}
	if opts.Format == "csv" {
		return t.writeCSV(opts.IO.Out)
	}
	return t.writeText(opts.IO.Out)
}

// textValue renders a scanned SQL value; NULL prints as NULL, never as 0 or "".
func textValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return "\\x" + hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(x)
	}
}

// jsonValue makes a scanned SQL value JSON-encodable; NULL stays null.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	default:
		return x
	}
}
