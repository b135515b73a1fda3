package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
)

// ReconcileOptions are the parsed flags of `assay reconcile`.
type ReconcileOptions struct {
	IO       IOStreams
	Store    storeFlags
	Run      string
	Call     string
	Outcome  string
	Note     string
	Operator string
	Wait     time.Duration
	// Lookup resolves the effect from the effect service's receipt instead of an operator's
	// decision; EffectsDB names its database ("" = reference-effects.db beside the store).
	Lookup    bool
	EffectsDB string
}

// NewCmdReconcile builds `assay reconcile RUN CALL --outcome succeeded|failed --note TEXT` and
// `assay reconcile RUN CALL --lookup [--effects-db FILE]`.
func NewCmdReconcile(io IOStreams, runF func(context.Context, *ReconcileOptions) error) *cobra.Command {
	opts := &ReconcileOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "reconcile RUN CALL (--outcome succeeded|failed --note TEXT | --lookup)",
		Short: "Resolve a tool call whose outcome is unknown: by the backend's receipt, or an operator's decision",
		Long: longHelp("0 recorded; 1 --lookup resolved nothing (no receipt, a receipt for another payload, an unreadable "+
			"database) or the store could not be written, nothing recorded; 2 on bad input (an unknown run or call, an effect "+
			"that is not unknown, both or neither of --lookup and --outcome, a missing --note, no effects database), nothing "+
			"recorded.",
			"Resolve one effect whose outcome is unknown (see 'assay effects --state unknown'): --lookup by the backend's "+
				"receipt under its idempotency key, read from the effect service's database ("+harness.EffectsDBName+" beside the "+
				"store, or --effects-db FILE) after the provider is gone; or --outcome succeeded|failed, an operator's decision "+
				"with --note saying on what evidence. CALL is the idempotency key (RUN:MEMBER:CALL_ID), MEMBER:CALL_ID, or a call "+
				"id one member used. The resolution goes through the runtime's transition guard and is recorded in a new "+
				"correction run linked to RUN, finalized non_certifiable; a run still executing is refused. Reference: docs/cli.md."),
		Example: `  assay reconcile run-20261130t101500-0a1b2c3d4e5f exec-1:r1-call_34eec85cbd21 --lookup
  assay reconcile run-20261130t101500-0a1b2c3d4e5f exec-1:r0-call_1 --outcome succeeded \
      --note "backend audit log has the write, receipt tx-4411"`,
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
			return runReconcile(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.Outcome, "outcome", "", "the operator's decision: succeeded or failed")
	cmd.Flags().StringVar(&opts.Note, "note", "", "the evidence the decision rests on (required with --outcome)")
	cmd.Flags().BoolVar(&opts.Lookup, "lookup", false, "resolve it from the effect service's receipt instead of a decision")
	cmd.Flags().StringVar(&opts.EffectsDB, "effects-db", "", "the effect service's database for --lookup (default: "+harness.EffectsDBName+" beside the store)")
	cmd.Flags().StringVar(&opts.Operator, "operator", os.Getenv("USER"), "who decides (default $USER)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runReconcile(ctx context.Context, opts *ReconcileOptions) error {
	rec, err := harness.Reconcile(ctx, harness.ReconcileRequest{StorePath: opts.Store.path(), RunID: opts.Run, Call: opts.Call,
		Lookup: opts.Lookup, EffectsDB: opts.EffectsDB, Outcome: opts.Outcome, Note: opts.Note, Operator: opts.Operator,
		Wait: opts.Wait, Command: "assay reconcile"})
	if err != nil {
		// A lookup that resolved nothing (harness.ErrNoReceipt, ErrReceiptPayloadMismatch) is a
		// failed check, exit 1, as any error that is not bad input.
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "reconciled %s: unknown -> %s (%s), recorded in correction run %s (corrects %s)\n",
		rec.Effect.IdempotencyKey, rec.Outcome.State, rec.How, rec.CorrectionRunID, rec.RunID)
	return err
}
