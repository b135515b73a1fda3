package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// VerifyOptions are the parsed flags of `assay verify`.
type VerifyOptions struct {
	IO       IOStreams
	Store    storeFlags
	Format   string
	Runs     []string
	Wait     time.Duration
	Manifest string
	Write    bool
}

// NewCmdVerify builds `assay verify [RUN...]`.
func NewCmdVerify(io IOStreams, runF func(context.Context, *VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "verify [RUN...]",
		Short: "Recompute every trace's hash chain and terminal hash; report tampering and deleted runs",
		Long: longHelp("0 when every run verifies; 1 when any does not, none is there to verify, or the store could not be "+
			"read; 2 on bad input: no store, an unusable manifest, --write without --manifest, a store a writer holds.",
			"Recompute, for each run (all runs when none are named), the hash chain of its events, its sequence, event "+
				"count, terminal hash and artifact digests from the bytes the evidence store holds, and compare its checks and "+
				"verdict with the events the store chained for them: each run is ok, tampered (with the first bad sequence "+
				"number), missing_payload, corrupt_payload or unfinalized. Deleted runs are found through the store-wide "+
				"admissions chain. The hashes are unkeyed; the defense against a consistent rewrite is a manifest kept "+
				"elsewhere: --manifest FILE --write records the terminal hashes, --manifest FILE checks them. What the hashes "+
				"alone cannot show: docs/cli.md."),
		Example: `  assay verify
  assay verify --format json run-20261130t101500-0a1b2c3d4e5f
  assay verify --manifest /backup/evidence-manifest.json --write
  assay verify --manifest /backup/evidence-manifest.json --wait 1m`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVerify(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	cmd.Flags().StringVar(&opts.Manifest, "manifest", "", "check the store against this manifest of run ids and terminal hashes")
	cmd.Flags().BoolVar(&opts.Write, "write", false, "with --manifest: write the manifest instead of checking it")
	return cmd
}

func runVerify(ctx context.Context, opts *VerifyOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	rep, err := evidence.VerifyFile(ctx, opts.Store.path(), evidence.VerifyOptions{Runs: opts.Runs, Wait: opts.Wait,
		Command: "assay verify", Manifest: opts.Manifest, WriteManifest: opts.Write})
	if errors.Is(err, evidence.ErrManifestRefused) {
		// What does not verify is shown; the refusal says no manifest was written.
		if perr := printVerification(opts.IO.Out, format, opts, rep.Results); perr != nil {
			return perr
		}
		return failed("%v", err)
	}
	if err != nil {
		return err
	}
	if opts.Write {
		fmt.Fprintf(opts.IO.ErrOut, "wrote manifest %s: %d finalized runs\n", opts.Manifest, rep.ManifestRuns)
	}
	if err := printVerification(opts.IO.Out, format, opts, rep.Results); err != nil {
		return err
	}
	if len(rep.Results) == 0 {
		return failed("no runs to verify in %s", opts.Store.path())
	}
	if bad := rep.Failures(); len(bad) > 0 {
		return failed("%d of %d runs do not verify: %s", len(bad), len(rep.Results), strings.Join(bad, "; "))
	}
	return nil
}

func printVerification(w io.Writer, format string, opts *VerifyOptions, results []evidence.RunVerification) error {
	if format == "json" {
		return writeJSON(w, results)
	}
	checked := opts.Manifest != "" && !opts.Write
	header := []string{"RUN", "STATUS", "FIRST BAD SEQ", "DETAIL"}
	if checked {
		header = []string{"RUN", "STATUS", "FIRST BAD SEQ", "MANIFEST", "DETAIL"}
	}
	t := table{header: header}
	for _, r := range results {
		seq := "-"
		if r.FirstBadSeq > 0 {
			seq = fmt.Sprint(r.FirstBadSeq)
		}
		row := []string{r.RunID, r.Status, seq, r.Detail}
		if checked {
			row = []string{r.RunID, r.Status, seq, r.Manifest, r.Detail}
		}
		t.rows = append(t.rows, row)
	}
	return t.writeText(w)
}
