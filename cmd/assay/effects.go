package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/tool"
)

// EffectsOptions are the parsed flags of `assay effects`.
type EffectsOptions struct {
	IO     IOStreams
	Store  storeFlags
	Format string
	State  string
	Runs   []string
	Wait   time.Duration
}

// NewCmdEffects builds `assay effects [RUN...]`.
func NewCmdEffects(io IOStreams, runF func(context.Context, *EffectsOptions) error) *cobra.Command {
	opts := &EffectsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "effects [RUN...]",
		Short: "List the tool-call effects of runs, e.g. those whose outcome is unknown",
		Long: `List every tool call of the named runs (all runs when none are named) with the state its recorded
evidence establishes: the run's tool_call and tool_result events, and the operator decisions recorded
in correction runs linked to it, folded through the same transition function the runtime uses. A late
acknowledgement never overwrites a terminal outcome here either.

States: awaiting_approval, pending, running, succeeded, failed, unknown, cancelled. "unknown" means the
call was dispatched and its outcome was lost (a timeout, a lost response, a process killed between
intent and outcome): the effect may have committed. It needs reconciliation, never a blind retry:
see 'assay reconcile'. A run that is still executing shows its in-flight calls as running; in a
finished or interrupted run they are unknown. When nothing matches, the table format prints
"no effects in state STATE" (or "no effects") and --format json prints [].`,
		Example: `  assay effects --state unknown
  assay effects --format json run-20261130t101500-0a1b2c3d4e5f`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runEffects(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	cmd.Flags().StringVar(&opts.State, "state", "", "only effects in this state (e.g. unknown)")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

var effectStates = []string{"awaiting_approval", "pending", "running", "succeeded", "failed", "unknown", "cancelled"}

func runEffects(ctx context.Context, opts *EffectsOptions) error {
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	if opts.State != "" && !slices.Contains(effectStates, opts.State) {
		return badInput(fmt.Errorf("--state %q is not one of %s", opts.State, strings.Join(effectStates, ", ")))
	}
	store, err := openStore(ctx, opts.Store, true, opts.Wait, "assay effects")
	if err != nil {
		return err
	}
	defer store.Close()
	runs, err := selectRuns(ctx, store, opts.Runs)
	if err != nil {
		return err
	}
	if len(opts.Runs) == 0 {
		// Every run: each team run once, from its first run (its family holds the runs that
		// resumed or corrected it).
		runs = slices.DeleteFunc(runs, func(r evidence.RunSummary) bool { return r.CorrectsRunID != "" })
	}
	var all []tool.Effect
	for _, r := range runs {
		effs, err := runEffectsOf(ctx, store, r)
		if err != nil {
			return err
		}
		for _, e := range effs {
			if opts.State == "" || string(e.State) == opts.State {
				all = append(all, e)
			}
		}
	}
	if opts.Format == "json" {
		if all == nil {
			all = []tool.Effect{}
		}
		return writeJSON(opts.IO.Out, all)
	}
	if len(all) == 0 {
		// A bare header would read like a truncated listing; say that nothing matched.
		if opts.State != "" {
			_, err := fmt.Fprintf(opts.IO.Out, "no effects in state %s\n", opts.State)
			return err
		}
		_, err := fmt.Fprintln(opts.IO.Out, "no effects")
		return err
	}
	t := table{header: []string{"RUN", "MEMBER", "CALL", "TOOL", "ACCESS", "STATE", "SOURCE", "RECONCILE"}}
	for _, e := range all {
		rec := "-"
		if e.ReconciliationRequired {
			rec = "required"
		}
		t.rows = append(t.rows, []string{e.RunID, e.MemberID, e.CallID, e.Tool, string(e.Access), string(e.State), e.Source, rec})
	}
	return t.writeText(opts.IO.Out)
}

// openStore opens the evidence store, turning a missing store into bad input.
func openStore(ctx context.Context, f storeFlags, readOnly bool, wait time.Duration, command string) (*evidence.Store, error) {
	store, err := evidence.Open(ctx, f.path(), evidence.OpenOptions{ReadOnly: readOnly, Wait: wait, Command: command})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, badInput(fmt.Errorf("no evidence store at %s: run `assay matrix run` first, or name one with --out or --store", f.path()))
	}
	if err != nil {
		return nil, badInput(err)
	}
	return store, nil
}

// selectRuns returns the named runs (each must exist: no fallback to another) or every run that is
// not itself a correction.
func selectRuns(ctx context.Context, store *evidence.Store, names []string) ([]evidence.RunSummary, error) {
	all, err := store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	if len(names) == 0 {
		var out []evidence.RunSummary
		for _, r := range all {
			if r.CorrectsRunID == "" {
				out = append(out, r)
			}
		}
		return out, nil
	}
	var out []evidence.RunSummary
	for _, n := range names {
		i := slices.IndexFunc(all, func(r evidence.RunSummary) bool { return r.RunID == n })
		if i < 0 {
			return nil, badInput(fmt.Errorf("no run %q in %s", n, store.Path()))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// runEffectsOf replays the tool events of run r's family — the first run of its team run, the runs
// that resumed it and every reconciliation correction (harness.Family) — in the order they were
// created: the effects as everything recorded establishes them.
func runEffectsOf(ctx context.Context, store *evidence.Store, r evidence.RunSummary) ([]tool.Effect, error) {
	all, err := store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	records, err := harness.FamilyRecords(ctx, store, all, r.RunID)
	if err != nil {
		return nil, err
	}
	open := false
	for _, f := range harness.Family(all, r.RunID) {
		open = open || f.Status == evidence.StatusOpen
	}
	effs, err := tool.Replay(records, open)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.RunID, err)
	}
	return effs, nil
}

// findEffect returns the effect of run r named by call: an idempotency key, or a call id that exactly
// one member used. An ambiguous or missing call is bad input; nothing is guessed.
func findEffect(effs []tool.Effect, runID, call string) (tool.Effect, error) {
	var match []tool.Effect
	for _, e := range effs {
		if e.IdempotencyKey == call || e.CallID == call || e.MemberID+":"+e.CallID == call {
			match = append(match, e)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return tool.Effect{}, badInput(fmt.Errorf("run %s has no tool call %q (see 'assay effects %s')", runID, call, runID))
	}
	var keys []string
	for _, e := range match {
		keys = append(keys, e.IdempotencyKey)
	}
	return tool.Effect{}, badInput(fmt.Errorf("call id %q is used by several members of run %s; name one of %s", call, runID, strings.Join(keys, ", ")))
}

// stateOf is the effect state name for messages.
func stateOf(e tool.Effect) string {
	if e.State == effect.Unknown {
		return "unknown (reconciliation required)"
	}
	return string(e.State)
}
