package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// ProviderServeOptions are the parsed flags of `assay provider serve` (Faults parsed from --faults).
type ProviderServeOptions struct {
	IO            IOStreams
	Addr          string
	Faults        []reference.Fault
	SessionHeader string
	Capacity      int
	Format        string
	EffectsDB     string
	// Model is --model: the model id served and answered with ("" = reference.ModelID).
	Model string
}

// NewCmdProvider builds `assay provider` and its `serve` subcommand. runF replaces runProviderServe
// in tests.
func NewCmdProvider(io IOStreams, runF func(context.Context, *ProviderServeOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "provider",
		Short: "Run the embedded reference provider",
	}
	opts := &ProviderServeOptions{IO: io}
	var faults []string
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Serve the reference provider (an OpenAI-compatible endpoint, not a language model) on an address",
		Long: longHelp("0 when interrupted; 1 when it could not serve (the port is taken); 2 on bad input: a malformed "+
			"address, fault, model id or session header, a file that is not an effects database.",
			"Serve the embedded reference provider (model "+reference.ModelID+", not a language model: it answers assay's "+
				"task assignments deterministically) on --addr for any OpenAI-compatible client: POST /v1/chat/completions "+
				"(plain or SSE, tool calls), GET /v1/models; and the reference effect service (PUT and GET /v1/effects/{key}), "+
				"whose receipts --effects-db keeps in a SQLite file for 'assay reconcile --lookup'. --faults "+
				"MEMBER:TURN:KIND[:ARG] scripts failures, KIND one of "+list("or", reference.FaultKinds()...)+". It prints the "+
				"base URL and serves until interrupted. Reference: docs/cli.md."),
		Example: `  assay provider serve --addr 127.0.0.1:8089
  assay provider serve --addr 127.0.0.1:0 --faults exec-2:1:drop_usage --faults critic:-1:malformed_json
  assay matrix run --base-url http://127.0.0.1:8089/v1 --model ` + reference.ModelID,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if opts.Faults, err = parseFaults("--faults", faults); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runProviderServe(c.Context(), opts)
		},
	}
	f := serve.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:8089", "TCP address to listen on (host:port; port 0 picks a free port)")
	f.StringArrayVar(&faults, "faults", nil, "scripted fault MEMBER:TURN:KIND[:ARG]; repeatable")
	f.StringVar(&opts.SessionHeader, "session-header", reference.DefaultSessionHeader, "request header carrying each member's session id (echoed on responses)")
	f.IntVar(&opts.Capacity, "parallel-capacity", reference.DefaultParallelCapacity, "max_parallel_requests the model object declares (0 = the default; -1 declares none)")
	f.StringVar(&opts.Format, "format", "text", "how the base URL line is printed: text or json")
	f.StringVar(&opts.Model, "model", reference.ModelID, "model id the server serves and answers with (two servers with different ids stand for two models of a matrix; the answers are the same)")
	f.StringVar(&opts.EffectsDB, "effects-db", "", "SQLite file keeping the effect service's receipts (default: in memory)")
	cmd.AddCommand(serve)
	return cmd
}

func runProviderServe(ctx context.Context, opts *ProviderServeOptions) error {
	format, err := outputFormat(opts.Format, "text", "json")
	if err != nil {
		return err
	}
	cfg := reference.Config{SessionHeader: opts.SessionHeader, ParallelCapacity: opts.Capacity, EffectsDB: opts.EffectsDB, Faults: opts.Faults, Model: opts.Model}
	model := opts.Model
	if model == "" {
		model = reference.ModelID
	}
	run, err := reference.StartOn(ctx, opts.Addr, cfg)
	if err != nil {
		return err
	}
	defer run.Close()
	if format == "json" {
		if err := writeJSON(opts.IO.Out, map[string]any{"base_url": run.BaseURL(), "model": model, "faults": len(cfg.Faults)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(opts.IO.Out, run.BaseURL())
	}
	fmt.Fprintf(opts.IO.ErrOut, "assay: reference provider %s (not a language model) serving %s with %d fault(s); interrupt to stop\n",
		model, run.BaseURL(), len(cfg.Faults))
	select {
	case <-ctx.Done():
	case <-run.Done():
	}
	return nil
}
