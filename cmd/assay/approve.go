package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/atomicfile"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
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

// approvePrefixLen is how many hex characters of the payload SHA-256 an approver types: enough that
// approving without reading the hash shown is not an accident.
const approvePrefixLen = 12

// NewCmdApprove builds `assay approve RUN CALL`.
func NewCmdApprove(io IOStreams, runF func(context.Context, *ApproveOptions) error) *cobra.Command {
	opts := &ApproveOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "approve RUN CALL",
		Short: "Approve one exact tool call that is awaiting approval",
		Long: `Show the exact action a tool call awaiting approval would perform — tool, access mode, member, session,
canonical arguments and their SHA-256, the tool's schema digest, the policy scope that asked — and, if
you approve it, write an approval bound to exactly that action into an approval file.

To approve, type the first 12 characters of the payload SHA-256 shown (or pass the whole hash with
--payload-sha256 when scripting); anything else approves nothing and the question stays pending.

The approval is single use and expires (--expires). It binds the call id, the canonical payload hash,
the schema digest and access mode, the session and the policy scope: a changed payload, a hook that
rewrites the arguments, another session or a changed policy file does not dispatch on it. Approval to
act is not approval to disclose the result to the member: add --disclose for that. Arguments are shown
as recorded, with credentials redacted; the hash is over the arguments as the member proposed them.

RUN is any run of the team run: the paused run, or a run that resumed it (the approval is bound to the
call, whose key keeps the first run's id). CALL is the call id 'assay effects RUN' shows (r0-call_…),
MEMBER:CALL_ID, or the whole idempotency key RUN:MEMBER:CALL_ID.

The approval file (default approvals.json in the output directory) is what 'assay resume' reads by
default (or a run given --approvals FILE). A write does not need --disclose for its member to go on:
without it the member is told the call succeeded, not shown the tool's output.

Exit status: 0 approved (or declined with "no"); 2 bad input (unknown run or call, a call not awaiting
approval, an answer that is not the hash shown).`,
		Example: `  assay effects run-20261130t101500-0a1b2c3d4e5f --state awaiting_approval
  assay approve run-20261130t101500-0a1b2c3d4e5f r0-call_1 --approver me
  assay approve --payload-sha256 3b1f0c…(64 hex) --expires 30m --approver me RUN exec-1:r0-call_1`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return badInput(fmt.Errorf("assay approve takes RUN and CALL, got %d arguments", len(args)))
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
	cmd.Flags().StringVar(&opts.File, "approvals", "", "approval file to write (default <out>/approvals.json)")
	cmd.Flags().DurationVar(&opts.Expires, "expires", time.Hour, "how long the approval stays valid")
	cmd.Flags().BoolVar(&opts.Disclose, "disclose", false, "also approve showing the call's result to the member")
	cmd.Flags().StringVar(&opts.PayloadSHA256, "payload-sha256", "", "approve without prompting: the full payload SHA-256 you approve")
	cmd.Flags().StringVar(&opts.Approver, "approver", os.Getenv("USER"), "who approves (default $USER)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runApprove(ctx context.Context, opts *ApproveOptions) error {
	switch {
	case opts.Expires <= 0:
		return badInput(fmt.Errorf("--expires must be positive, got %s", opts.Expires))
	case strings.TrimSpace(opts.Approver) == "":
		return badInput(errors.New("--approver is required ($USER is not set)"))
	}
	store, err := openStore(ctx, opts.Store, true, opts.Wait, "assay approve")
	if err != nil {
		return err
	}
	runs, err := selectRuns(ctx, store, []string{opts.Run})
	if err != nil {
		store.Close()
		return err
	}
	effs, err := runEffectsOf(ctx, store, runs[0])
	if err == nil {
		err = canStillDispatch(ctx, store, runs[0])
	}
	store.Close()
	if err != nil {
		return err
	}
	e, err := findEffect(effs, opts.Run, opts.Call)
	if err != nil {
		return err
	}
	if e.State != effect.AwaitingApproval {
		return badInput(fmt.Errorf("call %s is %s, not awaiting approval; nothing approved", e.IdempotencyKey, stateOf(e)))
	}
	in := e.Intent
	if in.Policy == nil || in.Policy.Scope == "" || in.SchemaSHA256 == "" || in.PayloadSHA256 == "" {
		return badInput(fmt.Errorf("call %s has no recorded policy scope, schema digest or payload hash to bind an approval to", e.IdempotencyKey))
	}
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

	if opts.PayloadSHA256 != "" {
		if opts.PayloadSHA256 != in.PayloadSHA256 {
			return badInput(fmt.Errorf("--payload-sha256 %s is not the pending payload's hash; nothing approved", opts.PayloadSHA256))
		}
	} else {
		fmt.Fprintf(w, "Type the first %d characters of the payload SHA-256 to approve exactly this action, or \"no\": ", approvePrefixLen)
		line, err := bufio.NewReader(opts.IO.In).ReadString('\n')
		if !strings.HasSuffix(line, "\n") {
			fmt.Fprintln(w) // the prompt's line ends here when the answer did not end one (a pipe, EOF)
		}
		answer := strings.TrimSpace(line)
		switch {
		case answer == "no":
			fmt.Fprintln(w, "Not approved; nothing written. The question stays pending.")
			return nil
		case len(answer) == approvePrefixLen && strings.HasPrefix(in.PayloadSHA256, answer):
		case err != nil && answer == "":
			return badInput(fmt.Errorf("no answer on standard input; nothing approved (use --payload-sha256 to approve without prompting)"))
		default:
			return badInput(fmt.Errorf("the answer %q is not the first %d characters of the payload hash; nothing approved, the question stays pending", answer, approvePrefixLen))
		}
	}

	path := opts.File
	if path == "" {
		path = filepath.Join(filepath.Dir(opts.Store.path()), "approvals.json")
	}
	file := &policy.ApprovalFile{Version: 1}
	if prev, err := policy.LoadApprovalFile(path); err == nil {
		file = prev
	} else if !errors.Is(err, fs.ErrNotExist) {
		return badInput(err)
	}
	entry := policy.FileApproval{RunID: in.RunID, SessionID: in.SessionID, MemberID: in.MemberID, CallID: in.CallID, Tool: in.Tool,
		PayloadSHA256: in.PayloadSHA256, SchemaSHA256: in.SchemaSHA256, Access: string(in.Access), PolicyScope: in.Policy.Scope,
		Revision: in.Revision, Approver: opts.Approver, ExpiresAt: time.Now().UTC().Add(opts.Expires).Truncate(time.Second),
		Disclose: opts.Disclose}
	file.Approvals = slices.DeleteFunc(file.Approvals, func(a policy.FileApproval) bool {
		return a.RunID == entry.RunID && a.MemberID == entry.MemberID && a.CallID == entry.CallID
	})
	file.Approvals = append(file.Approvals, entry)
	if err := writeFileAtomic(path, file); err != nil {
		return err
	}
	disclose := "its result is not disclosed to the member"
	if opts.Disclose {
		disclose = "its result may be disclosed to the member"
	}
	fmt.Fprintf(w, "Approved %s (payload %s) until %s, single use; %s. Written to %s.\n",
		e.IdempotencyKey, in.PayloadSHA256[:approvePrefixLen], entry.ExpiresAt.Format(time.RFC3339), disclose, path)
	return nil
}

// canStillDispatch refuses an approval that no run could ever act on: the newest run of r's team
// run (r, or the run that resumed it, and so on) is finalized and did not pause with a checkpoint (it
// completed, or its formation does not resume durably). A paused or interrupted durable run's
// approval is for 'assay resume'.
func canStillDispatch(ctx context.Context, store *evidence.Store, r evidence.RunSummary) error {
	all, err := store.Runs(ctx)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	// The call is approved for the team run; what matters is whether its newest run can still
	// dispatch it (is paused or was interrupted).
	for by := harness.ResumedBy(all, r.RunID); by != ""; by = harness.ResumedBy(all, r.RunID) {
		i := slices.IndexFunc(all, func(x evidence.RunSummary) bool { return x.RunID == by })
		if i < 0 {
			break
		}
		r = all[i]
	}
	if r.Status != evidence.StatusFinalized {
		return nil
	}
	evs, err := store.Events(ctx, r.RunID)
	if err != nil {
		return fmt.Errorf("run %s events: %w", r.RunID, err)
	}
	paused := false
	for _, ev := range evs {
		if ev.Type == "checkpoint" {
			var p struct {
				Paused bool `json:"paused"`
			}
			_ = json.Unmarshal(ev.Payload, &p)
			paused = p.Paused
		}
	}
	if !paused {
		return badInput(fmt.Errorf("run %s is finalized and did not pause with a checkpoint (its formation does not resume durably, or it completed): no run can dispatch this call; nothing approved", r.RunID))
	}
	return nil
}

func ruleName(rule string) string {
	if rule == "" {
		return ""
	}
	return " rule " + rule
}

// writeFileAtomic writes v as indented JSON to path, mode 0600, through internal/atomicfile, so a
// reader never sees half a file.
func writeFileAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}
