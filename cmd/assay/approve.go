package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
)

// ApproveOptions are the parsed flags of `assay approve`.
type ApproveOptions struct {
	IO            IOStreams
	Store         storeFlags
	Run           string
	Call          string
	File          string
	Expires       time.Duration
	Disclose      bool
	PayloadSHA256 string
	Approver      string
	Wait          time.Duration
}

// NewCmdApprove builds `assay approve RUN CALL`.
func NewCmdApprove(io IOStreams, runF func(context.Context, *ApproveOptions) error) *cobra.Command {
	opts := &ApproveOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "approve RUN CALL",
		Short: "Approve one exact tool call that is awaiting approval",
		Long: longHelp("0 approved, or declined with \"no\"; 1 when the approval file could not be written; 2 on bad input: "+
			"an unknown run or call, a call not awaiting approval or that no run can dispatch, an answer that is not the hash "+
			"shown.",
			fmt.Sprintf("Show the exact action a call awaiting approval would perform (tool, access, member, session, "+
				"arguments, payload SHA-256, schema digest, the policy scope that asked) and, once you type the first %d "+
				"characters of the payload hash (or pass it whole with --payload-sha256), write an approval bound to exactly "+
				"that action into the approval file (default <out>/%s, which 'assay resume' reads): single use, expiring "+
				"(--expires), void for another payload, session or policy. Approval to act is not approval to disclose the "+
				"result to the member: add --disclose. RUN is any run of the team run, CALL as for 'assay reconcile'. "+
				"Reference: docs/cli.md.", harness.ApprovalPrefixLen, harness.ApprovalsFileName)),
		Example: `  assay effects run-20261130t101500-0a1b2c3d4e5f --state awaiting_approval
  assay approve run-20261130t101500-0a1b2c3d4e5f r0-call_1 --approver me
  assay approve --payload-sha256 3b1f0c…(64 hex) --expires 30m --approver me RUN exec-1:r0-call_1`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return argCountError(c, "RUN and CALL", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Run, opts.Call = args[0], args[1]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runApprove(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.File, "approvals", "", "approval file to write (default <out>/"+harness.ApprovalsFileName+")")
	cmd.Flags().DurationVar(&opts.Expires, "expires", time.Hour, "how long the approval stays valid")
	cmd.Flags().BoolVar(&opts.Disclose, "disclose", false, "also approve showing the call's result to the member")
	cmd.Flags().StringVar(&opts.PayloadSHA256, "payload-sha256", "", "approve without prompting: the full payload SHA-256 you approve")
	cmd.Flags().StringVar(&opts.Approver, "approver", os.Getenv("USER"), "who approves (default $USER)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runApprove(ctx context.Context, opts *ApproveOptions) error {
	p, err := harness.PrepareApproval(ctx, harness.ApprovalRequest{StorePath: opts.Store.path(), RunID: opts.Run, Call: opts.Call,
		File: opts.File, Approver: opts.Approver, Expires: opts.Expires, Disclose: opts.Disclose, Wait: opts.Wait, Command: "assay approve"})
	if err != nil {
		return err
	}
	e, in := p.Effect, p.Effect.Intent
	var args bytes.Buffer
	if err := json.Indent(&args, in.Arguments, "    ", "  "); err != nil {
		args.Reset()
		args.Write(in.Arguments)
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "Call %s awaits approval (%s: %s).\n", e.IdempotencyKey, in.Policy.Policy+ruleName(in.Policy.Rule), in.Policy.Reason)
	fmt.Fprintf(w, "  tool            %s (access %s)\n", in.Tool, in.Access)
	fmt.Fprintf(w, "  member          %s, session %s\n", in.MemberID, in.SessionID)
	fmt.Fprintf(w, "  revision        %d\n", in.Revision)
	fmt.Fprintf(w, "  payload sha256  %s\n", in.PayloadSHA256)
	fmt.Fprintf(w, "  schema sha256   %s\n", in.SchemaSHA256)
	fmt.Fprintf(w, "  policy scope    %s\n", in.Policy.Scope)
	fmt.Fprintf(w, "  arguments       %s\n", args.String())

	confirmed := opts.PayloadSHA256
	if confirmed == "" {
		fmt.Fprintf(w, "Type the first %d characters of the payload SHA-256 to approve exactly this action, or \"no\": ", harness.ApprovalPrefixLen)
		line, err := bufio.NewReader(opts.IO.In).ReadString('\n')
		if !strings.HasSuffix(line, "\n") {
			fmt.Fprintln(w) // the prompt's line ends here when the answer did not end one (a pipe, EOF)
		}
		answer := strings.TrimSpace(line)
		switch {
		case answer == "no":
			fmt.Fprintln(w, "Not approved; nothing written. The question stays pending.")
			return nil
		case p.ConfirmedBy(answer):
			confirmed = in.PayloadSHA256
		case err != nil && answer == "":
			return usageErrorf("no answer on standard input; nothing approved (use --payload-sha256 to approve without prompting)")
		default:
			return usageErrorf("the answer %q is not the first %d characters of the payload hash; nothing approved, the question stays pending", answer, harness.ApprovalPrefixLen)
		}
	}
	g, err := p.Grant(confirmed, time.Now())
	if err != nil {
		return err
	}
	disclose := "its result is not disclosed to the member"
	if g.Entry.Disclose {
		disclose = "its result may be disclosed to the member"
	}
	_, err = fmt.Fprintf(w, "Approved %s (payload %s) until %s, single use; %s. Written to %s.\n",
		e.IdempotencyKey, in.PayloadSHA256[:harness.ApprovalPrefixLen], g.Entry.ExpiresAt.Format(time.RFC3339), disclose, g.File)
	return err
}

func ruleName(rule string) string {
	if rule == "" {
		return ""
	}
	return " rule " + rule
}
