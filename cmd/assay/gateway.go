package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness/gateway"
)

// GatewayServeOptions are the parsed flags of `assay gateway serve`.
type GatewayServeOptions struct {
	IO             IOStreams
	Upstream       string
	Addr           string
	DB             string
	SessionHeaders []string
	ShutdownGrace  time.Duration
	Format         string
}

// NewCmdGateway builds `assay gateway` and its `serve` subcommand. runF replaces runGatewayServe in
// tests.
func NewCmdGateway(io IOStreams, runF func(context.Context, *GatewayServeOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the observing gateway in front of any OpenAI-compatible provider",
	}
	opts := &GatewayServeOptions{IO: io}
	serve := &cobra.Command{
		Use:   "serve --upstream URL",
		Short: "Serve the observing gateway: a reverse proxy that records every request's usage in a SQLite database",
		Long: longHelp("0 when stopped by SIGTERM or SIGINT with every request recorded; 1 when it could not serve (the "+
			"address is taken) or a relayed request could not be recorded; 2 on bad input: a malformed --upstream, "+
			"--addr or --session-header, a --db another gateway holds or that is not a gateway database.",
			"Serve the observing gateway on --addr for any OpenAI-compatible client: each request goes unchanged to "+
				"--upstream and is recorded in the SQLite database --db: session id (--session-header), models asked and "+
				"answered, status, latency, body SHA-256s, reported usage (reported, unknown, suspect_zero) and relay errors (a "+
				"stream cut before [DONE] is never reported usage). Credentials are forwarded, never stored or logged. GET "+
				"/admin/usage/run/{session_id} and /admin/health. It prints the clients' base URL; SIGTERM or SIGINT lets "+
				"requests in flight finish within --shutdown-grace. docs/gateway.md, docs/cli.md."),
		Example: `  assay gateway serve --upstream http://127.0.0.1:8089/v1 --addr 127.0.0.1:8090 --db gateway-usage.db
  assay gateway serve --upstream https://api.openai.com/v1 --addr 127.0.0.1:0 --session-header x-inferflux-session-id`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runGatewayServe(c.Context(), opts)
		},
	}
	f := serve.Flags()
	f.StringVar(&opts.Upstream, "upstream", "", "the provider's base URL, http(s)://host[:port][/path] (required)")
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:8090", "TCP address to listen on (host:port; port 0 picks a free port)")
	f.StringVar(&opts.DB, "db", "gateway-usage.db", "the SQLite usage database (created if missing)")
	f.StringArrayVar(&opts.SessionHeaders, "session-header", []string{gateway.DefaultSessionHeader}, "request header carrying the session id; repeatable (headers that disagree attribute a request to no session)")
	f.DurationVar(&opts.ShutdownGrace, "shutdown-grace", gateway.DefaultShutdownGrace, "how long requests in flight may take to finish after SIGTERM or SIGINT")
	f.StringVar(&opts.Format, "format", "text", "how the base URL line on stdout is printed: text or json")
	cmd.AddCommand(serve)
	return cmd
}

func runGatewayServe(ctx context.Context, opts *GatewayServeOptions) error {
	format, err := outputFormat(opts.Format, "text", "json")
	if err != nil {
		return err
	}
	if opts.Upstream == "" {
		return usageErrorf("--upstream is required: the provider's base URL, e.g. http://127.0.0.1:8089/v1")
	}
	up, err := url.Parse(opts.Upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return usageErrorf("--upstream %q is not an absolute http(s) URL", opts.Upstream)
	}
	if up.RawQuery != "" || up.Fragment != "" {
		return usageErrorf("--upstream %q has a query or fragment: give the base URL only (a key in the query string would be forwarded unseen)", redactURL(up))
	}
	if opts.ShutdownGrace <= 0 {
		return usageErrorf("--shutdown-grace %s must be positive", opts.ShutdownGrace)
	}
	basePath := strings.TrimRight(up.Path, "/")
	origin := *up
	origin.Path, origin.RawPath = "", ""
	// The gateway ends with ctx (SIGTERM, SIGINT) and is closed below either way; Close waits for
	// every request in flight to be recorded.
	gw, err := gateway.Start(ctx, gateway.Config{Upstream: origin.String(), SessionHeaders: opts.SessionHeaders, Addr: opts.Addr,
		DBPath: opts.DB, ShutdownGrace: opts.ShutdownGrace, ErrorLog: log.New(opts.IO.ErrOut, "assay gateway: ", 0)})
	if err != nil {
		if errors.Is(err, gateway.ErrConfig) {
			return usageErrorf("%w", err)
		}
		return err
	}
	base := gw.URL() + basePath
	if format == "json" {
		err = writeJSON(opts.IO.Out, map[string]any{"base_url": base, "upstream": redactURL(up), "db": opts.DB, "session_headers": gw.SessionHeaders()})
	} else {
		_, err = fmt.Fprintln(opts.IO.Out, base)
	}
	if err != nil {
		return errors.Join(err, gw.Close())
	}
	fmt.Fprintf(opts.IO.ErrOut, "assay: gateway listening on %s (upstream %s, usage database %s, session header(s) %s); SIGTERM or SIGINT stops it\n",
		base, redactURL(up), opts.DB, strings.Join(gw.SessionHeaders(), ", "))
	<-ctx.Done()
	if err := gw.Close(); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "assay: gateway stopped; every request recorded in %s (last record id %d)\n", opts.DB, gw.Mark())
	return nil
}

// redactURL is u without user info, query and fragment, which may carry credentials.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}
