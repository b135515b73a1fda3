package main

import (
	"context"
	"fmt"
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
		Long: `Recompute, for each run (all runs when none are named), the hash chain of its events, the sequence
continuity, the event count, the terminal hash and the artifact digests, from the bytes stored in the
evidence store, and compare its checks and verdict with the check_recorded and run_finalized events
the store chained into its trace. Each run is reported ok, tampered (with the first bad sequence
number when the chain itself breaks), missing_payload, corrupt_payload or unfinalized (an
interrupted run is unfinalized; its recorded events must still verify).

Deleted runs are found too: every run is chained into a store-wide admissions chain when it is opened,
so erasing a run leaves a gap or a broken link there (reported on the run after it), and a run id that
is missing from the runs table but still named by rows of another table (events, verdicts, checks,
admissions, ...) or by a run's corrects_run_id is reported tampered on a row of its own.

The hashes are unkeyed. Without a copy kept elsewhere they cannot show: a run erased with every later
admission and terminal hash rewritten consistently; the most recently admitted runs erased together
with their admissions; a run's trace rewritten consistently (its checks or verdict changed together
with their events, the chain and terminal hash recomputed); or a run finalized by an assay older than
schema 3 edited with its terminal hash recomputed. The defense is a manifest kept elsewhere (another
machine, a signed commit, a ticket): --manifest FILE --write records the run ids and terminal hashes
of every finalized run that verifies (refused when any run is tampered or has a missing or corrupt
payload); --manifest FILE checks the store against it, and a run whose terminal hash differs from the
manifest's, or that the manifest lists but the store lacks, is reported tampered.

Exit status: 0 when every run verifies, 1 when any does not, 2 on bad input.`,
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
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	if opts.Write && opts.Manifest == "" {
		return badInput(fmt.Errorf("--write needs --manifest FILE"))
	}
	var manifest evidence.Manifest
	if opts.Manifest != "" && !opts.Write {
		m, err := evidence.ReadManifest(opts.Manifest)
		if err != nil {
			return badInput(err)
		}
		manifest = m
	}
	store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: "assay verify"})
	if err != nil {
		return badInput(err)
	}
	defer store.Close()
	results, err := store.Verify(ctx, opts.Runs...)
	if err != nil {
		return badInput(err)
	}
	if opts.Manifest != "" {
		if opts.Write {
			m, err := evidence.BuildManifest(opts.Store.path(), results)
			if err != nil {
				printVerification(opts, results)
				return failed("%v; manifest %s not written", err, opts.Manifest)
			}
			if err := evidence.WriteManifest(opts.Manifest, m); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(opts.IO.ErrOut, "wrote manifest %s: %d finalized runs\n", opts.Manifest, len(m.Runs))
		} else {
			results = evidence.CheckManifest(manifest, results, len(opts.Runs) == 0)
		}
	}
	if err := printVerification(opts, results); err != nil {
		return err
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

func printVerification(opts *VerifyOptions, results []evidence.RunVerification) error {
	if opts.Format == "json" {
		return writeJSON(opts.IO.Out, results)
	}
	header := []string{"RUN", "STATUS", "FIRST BAD SEQ", "DETAIL"}
	if opts.Manifest != "" && !opts.Write {
		header = []string{"RUN", "STATUS", "FIRST BAD SEQ", "MANIFEST", "DETAIL"}
	}
	t := table{header: header}
	for _, r := range results {
		seq := "-"
		if r.FirstBadSeq > 0 {
			seq = fmt.Sprint(r.FirstBadSeq)
		}
		row := []string{r.RunID, r.Status, seq, r.Detail}
		if len(header) == 5 {
			row = []string{r.RunID, r.Status, seq, r.Manifest, r.Detail}
		}
		t.rows = append(t.rows, row)
	}
	return t.writeText(opts.IO.Out)
}
