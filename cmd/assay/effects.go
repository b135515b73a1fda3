package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

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
		Long: longHelp("0 listed (also when nothing matches); 1 when the store could not be read; 2 on bad input: no store, "+
			"an unknown run or state, a store a writer holds.",
			"List every tool call of the named runs' team runs (every team run when none is named) with the state its "+
				"recorded evidence establishes: the tool_call and tool_result events of the team run's first run, the runs that "+
				"resumed it and the corrections that reconciled it, folded through the runtime's own transition function. "+
				"States: "+effectStateNames()+". unknown means the call may have committed: it needs reconciliation ('assay "+
				"reconcile'), never a blind retry. When nothing matches the table says so and JSON is []. Reference: docs/cli.md."),
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
	cmd.Flags().StringVar(&opts.State, "state", "", "only effects in this state: "+effectStateNames())
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runEffects(ctx context.Context, opts *EffectsOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	effs, err := harness.Effects(ctx, harness.EffectsQuery{StorePath: opts.Store.path(), Runs: opts.Runs, State: opts.State,
		Wait: opts.Wait, Command: "assay effects"})
	if err != nil {
		return err
	}
	if format == "json" {
		if effs == nil {
			effs = []tool.Effect{}
		}
		return writeJSON(opts.IO.Out, map[string]any{"effects": effs})
	}
	if len(effs) == 0 {
		// A bare header would read like a truncated listing; say that nothing matched.
		if opts.State != "" {
			_, err := fmt.Fprintf(opts.IO.Out, "no effects in state %s\n", opts.State)
			return err
		}
		_, err := fmt.Fprintln(opts.IO.Out, "no effects")
		return err
	}
	// RUN is the run that made the call (proposed it: the team run's first run, or a run that
	// resumed it); approve and reconcile take any run of the team run.
	t := table{header: []string{"RUN", "MEMBER", "CALL", "TOOL", "ACCESS", "STATE", "SOURCE", "RECONCILE"}}
	for _, e := range effs {
		rec := "-"
		if e.ReconciliationRequired {
			rec = "required"
		}
		run := e.ProposedIn
		if run == "" {
			run = e.RunID
		}
		t.rows = append(t.rows, []string{run, e.MemberID, e.CallID, e.Tool, string(e.Access), string(e.State), e.Source, rec})
	}
	return t.writeText(opts.IO.Out)
}

// effectStateNames is "awaiting_approval, pending, ..." (effect.States).
func effectStateNames() string {
	var names []string
	for _, st := range effect.States() {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}
