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
		Long: `Write every table of the evidence store (opened read-only) into DIR as <table>.parquet, using DuckDB's
COPY, plus export.json listing each file with its row count and SHA-256, so the evidence can be queried
by other engines (DuckDB, Spark, Trino, pandas). Name runs to export only them (with the artifacts and
writer records they reference). DIR must not exist or be empty; files are written to a temporary
directory that becomes DIR only when every table is written. Payloads of artifacts above 256 KiB stay
under artifacts/sha256 beside the store.

Exit status: 0 written; 2 on bad input (no store, DIR not empty, unknown run, lock held).`,
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
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	if opts.Parquet == "" {
		return badInput(fmt.Errorf("assay export needs --parquet DIR"))
	}
	res, err := evidence.ExportParquet(ctx, opts.Store.path(), opts.Parquet,
		evidence.ExportOptions{Wait: opts.Wait, Command: "assay export", Runs: opts.Runs})
	if err != nil {
		return badInput(err)
	}
	if opts.Format == "json" {
		return writeJSON(opts.IO.Out, res)
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
