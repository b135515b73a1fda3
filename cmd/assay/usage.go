package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness/claims"
	"github.com/assay-audit/assay/harness/gateway"
)

// UsageReconcileOptions are the parsed flags of `assay usage reconcile`.
type UsageReconcileOptions struct {
	IO        IOStreams
	GatewayDB string
	Claims    string
	Into      string
	Tenant    string
	Wait      time.Duration
	Format    string
}

// NewCmdUsage builds `assay usage` and its `reconcile` subcommand. runF replaces runUsageReconcile
// in tests.
func NewCmdUsage(io IOStreams, runF func(context.Context, *UsageReconcileOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Reconcile an external system's usage claims against the observing gateway's records",
	}
	opts := &UsageReconcileOptions{IO: io}
	rec := &cobra.Command{
		Use:   "reconcile --gateway-db DB --claims FILE",
		Short: "Reconcile a system's own per-session token claims against the gateway database's rows",
		Long: longHelp("0 every session is conserved and no request is unattributed; 1 a session is mismatch or unknown, "+
			"a request carried no session id, there is nothing to reconcile, or --into could not be written; 2 on bad "+
			"input: a malformed claims line (named by number), a missing --gateway-db or --claims, a file that is not a "+
			"gateway database, a store another process holds; nothing is written.",
			"Compare the tokens an external system claims per session (--claims, JSON lines: docs/usage-claims.md) with "+
				"the rows of the observing gateway's database. Per session: conserved, mismatch (the field and both values) "+
				"or unknown (records but no claim, a claim but no record, or usage not reported for every request). Requests "+
				"without a session id are listed as unattributed. --into STORE records the reconciliation as an observe-mode "+
				"run (finalized, non_certifiable) for 'assay verify' and 'assay report'. docs/gateway.md, docs/cli.md."),
		Example: `  assay usage reconcile --gateway-db gateway-usage.db --claims claims.jsonl
  assay usage reconcile --gateway-db gateway-usage.db --claims claims.jsonl --format json --into assay-out/evidence.duckdb`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runUsageReconcile(c.Context(), opts)
		},
	}
	f := rec.Flags()
	f.StringVar(&opts.GatewayDB, "gateway-db", "", "the observing gateway's SQLite usage database (required)")
	f.StringVar(&opts.Claims, "claims", "", "the system's usage claims, JSON lines (required; docs/usage-claims.md)")
	f.StringVar(&opts.Into, "into", "", "record the reconciliation as an observe-mode run in this evidence store (e.g. assay-out/evidence.duckdb)")
	f.StringVar(&opts.Tenant, "tenant", "local", "tenant recorded in the run's envelope (with --into)")
	f.DurationVar(&opts.Wait, "wait", 0, "with --into, wait up to this long for a writer holding the store (e.g. 30s)")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	cmd.AddCommand(rec)
	return cmd
}

