package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/runid"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
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
		Long: `Resolve one effect whose outcome is unknown (see 'assay effects --state unknown') in one of two ways.

--lookup asks the backend for the effect's receipt by its idempotency key: the effect service's
SQLite database that the matrix run's embedded reference provider kept (reference-effects.db beside
the evidence store, or --effects-db FILE), read directly, so it works after the provider is gone.
A committed receipt for the intent's payload resolves the effect to succeeded (a receipt saying "not
committed", to failed) and is recorded with it. No receipt leaves it unknown and records nothing
(exit 1): check the backend yourself and decide with --outcome. A receipt for another payload under
the same key is evidence for another action and resolves nothing (exit 1).

--outcome records an operator's decision, after checking the backend yourself: did the write, the
command, the request commit? --note says on what evidence.

CALL is the call's idempotency key (RUN:MEMBER:CALL_ID) or its call id when exactly one member used it.
The decision goes through the same transition guard as the runtime: only an unknown effect can be
resolved, only to succeeded or failed, and a terminal outcome is never revised.

Finalized runs are immutable, so the decision is recorded as a new event in a correction run linked
to RUN (finalized as non_certifiable: recording a decision certifies nothing; the case's checks decide
acceptance). 'assay effects RUN' folds the correction in. A run still executing is refused.

Exit status: 0 recorded; 1 --lookup could not resolve it (no receipt, a receipt for another payload,
an unreadable database), nothing recorded; 2 bad input (unknown run or call, an effect that is not
unknown, a missing note, both or neither of --outcome and --lookup, no effects database), nothing
recorded.`,
		Example: `  assay reconcile run-20261130t101500-0a1b2c3d4e5f exec-1:r1-call_34eec85cbd21 --lookup
  assay reconcile run-20261130t101500-0a1b2c3d4e5f exec-1:r0-call_1 --outcome succeeded \
      --note "backend audit log has the write, receipt tx-4411"`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return badInput(fmt.Errorf("assay reconcile takes RUN and CALL, got %d arguments", len(args)))
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
	switch {
	case opts.Lookup && opts.Outcome != "":
		return badInput(errors.New("--lookup and --outcome exclude each other: the receipt decides, or the operator does"))
	case opts.Lookup:
	case opts.Outcome == "":
		return badInput(errors.New("say how to resolve it: --lookup (the backend's receipt) or --outcome succeeded|failed --note TEXT"))
	case opts.Outcome != tool.StateSucceeded && opts.Outcome != tool.StateFailed:
		return badInput(fmt.Errorf("--outcome must be succeeded or failed, got %q", opts.Outcome))
	case strings.TrimSpace(opts.Note) == "":
		return badInput(errors.New("--note is required: say what evidence the decision rests on"))
	case strings.TrimSpace(opts.Operator) == "":
		return badInput(errors.New("--operator is required ($USER is not set)"))
	}
	store, err := openStore(ctx, opts.Store, false, opts.Wait, "assay reconcile")
	if err != nil {
		return err
	}
	defer store.Close()
	runs, err := selectRuns(ctx, store, []string{opts.Run})
	if err != nil {
		return err
	}
	r := runs[0]
	if r.Status == evidence.StatusOpen {
		return badInput(fmt.Errorf("run %s is still executing (status open); reconcile its effects after it ends", r.RunID))
	}
	effs, err := runEffectsOf(ctx, store, r)
	if err != nil {
		return err
	}
	e, err := findEffect(effs, r.RunID, opts.Call)
	if err != nil {
		return err
	}
	if e.State != effect.Unknown {
		return badInput(fmt.Errorf("effect %s is %s, not unknown: nothing to reconcile, nothing recorded", e.IdempotencyKey, stateOf(e)))
	}
	redact := policy.NewRedactor(policy.SecretsFromEnv(os.Environ())...)
	var out tool.Outcome
	how := "operator decision"
	if opts.Lookup {
		if out, err = lookupOutcome(ctx, opts, e); err != nil {
			return err
		}
		out.Note = redact.String(out.Note)
		how = "receipt lookup, receipt " + out.Receipt.Reference
	} else {
		to := effect.State(opts.Outcome)
		if _, err := effect.Transition(e.State, effect.Event{Kind: effect.Reconcile, To: to}); err != nil {
			return badInput(fmt.Errorf("effect %s: %w; nothing recorded", e.IdempotencyKey, err))
		}
		out = tool.Outcome{RunID: e.RunID, MemberID: e.MemberID, SessionID: e.SessionID, CallID: e.CallID,
			IdempotencyKey: e.IdempotencyKey, Tool: e.Tool, State: opts.Outcome, Source: "operator", Mode: e.Mode,
			Note: redact.String(fmt.Sprintf("%s (operator %s)", opts.Note, opts.Operator)), Revision: e.Intent.Revision}
		if to == effect.Succeeded {
			out.Result = "effect confirmed by operator"
		}
	}
	ev, err := runtime.NewEvent(e.MemberID, e.SessionID, event.ToolResult{Outcome: out})
	if err != nil {
		return err
	}
	corrID := correctionRunID(r.RunID)
	if err := store.OpenRun(ctx, corrID, r.Envelope, r.RunID); err != nil {
		return fmt.Errorf("open correction run for %s: %w", r.RunID, err)
	}
	if _, err := store.AppendEvent(ctx, corrID, evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: ev.SessionID,
		Time: ev.Time, Payload: ev.Payload}); err != nil {
		return fmt.Errorf("record the decision in %s: %w", corrID, err)
	}
	if _, err := store.Finalize(ctx, corrID, evidence.Verdict{Verdict: evidence.VerdictNonCertifiable,
		Reasons: []string{fmt.Sprintf("reconciliation of %s in run %s (%s): %s; a recorded resolution certifies nothing",
			e.IdempotencyKey, r.RunID, how, out.State)}}); err != nil {
		return fmt.Errorf("finalize correction run %s: %w", corrID, err)
	}
	fmt.Fprintf(opts.IO.Out, "reconciled %s: unknown -> %s (%s), recorded in correction run %s (corrects %s)\n",
		e.IdempotencyKey, out.State, how, corrID, r.RunID)
	return nil
}

