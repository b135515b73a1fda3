package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// ResumeOptions are the parsed flags of `assay resume`.
type ResumeOptions struct {
	IO        IOStreams
	Harness   harness.Options
	Run       string
	APIKeyEnv string
	Faults    []string
	Format    string
	SignKey   string // --sign-key; "" signs nothing
}

// NewCmdResume builds `assay resume RUN`. runF replaces runResume in tests.
func NewCmdResume(io IOStreams, runF func(context.Context, *ResumeOptions) error) *cobra.Command {
	opts := &ResumeOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "Continue a paused or interrupted case run from its last checkpoint",
		Long: `Continue a matrix case run that paused (a tool call awaiting approval, an effect whose outcome is
unknown) or was interrupted (the process was killed), in a new run linked to it.

Only the durable formations resume: sequential, pipeline, parallel, hierarchical, consensus and
reflection, not in an ensemble mode; every other formation refuses before anything runs. A durable
case checkpoints each member turn in the evidence store; a paused case is finalized rejected, naming
the pause and this command.

Before anything runs, resume
  - re-checks the run's envelope against the options given now: tenant, case definition, mode and
    policy (a changed --policy file or catalog refuses, since approvals and decisions were bound to
    them);
  - restores the tool boundary from every earlier run's journal: a call awaiting approval is asked
    again under the current policy, so an approval given for other arguments, another session or
    another policy does not match, and a call recorded with an intent but no outcome is unknown;
  - dispatches, once, each call an approval now covers exactly (--approvals; 'assay approve' writes
    one);
  - reconciles unknown effects through the backend's receipt lookup where there is one; an effect
    nothing can reconcile stays unknown and its member stays paused (see 'assay reconcile').
Then the formation replays over the checkpoint: members whose turns ended are restored without a
provider request, the paused member continues from its recorded conversation, and the others run.

The budgets (tool calls and tokens, per member and per team) are the team run's, as its first run
recorded them, and what the earlier runs consumed counts against them: a pause does not reset them.
The resumed run must verify: a run of the lineage whose evidence does not verify, or a checkpoint that
is not the state its chained checkpoint event names, refuses the resume.

The new run keeps the first run's session ids and idempotency keys, records run_resumed
(after its boundary configuration) and is finalized with its own verdict (accepted only when every required check passes;
rejected again if it pauses again, to be resumed in turn). The model and base URL default to the
run's; give --api-key-env again for a real provider.

Exit status: 0 accepted; 1 rejected (or paused again); 2 bad input or a run that cannot be resumed
(unknown, still open, already resumed, completed, no checkpoint, envelope differs, evidence that does
not verify, or paused at calls no approval names), nothing written.`,
		Example: `  assay matrix run --formations sequential --policy ask-writes.yaml --out out   # pauses
  assay effects RUN --out out --state awaiting_approval                          # the call waiting
  assay approve RUN CALL --out out --approver me                                # writes out/approvals.json
  assay resume RUN --out out --policy ask-writes.yaml                           # reads out/approvals.json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return badInput(fmt.Errorf("assay resume takes one RUN, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Run = args[0]
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
	f.StringVar(&opts.APIKeyEnv, "api-key-env", "", "name of the environment variable holding the provider API key (never recorded)")
	f.StringVar(&opts.Harness.SessionHeader, "session-header", "X-Session-Id", "HTTP header that carries each member's session id")
	f.StringVar(&opts.Harness.Tenant, "tenant", "local", "tenant; must be the run's")
	f.DurationVar(&opts.Harness.RequestTimeout, "request-timeout", 60*time.Second, "deadline of one provider request")
	f.StringVar(&opts.Harness.PolicyFile, "policy", "", "policy file; its SHA-256 must be the run's policy digest (the same file the run had)")
	f.StringVar(&opts.Harness.ApprovalsFile, "approvals", "", "approval file whose exact grants may now cover the calls the run paused at (default: <out>/approvals.json when it exists, where assay approve writes)")
	f.StringVar(&opts.Harness.Mode, "mode", "live", "run mode; must be the run's")
	f.StringArrayVar(&opts.Faults, "reference-fault", nil, "inject a fault into the embedded reference provider (MEMBER:TURN:KIND[:ARG]); repeatable")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.DurationVar(&opts.Harness.StoreWait, "wait", 0, "wait up to this long for the evidence store held by another process")
	f.StringVar(&opts.SignKey, "sign-key", "", "Ed25519 private key (assay keygen) signing the resumed run, and the run it seals, as in-toto attestations")
	f.StringVar(&opts.Harness.AttestDir, "attestations", "", "directory the attestations are written to (default <out>/attestations)")
	return cmd
}

func runResume(ctx context.Context, opts *ResumeOptions) error {
	h := opts.Harness
	switch {
	case opts.Format != "table" && opts.Format != "json":
		return badInput(fmt.Errorf("--format must be table or json, got %q", opts.Format))
	case h.OutDir == "":
		return badInput(errors.New("--out is empty; name the matrix run's output directory"))
	case h.RequestTimeout <= 0:
		return badInput(fmt.Errorf("--request-timeout %s must be positive", h.RequestTimeout))
	case h.StoreWait < 0:
		return badInput(fmt.Errorf("--wait %s is negative", h.StoreWait))
	}
	if opts.APIKeyEnv != "" {
		key, ok := os.LookupEnv(opts.APIKeyEnv)
		if !ok || key == "" {
			return badInput(fmt.Errorf("environment variable %s (named by --api-key-env) is not set", opts.APIKeyEnv))
		}
		h.APIKey, h.APIKeyEnv = key, opts.APIKeyEnv
	}
	for _, spec := range opts.Faults {
		fault, err := reference.ParseFault(spec)
		if err != nil {
			return badInput(fmt.Errorf("--reference-fault: %w", err))
		}
		h.ReferenceFaults = append(h.ReferenceFaults, fault)
	}
	if h.ApprovalsFile == "" {
		if p := filepath.Join(h.OutDir, "approvals.json"); fileExists(p) {
			h.ApprovalsFile = p
		}
	}
	if opts.SignKey != "" {
		signer, err := attest.LoadSigner(opts.SignKey)
		if err != nil {
			return badInput(err)
		}
		h.Signer = signer
	}
	h.ToolVersion, h.Command, h.Progress = version, "assay resume", opts.IO.ErrOut
	sum, err := harness.ResumeRun(ctx, h, opts.Run)
	if err != nil {
		if ctx.Err() != nil {
			return failed("interrupted: %v", err)
		}
		return badInput(err)
	}
	cr := sum.Cases[0]
	reportPath := filepath.Join(h.OutDir, "report.md")
	if err := writeMatrixReport(ctx, sum, reportPath); err != nil {
		return fmt.Errorf("write %s: %w", reportPath, err)
	}
	if opts.Format == "json" {
		if err := writeJSON(opts.IO.Out, cr); err != nil {
			return err
		}
	} else {
		if err := matrixTable(sum).writeText(opts.IO.Out); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "\nresumed %s as %s\nevidence: %s\nreport:   %s\n", opts.Run, cr.RunID, sum.StorePath, reportPath)
	}
	switch {
	case cr.Paused:
		if opts.Format != "json" {
			writePausedHint(opts.IO.Out, []harness.CaseResult{cr}, h.OutDir)
		}
		reason := ""
		if len(cr.Verdict.Reasons) > 0 {
			reason = ": " + cr.Verdict.Reasons[0]
		}
		return failed("run %s paused again%s", cr.RunID, reason)
	case cr.Verdict.Verdict != "accepted":
		return failed("run %s %s: %s", cr.RunID, cr.Verdict.Verdict, strings.Join(cr.Verdict.Reasons, "; "))
	}
	return nil
}

// fileExists reports whether path names an existing regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