func runUsageReconcile(ctx context.Context, opts *UsageReconcileOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	if opts.GatewayDB == "" {
		return usageErrorf("--gateway-db is required: the observing gateway's usage database")
	}
	if opts.Claims == "" {
		return usageErrorf("--claims is required: the system's usage claims, JSON lines (docs/usage-claims.md)")
	}
	if fi, err := os.Stat(opts.Claims); err == nil && fi.IsDir() {
		return usageErrorf("--claims %s is a directory: name the claims file (JSON lines)", opts.Claims)
	}
	raw, err := os.ReadFile(opts.Claims)
	if err != nil {
		return fmt.Errorf("--claims: %w", err)
	}
	cs, err := claims.Parse(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("--claims %s: %w", opts.Claims, err)
	}
	recs, err := gateway.ReadDatabase(ctx, opts.GatewayDB)
	if err != nil {
		return fmt.Errorf("--gateway-db: %w", withoutPrefix(err, "gateway: "))
	}
	res := claims.Reconcile(cs, recs)
	var recorded *claims.Recorded
	if opts.Into != "" {
		r, err := claims.Record(ctx, claims.RecordRequest{StorePath: opts.Into, Tenant: opts.Tenant, ToolVersion: version,
			GatewayDB: opts.GatewayDB, Records: recs, Claims: raw, ClaimLines: len(cs), Result: res, Wait: opts.Wait,
			Command: "assay usage reconcile"})
		if err != nil {
			return fmt.Errorf("--into %s: %w", opts.Into, withoutPrefix(err, "evidence: "))
		}
		recorded = &r
	}
	if format == "json" {
		out := struct {
			GatewayDB string `json:"gateway_db"`
			Claims    string `json:"claims"`
			OK        bool   `json:"ok"`
			claims.Result
			Problems []string         `json:"problems"`
			Recorded *claims.Recorded `json:"recorded"`
		}{opts.GatewayDB, opts.Claims, res.OK(), res, res.Problems(), recorded}
		if out.Problems == nil {
			out.Problems = []string{}
		}
		err = writeJSON(opts.IO.Out, out)
	} else {
		err = writeReconcileTable(opts, res, recorded)
	}
	if err != nil {
		return err
	}
	if !res.OK() {
		// The counts, and the first problem: the output above lists every session and problem.
		p := res.Problems()
		first := ""
		if len(p) > 0 {
			first = "; first: " + p[0]
			if len(p) > 1 {
				first += fmt.Sprintf(" (and %d more, listed above)", len(p)-1)
			}
		}
		return failed("usage claims not conserved: %d session(s): %d conserved, %d mismatch, %d unknown; %d unattributed request(s)%s",
			len(res.Sessions), res.Conserved, res.Mismatched, res.Unknown, res.Unattributed.Requests, first)
	}
	return nil
}

func writeReconcileTable(opts *UsageReconcileOptions, res claims.Result, rec *claims.Recorded) error {
	count := func(v *int64) string {
		if v == nil {
			return "unknown"
		}
		return strconv.FormatInt(*v, 10)
	}
	t := table{header: []string{"SESSION", "MEMBER", "VERDICT", "REQUESTS", "CLAIMED TOTAL", "GATEWAY TOTAL", "REASON"}}
	for _, s := range res.Sessions {
		claimed := count(s.ClaimedTotalTokens)
		if s.Claims == 0 {
			claimed = "-"
		}
		gw := count(s.GatewayTotalTokens)
		if s.Requests == 0 {
			gw = "-"
		}
		t.rows = append(t.rows, []string{s.SessionID, s.MemberID, s.Verdict, strconv.Itoa(s.Requests), claimed, gw, s.Reason})
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	u := res.Unattributed
	if u.Requests > 0 {
		fmt.Fprintf(opts.IO.Out, "\nunattributed: %d request(s) without a session id, %s to %s, total tokens %s\n",
			u.Requests, u.FirstAt.Format(time.RFC3339), u.LastAt.Format(time.RFC3339), count(u.TotalTokens))
		ut := table{header: []string{"RECORD", "STARTED", "PATH", "STATUS", "USAGE", "TOTAL"}}
		for _, r := range u.List {
			ut.rows = append(ut.rows, []string{strconv.FormatInt(r.ID, 10), r.StartedAt.Format(time.RFC3339Nano), r.Path,
				strconv.Itoa(r.Status), r.UsageState, count(r.TotalTokens)})
		}
		if err := ut.writeText(opts.IO.Out); err != nil {
			return err
		}
	}
	if n := len(res.NoUsageRequests); n > 0 {
		fmt.Fprintf(opts.IO.Out, "\n%d GET/HEAD request(s) with no usage (a model listing, a health probe): in no sum, not a problem\n", n)
	}
	fmt.Fprintf(opts.IO.Out, "\n%d session(s): %d conserved, %d mismatch, %d unknown; %d unattributed request(s)\n",
		len(res.Sessions), res.Conserved, res.Mismatched, res.Unknown, u.Requests)
	if rec != nil {
		fmt.Fprintf(opts.IO.Out, "recorded as run %s in %s: %s (observe mode), terminal hash %s\n", rec.RunID, opts.Into, rec.Verdict.Verdict, rec.TerminalHash)
	}
	return nil
}
