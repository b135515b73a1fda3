package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// SQLOptions are the parsed flags of `assay sql`.
type SQLOptions struct {
	IO     IOStreams
	Store  storeFlags
	Format string
	Query  string
	Wait   time.Duration // how long to wait for a writer holding the store; 0 = refuse at once
}

// NewCmdSQL builds `assay sql QUERY`.
func NewCmdSQL(io IOStreams, runF func(context.Context, *SQLOptions) error) *cobra.Command {
	opts := &SQLOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "sql QUERY",
		Short: "Query the evidence store with SQL (read-only)",
		Long: longHelp("0 on success; 1 when the store could not be read; 2 on bad input: no store, a statement refused or "+
			"failing, a store a writer holds.",
			"Run one SQL statement against the DuckDB evidence store, opened read-only: a statement that would write is "+
				"refused by the read-only connection and its locked configuration, not by parsing your SQL. The tables and "+
				"their columns are in docs/evidence-schema.md; docs/queries.md has useful queries. While a writer (assay matrix "+
				"run) holds the store, reading it is refused naming the writer's pid; --wait DURATION waits up to that long "+
				"instead. Reference: docs/cli.md."),
		Example: `  assay sql "SELECT run_id, verdict FROM verdicts"
  assay sql --format json "SELECT member_id, source, state, total_tokens FROM usage_calls"
  assay sql --wait 2m "SELECT run_id, status FROM runs ORDER BY ordinal"`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return argCountError(c, "exactly one QUERY", len(args))
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
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runSQL(ctx context.Context, opts *SQLOptions) error {
	format, err := outputFormat(opts.Format, "table", "csv", "json")
	if err != nil {
		return err
	}
	if strings.TrimSpace(opts.Query) == "" {
		return usageErrorf("the query is empty: give one SQL statement, e.g. assay sql \"SELECT run_id, verdict FROM verdicts\"")
	}
	store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: "assay sql"})
	if err != nil {
		return err
	}
	defer store.Close()
	res, err := store.Query(ctx, opts.Query)
	if err != nil {
		return err
	}
	if format == "json" {
		// Each row is an object keyed by column name: two columns of one name would make it
		// ambiguous which value a reader gets.
		seen := map[string]bool{}
		for _, c := range res.Columns {
			if seen[c] {
				return usageErrorf("--format json: the query has two columns named %q; give each its own name (AS ...), or use --format table or csv", c)
			}
			seen[c] = true
		}
		return writeRowsJSON(opts.IO.Out, res.Columns, res.Rows)
	}
	t := table{header: res.Columns}
	for _, row := range res.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = textValue(v)
		}
		t.rows = append(t.rows, cells)
	}
	if format == "csv" {
		return t.writeCSV(opts.IO.Out)
	}
	return t.writeText(opts.IO.Out)
}

// textValue renders a scanned SQL value for table and CSV output. NULL prints as NULL, never as 0
// or ""; nested values (lists, structs, maps, JSON) print as JSON so their parts stay delimited.
// A string whose text is "NULL" is indistinguishable from NULL here: --format json keeps them apart.
func textValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return "\\x" + hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case duckdb.Decimal:
		return x.String()
	case []any, map[string]any, duckdb.Map:
		b, err := marshalJSON(jsonValue(x))
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	default:
		return fmt.Sprint(x)
	}
}

// jsonValue makes a scanned SQL value JSON-encodable without losing what it is: NULL stays null,
// DECIMAL stays an exact number, NaN and infinities become strings (JSON has no such numbers),
// bytes that are not UTF-8 become hex, nested lists, structs and maps recurse.
func jsonValue(v any) any {
	switch x := v.(type) {
	case []byte:
		if utf8.Valid(x) {
			return string(x)
		}
		return hex.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return x
	case float32:
		return jsonValue(float64(x))
	case duckdb.Decimal:
		return json.Number(x.String())
	case duckdb.Interval:
		return map[string]any{"months": x.Months, "days": x.Days, "micros": x.Micros}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case duckdb.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonValue(e)
		}
		return out
	default:
		return x
	}
}

// writeRowsJSON writes rows as the JSON object of docs/json.md: schema_version, the SELECT's
// columns in order, and rows as objects whose keys are those columns, in the same order (the keys are
// the query's own column names: name them in snake_case with AS to keep the output convention).
func writeRowsJSON(w io.Writer, columns []string, rows [][]any) error {
	var b bytes.Buffer
	cols, err := marshalJSON(columns)
	if err != nil {
		return err
	}
	fmt.Fprintf(&b, "{\n  \"schema_version\": %d,\n  \"columns\": %s,\n  \"rows\": [", jsonSchemaVersion, cols)
	for i, row := range rows {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    {")
		for j, c := range columns {
			if j > 0 {
				b.WriteString(", ")
			}
			k, _ := marshalJSON(c)
			v, err := marshalJSON(jsonValue(row[j]))
			if err != nil {
				return fmt.Errorf("column %s: %w", c, err)
			}
			b.Write(k)
			b.WriteString(": ")
			b.Write(v)
		}
		b.WriteString("}")
	}
	if len(rows) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	_, err = w.Write(b.Bytes())
	return err
}