// lookupOutcome resolves e through the effect service's receipt (harness.ReconcileThroughLookup)
// in the database opts names, or the one beside the store.
func lookupOutcome(ctx context.Context, opts *ReconcileOptions, e tool.Effect) (tool.Outcome, error) {
	path := opts.EffectsDB
	if path == "" {
		path = harness.EffectsDBPath(filepath.Dir(opts.Store.path()))
	}
	db, err := reference.OpenEffectsReader(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opts.EffectsDB != "":
		return tool.Outcome{}, badInput(fmt.Errorf("no effects database at %s (--effects-db); name the file the effect service kept its receipts in, or decide with --outcome", path))
	case errors.Is(err, fs.ErrNotExist):
		return tool.Outcome{}, badInput(fmt.Errorf("no effects database at %s: the run's effects were not served by the embedded effect service there; name it with --effects-db, or decide with --outcome", path))
	case err != nil:
		return tool.Outcome{}, badInput(err)
	}
	defer db.Close()
	out, err := harness.ReconcileThroughLookup(ctx, db, e)
	switch {
	case errors.Is(err, harness.ErrNoReceipt):
		return tool.Outcome{}, failed("no receipt for %s in %s: the effect stays unknown, nothing recorded (check the backend yourself and decide with --outcome)", e.IdempotencyKey, db.Path())
	case err != nil:
		return tool.Outcome{}, failed("receipt lookup for %s did not resolve it: %v; nothing recorded", e.IdempotencyKey, err)
	}
	return out, nil
}

// correctionRunID returns a new globally unique run id for a correction of runID,
// "RUNID-reconcile-20261130t101500-0a1b2c3d4e5f" (internal/runid), RUNID shortened so that the id
// stays within the store's 128 characters.
func correctionRunID(runID string) string {
	const infix = "-reconcile-"
	if n := 128 - len(infix) - runid.SuffixLen; len(runID) > n {
		runID = runID[:n]
	}
	return runid.New(runID+infix, time.Now())
}
