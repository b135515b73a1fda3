package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// ProviderServeOptions are the parsed flags of `assay provider serve`.
type ProviderServeOptions struct {
	IO            IOStreams
	Addr          string
	Faults        []string
	SessionHeader string
	Capacity      int
	Format        string
	EffectsDB     string
}

// NewCmdProvider builds `assay provider` and its `serve` subcommand. runF replaces runProviderServe
// in tests.
func NewCmdProvider(io IOStreams, runF func(context.Context, *ProviderServeOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "provider",
		Short: "Run the embedded reference provider",
	}
	opts := &ProviderServeOptions{IO: io}
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the reference provider (an OpenAI-compatible endpoint, not a language model) on an address",
		Long: `Serve assay's embedded reference provider (model ` + reference.ModelID + `) standalone, so any OpenAI-compatible
client can use it: POST /v1/chat/completions (plain or SSE streaming, tool calls), GET /v1/models. It is
not a language model: it answers assay's task assignments and structured contracts deterministically,
and reports usage by a documented rule (see the package documentation of runtime/provider/reference).

--faults scripts failures per member and turn: MEMBER:TURN:KIND[:ARG], where MEMBER matches a session id
ending in "-MEMBER" (empty = every session), TURN is the session's 0-based request index (-1 = every
turn), KIND is one of ` + strings.Join(reference.FaultKinds(), ", ") + `, and ARG is the reply of
replace_reply or the delay of slow (e.g. 2s).

It also serves the reference effect service (PUT and GET /v1/effects/{idempotency key}, what the
remote_put tool publishes to); --effects-db keeps its receipts in a SQLite file so they outlive the
process (assay reconcile --lookup --effects-db FILE reads them), otherwise they are in memory.

It prints the base URL on stdout and serves until interrupted (Ctrl-C or SIGTERM).`,
		Example: `  assay provider serve --addr 127.0.0.1:8089
  assay provider serve --addr 127.0.0.1:0 --faults exec-2:1:drop_usage --faults critic:-1:malformed_json
  assay matrix run --base-url http://127.0.0.1:8089/v1 --model ` + reference.ModelID,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runProviderServe(c.Context(), opts)
		},
	}
	f := serve.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:8089", "TCP address to listen on (host:port; port 0 picks a free port)")
	f.StringArrayVar(&opts.Faults, "faults", nil, "scripted fault MEMBER:TURN:KIND[:ARG]; repeatable")
	f.StringVar(&opts.SessionHeader, "session-header", reference.DefaultSessionHeader, "request header carrying each member's session id (echoed on responses)")
	f.IntVar(&opts.Capacity, "parallel-capacity", reference.DefaultParallelCapacity, "max_parallel_requests the model object declares (-1 declares none)")
	f.StringVar(&opts.Format, "format", "text", "how the base URL line is printed: text or json")
	f.StringVar(&opts.EffectsDB, "effects-db", "", "SQLite file keeping the effect service's receipts (default: in memory)")
	cmd.AddCommand(serve)
	return cmd
}

func runProviderServe(ctx context.Context, opts *ProviderServeOptions) error {
	if err := checkFormat(opts.Format, "text", "json"); err != nil {
		return err
	}
	cfg := reference.Config{SessionHeader: opts.SessionHeader, ParallelCapacity: opts.Capacity, EffectsDB: opts.EffectsDB}
	if opts.Capacity == 0 {
		return badInput(errors.New("--parallel-capacity 0: declare a positive capacity, or -1 for none"))
	}
	for _, spec := range opts.Faults {
		f, err := reference.ParseFault(spec)
		if err != nil {
			return badInput(fmt.Errorf("--faults: %w", err))
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	if _, err := reference.New(cfg); err != nil {
		return badInput(err)
	}
	run, err := reference.StartOn(ctx, opts.Addr, cfg)
	if err != nil {
		return badInput(err)
	}
	defer run.Close()
	if opts.Format == "json" {
		if err := writeJSON(opts.IO.Out, map[string]any{"base_url": run.BaseURL(), "model": reference.ModelID, "faults": len(cfg.Faults)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(opts.IO.Out, run.BaseURL())
	}
	fmt.Fprintf(opts.IO.ErrOut, "assay: reference provider %s (not a language model) serving %s with %d fault(s); interrupt to stop\n",
		reference.ModelID, run.BaseURL(), len(cfg.Faults))
	select {
	case <-ctx.Done():
	case <-run.Done():
	}
	return nil
}
