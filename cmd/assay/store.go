package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// StoreMigrateOptions are the parsed flags of `assay store migrate`.
type StoreMigrateOptions struct {
	IO     IOStreams
	Store  storeFlags
	Format string
	Wait   time.Duration
}

// NewCmdStore builds `assay store` and its subcommand `migrate`.
func NewCmdStore(io IOStreams, runF func(context.Context, *StoreMigrateOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Maintain the evidence store",
	}
	opts := &StoreMigrateOptions{IO: io}
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Upgrade an evidence store written by an older assay to the current schema",
		Long: longHelp("0 migrated (or already current) and every run verifies or is unfinalized; 1 when a run does not verify "+
			"or the store could not be written; 2 on bad input: no store, not a store, a newer schema, a store another "+
			"process holds.",
			fmt.Sprintf("Upgrade the evidence store in place to schema version %d, the one this assay writes, holding the "+
				"writer lock, in one transaction: a failed migration leaves the file as it was. Reading a store never migrates "+
				"it; other commands refuse an older store and point here. Runs finalized under an older schema keep the "+
				"terminal hash they were finalized with, so they verify as before; every run is verified after migrating and "+
				"the result printed. What each migration does: docs/cli.md.", evidence.SchemaVersion)),
		Example: `  assay store migrate --out assay-out
  assay store migrate --store old/evidence.duckdb --wait 30s --format json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runStoreMigrate(c.Context(), opts)
		},
	}
	opts.Store.register(migrate)
	migrate.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	migrate.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for another process holding the store (e.g. 30s)")
	cmd.AddCommand(migrate)
	return cmd
}

func runStoreMigrate(ctx context.Context, opts *StoreMigrateOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	res, err := evidence.Migrate(ctx, opts.Store.path(), evidence.OpenOptions{Wait: opts.Wait, Command: "assay store migrate"})
	if err != nil {
		return err
	}
	if format == "json" {
		res.Steps, res.Verification, res.Interrupted = nonNilSlice(res.Steps), nonNilSlice(res.Verification), nonNilSlice(res.Interrupted)
		if err := writeJSON(opts.IO.Out, res); err != nil {
			return err
		}
	} else {
		if res.From == res.To {
			fmt.Fprintf(opts.IO.Out, "%s is already at schema version %d\n", res.Path, res.To)
		} else {
			fmt.Fprintf(opts.IO.Out, "migrated %s from schema version %d to %d\n", res.Path, res.From, res.To)
			for _, s := range res.Steps {
				fmt.Fprintf(opts.IO.Out, "  %s\n", s)
			}
		}
		for _, r := range res.Interrupted {
			fmt.Fprintf(opts.IO.Out, "run %s was left open by an earlier writer: recorded as interrupted\n", r)
		}
		t := table{header: []string{"RUN", "STATUS", "DETAIL"}}
		for _, v := range res.Verification {
			t.rows = append(t.rows, []string{v.RunID, v.Status, v.Detail})
		}
		if err := t.writeText(opts.IO.Out); err != nil {
			return err
		}
	}
	if bad := res.Unverified(); len(bad) > 0 {
		return failed("migrated, but run %s does not verify: %s", bad[0].RunID, bad[0].Status)
	}
	return nil
}
