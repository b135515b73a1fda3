package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// VerifyOptions are the parsed flags of `assay verify`.
type VerifyOptions struct {
	IO     IOStreams
	Store  storeFlags
	Format string
	Runs   []string
}

// NewCmdVerify builds `assay verify [RUN...]`.
func NewCmdVerify(io IOStreams, runF func(context.Context, *VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "verify [RUN...]",
		Short: "Recompute every trace's hash chain and terminal hash; report tampering",
		Long: `Recompute, for each run (all runs when none are named), the hash chain of its events, the sequence
continuity, the event count, the terminal hash and the artifact digests, from the bytes stored in the
evidence store. Each run is reported ok, tampered (with the first bad sequence number),
missing_payload, corrupt_payload or unfinalized.

Exit status: 0 when every run verifies, 1 when any does not, 2 on bad input.`,
		Example: `  assay verify
  assay verify --format json run-20261130t101500-0a1b2c3d4e5f`,
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
	return cmd
}

func runVerify(ctx context.Context, opts *VerifyOptions) error {
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Command: "assay verify"})
	if err != nil {
		return badInput(err)
	}
	defer store.Close()
	results, err := store.Verify(ctx, opts.Runs...)
	if err != nil {
		return badInput(err)
	}
	if opts.Format == "json" {
		if err := writeJSON(opts.IO.Out, results); err != nil {
			return err
		}
	} else {
		t := table{header: []string{"RUN", "STATUS", "FIRST BAD SEQ", "DETAIL"}}
		for _, r := range results {
			seq := "-"
			if r.FirstBadSeq > 0 {
				seq = fmt.Sprint(r.FirstBadSeq)
			}
			t.rows = append(t.rows, []string{r.RunID, r.Status, seq, r.Detail})
		}
		if err := t.writeText(opts.IO.Out); err != nil {
			return err
		}
	}
	var bad []string
	for _, r := range results {
		if r.Status != "ok" {
			desc := r.RunID + " " + r.Status
			if r.FirstBadSeq > 0 {
				desc += fmt.Sprintf(" at seq %d", r.FirstBadSeq)
			}
			bad = append(bad, desc)
		}
	}
	if len(results) == 0 {
		return failed("no runs to verify in %s", opts.Store.path())
	}
	if len(bad) > 0 {
		return failed("%d of %d runs do not verify: %s", len(bad), len(results), strings.Join(bad, "; "))
	}
	return nil
}
