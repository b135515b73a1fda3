package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
)

// ResumeOptions are the parsed flags of `assay resume`: Harness holds the options as parsed (its
// ReferenceFaults parsed from --reference-fault); harness.ResumeRun completes and validates them.
type ResumeOptions struct {
	IO      IOStreams
	Harness harness.Options
	Run     string
	Format  string
	SignKey string // --sign-key; "" signs nothing
	// Progress is --progress: auto, tty, plain or none (progressSetting).
	Progress string
}

// NewCmdResume builds `assay resume RUN`. runF replaces runResume in tests.
func NewCmdResume(io IOStreams, runF func(context.Context, *ResumeOptions) error) *cobra.Command {
	opts := &ResumeOptions{IO: io}
	var faults []string
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a paused or interrupted case run from its last checkpoint",
		Long: longHelp("0 accepted; 1 rejected or paused again, or the run could not go on (an I/O or store failure); 2 "+
			"on bad input or a run that cannot be resumed (unknown, still open, already resumed, completed, no checkpoint, "+
			"envelope differs, evidence that does not verify, paused at calls no approval names), nothing written.",
			"Continue a matrix case run that paused (a call awaiting approval, an effect whose outcome is unknown) or was "+
				"interrupted, in a new run linked to it. Only durable formations resume ("+list("and", durableFormations()...)+
				"), not in an ensemble mode. Before anything runs, resume re-checks the run's envelope (tenant, case, mode, "+
				"policy: each defaults to the run's own; another is refused), restores the tool boundary from the journals, dispatches "+
				"once each call an approval now covers exactly (--approvals, default <out>/"+harness.ApprovalsFileName+
				") and reconciles unknown effects through the backend's receipt. Budgets carry over; the lineage must "+
				"verify; model and base URL default to the run's. Reference: docs/cli.md."),
		Example: `  assay matrix run --formations sequential --policy ask-writes.yaml --out out   # pauses
  assay effects RUN --out out --state awaiting_approval                          # the call waiting
  assay approve RUN CALL --out out --approver me                                # writes out/approvals.json
  assay resume RUN --out out                                                    # the run's policy file; reads out/approvals.json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return argCountError(c, "one RUN", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Run = args[0]
			if err := checkProgressFlag(c.Flags(), opts.Progress); err != nil {
				return err
			}
			var err error
			if opts.Harness.ReferenceFaults, err = parseFaults("--reference-fault", faults); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runResume(c.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Harness.OutDir, "out", "assay-out", "the matrix run's output directory (its evidence store, gateway database and case directories)")
	f.StringVar(&opts.Harness.BaseURL, "base-url", "", "OpenAI-compatible base URL (default: the run's; empty starts the embedded reference provider)")
	f.StringVar(&opts.Harness.Model, "model", "", "model id (default: the run's)")
	f.StringVar(&opts.Harness.APIKeyEnv, "api-key-env", "", "name of the environment variable holding the provider API key (never recorded)")
	f.StringVar(&opts.Harness.SessionHeader, "session-header", "X-Session-Id", "HTTP header that carries each member's session id")
	f.StringVar(&opts.Harness.Tenant, "tenant", "", "tenant (default: the run's; another is refused)")
	f.DurationVar(&opts.Harness.RequestTimeout, "request-timeout", 60*time.Second, "deadline of one provider request (0 = the default)")
	f.StringVar(&opts.Harness.PolicyFile, "policy", "", "policy file (default: the file the run recorded, while it still has the run's SHA-256; another is refused)")
	f.StringVar(&opts.Harness.ApprovalsFile, "approvals", "", "approval file whose exact grants may now cover the calls the run paused at (default: <out>/approvals.json when it exists, where assay approve writes)")
	f.StringVar(&opts.Harness.Mode, "mode", "", "run mode (default: the run's; another is refused)")
	f.StringArrayVar(&faults, "reference-fault", nil, "inject a fault into the embedded reference provider (MEMBER:TURN:KIND[:ARG]); repeatable")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.DurationVar(&opts.Harness.StoreWait, "wait", 0, "wait up to this long for the evidence store held by another process")
	f.StringVar(&opts.SignKey, "sign-key", "", "Ed25519 private key (assay keygen) signing the resumed run, and the run it seals, as in-toto attestations")
	f.StringVar(&opts.Harness.AttestDir, "attestations", "", "directory the attestations are written to (default <out>/attestations)")
	addProgressFlag(f, &opts.Progress)
	return cmd
}

func runResume(ctx context.Context, opts *ResumeOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	h := opts.Harness
	progressOut, style, totals, err := progressSetting(opts.Progress, opts.IO.ErrOut)
	if err != nil {
		return err
	}
	if err := setSigner(&h, opts.SignKey); err != nil {
		return err
	}
	h.ToolVersion, h.Command, h.Progress, h.ProgressStyle = version, "assay resume", progressOut, style
	h.InvocationID = harness.NewInvocationID()
	sum, err := harness.ResumeRun(ctx, h, opts.Run)
	if err != nil && ctx.Err() != nil {
		return failed("interrupted: %v", err)
	}
	if err != nil {
		return err
	}
	cr := sum.Cases[0]
	reportPath, err := writeMatrixReport(ctx, sum, h.InvocationID, "")
	if err != nil {
		return err
	}
	if totals {
		writeRunTotals(opts.IO.ErrOut, sum, reportPath)
	}
	if format == "json" {
		if err := writeCaseJSON(opts.IO.Out, cr); err != nil {
			return err
		}
	} else {
		if err := matrixTable(sum, false).writeText(opts.IO.Out); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "\nresumed %s as %s\nevidence: %s\nreport:   %s\n", opts.Run, cr.RunID, sum.StorePath, reportPath)
		writePausedHint(ctx, opts.IO.Out, []harness.CaseResult{cr}, sum.StorePath, sum.OutDir, h)
	}
	switch {
	case cr.Paused:
		reason := ""
		if len(cr.Verdict.Reasons) > 0 {
			reason = ": " + strings.TrimPrefix(cr.Verdict.Reasons[0], "paused: ")
		}
		return failed("run %s paused again%s", cr.RunID, reason)
	case cr.Verdict.Verdict != "accepted":
		return failed("run %s %s: %s", cr.RunID, cr.Verdict.Verdict, strings.Join(cr.Verdict.Reasons, "; "))
	}
	return nil
}
