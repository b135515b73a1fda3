package main

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/replay"
	"github.com/assay-audit/assay/harness/replay/tolerance"
)

// ReplayVerifyOptions are the parsed flags of `assay replay verify`.
type ReplayVerifyOptions struct {
	IO           IOStreams
	Store        storeFlags
	Runs         []string
	All, Latest  bool
	Against      string
	PolicyFile   string
	Mode         string
	Tenant       string
	Tolerance    string
	Checks       bool
	ModelAliases []string
	Format       string
	Wait         time.Duration
}

// NewCmdReplay builds `assay replay` and its subcommand `verify`.
func NewCmdReplay(io IOStreams, runF func(context.Context, *ReplayVerifyOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Verify replay envelopes: re-derive finalized runs from their recorded evidence",
	}
	opts := &ReplayVerifyOptions{IO: io}
	verify := &cobra.Command{
		Use:   "verify [RUN...]",
		Short: "Re-derive finalized runs from their recorded evidence, under the authority they had",
		Long: longHelp("0 when every replay is exact or within_tolerance; 1 otherwise; 2 on bad input.",
			"Replay each named run (--all: every case run, a resumed one as its lineage's chain; --latest: the most recent) "+
				"from its recorded evidence: a cassette serves each member's recorded responses, recorded tool outcomes are "+
				"served, the formation runs by the matrix's code path. Refused when --policy, --mode, --tenant, --tolerance or "+
				"the case's digests differ from the envelope; non_certifiable when the evidence cannot support a replay. Each "+
				"replayed request must hash to the recorded one; the trace is compared under the run's tolerance ("+
				strings.Join(tolerance.Names(), ", ")+"): exact, within_tolerance or mismatch with the first divergence. "+
				"--checks re-runs the acceptance checks. What a replay proves: docs/replay.md, docs/cli.md."),
		Example: `  assay replay verify --all
  assay replay verify --latest --checks --format json
  assay replay verify run-20261130t101500-0a1b2c3d4e5f --policy policy.yaml
  assay replay verify run-20261130t101500-0a1b2c3d4e5f --against run-20261130t102000-1b2c3d4e5f6a`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runReplayVerify(c.Context(), opts)
		},
	}
	opts.Store.register(verify)
	f := verify.Flags()
	f.BoolVar(&opts.All, "all", false, "replay every case run of the store (each resumed lineage once, as a chain)")
	f.BoolVar(&opts.Latest, "latest", false, "replay the most recent case run")
	f.StringVar(&opts.Against, "against", "", "compare the named run with this run, request by request, instead of replaying it")
	f.StringVar(&opts.PolicyFile, "policy", "", "the policy file the run was decided by (default: the recorded one, if unchanged)")
	f.StringVar(&opts.Mode, "mode", "", "the mode the run ran in: live, dry_run or observe (default: the recorded one)")
	f.StringVar(&opts.Tenant, "tenant", "", "the tenant the run ran for (default: the recorded one)")
	f.StringVar(&opts.Tolerance, "tolerance", "", "the replay tolerance policy: "+strings.Join(tolerance.Names(), ", ")+" (default: the recorded one; no other is accepted)")
	f.BoolVar(&opts.Checks, "checks", false, "re-run the acceptance checks on each replay and compare them and the verdict with the recorded ones")
	f.StringArrayVar(&opts.ModelAliases, "model-alias", nil, "REQUESTED=ANSWERED, as the run was given it (the routing check reads it); repeatable")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for another process holding the store (e.g. 30s)")
	cmd.AddCommand(verify)
	return cmd
}

func runReplayVerify(ctx context.Context, opts *ReplayVerifyOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	aliases, err := parseAliases("--model-alias", opts.ModelAliases)
	if err != nil {
		return err
	}
	results, err := replay.Verify(ctx, replay.Options{Store: opts.Store.path(), Runs: opts.Runs, All: opts.All, Latest: opts.Latest,
		Against: opts.Against, PolicyFile: opts.PolicyFile, Mode: opts.Mode, Tenant: opts.Tenant, Tolerance: opts.Tolerance,
		Checks: opts.Checks, ModelAliases: aliases, StoreWait: opts.Wait, ToolVersion: version, Command: "assay replay verify",
		InvocationID: harness.NewInvocationID()})
	if err != nil {
		return err
	}
	if err := printReplays(opts.IO.Out, format, results); err != nil {
		return err
	}
	var bad []string
	for _, r := range results {
		if !r.OK() {
			bad = append(bad, r.RunID+" "+r.Verdict)
		}
	}
	if len(bad) > 0 {
		return failed("%d of %d replays are not exact or within tolerance: %s", len(bad), len(results), strings.Join(bad, ", "))
	}
	return nil
}

func printReplays(w io.Writer, format string, results []replay.Result) error {
	if format == "json" {
		return writeJSON(w, map[string]any{"results": nonNilSlice(results)})
	}
	t := table{header: []string{"RUN", "FORMATION", "VERDICT", "FIRST DIVERGENCE", "REPLAY RUN"}}
	for _, r := range results {
		name := r.Catalog
		if name == "" {
			name = r.Formation
		}
		replayRun := r.ReplayRunID
		if r.AgainstRunID != "" {
			replayRun = "against " + r.AgainstRunID
		}
		t.rows = append(t.rows, []string{r.RunID, name, r.Verdict, oneLineText(r.Describe(), 160), replayRun})
	}
	return t.writeText(w)
}

func oneLineText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
