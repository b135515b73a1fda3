package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// ExportOptions are the parsed flags of `assay export`.
type ExportOptions struct {
	IO      IOStreams
	Store   storeFlags
	Parquet string
	Runs    []string
	Format  string
	Wait    time.Duration
}

// NewCmdExport builds `assay export --parquet DIR`.
func NewCmdExport(io IOStreams, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "export --parquet DIR [RUN...]",
		Short: "Export the evidence store as one Parquet file per table",
		Long: longHelp("0 written; 1 when it could not be written or the store could not be read; 2 on bad input: no store, "+
			"no --parquet, DIR not empty, an unknown run, a store a writer holds.",
			fmt.Sprintf("Write every table of the evidence store (opened read-only) into DIR as <table>.parquet with "+
				"DuckDB's COPY, plus export.json listing each file with its row count and SHA-256, so other engines can query "+
				"the evidence. Named runs are exported alone, with the artifacts and writer records they reference. DIR must "+
				"not exist or be empty; it appears only once every table is written. Artifact payloads above %d KiB stay "+
				"under artifacts/sha256 beside the store. Reference: docs/cli.md.", evidence.InlineLimit>>10)),
		Example: `  assay export --parquet evidence-parquet
  assay export --out assay-out --parquet /tmp/run1 run-20261130t101500-0a1b2c3d4e5f`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runExport(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.Parquet, "parquet", "", "directory to write the Parquet files into (required)")
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runExport(ctx context.Context, opts *ExportOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	res, err := evidence.ExportParquet(ctx, opts.Store.path(), opts.Parquet,
		evidence.ExportOptions{Wait: opts.Wait, Command: "assay export", Runs: opts.Runs})
	if err != nil {
		return err
	}
	if format == "json" {
		// The store's schema version is named as such: schema_version is the output's (docs/json.md).
		return writeJSON(opts.IO.Out, struct {
			Dir                string                   `json:"dir"`
			StoreSchemaVersion int                      `json:"store_schema_version"`
			Runs               []string                 `json:"runs"`
			Tables             []evidence.ExportedTable `json:"tables"`
		}{res.Dir, res.SchemaVersion, nonNilSlice(res.Runs), nonNilSlice(res.Tables)})
	}
	t := table{header: []string{"TABLE", "ROWS", "FILE", "SHA256"}}
	for _, x := range res.Tables {
		t.rows = append(t.rows, []string{x.Table, fmt.Sprint(x.Rows), x.File, x.SHA256})
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "wrote %d Parquet files and export.json to %s\n", len(res.Tables), res.Dir)
	return nil
}
