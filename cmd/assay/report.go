package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/reports"
	"github.com/assay-audit/assay/reports/audit"
	"github.com/assay-audit/assay/runtime/formation"
)

// ReportOptions are the parsed flags of `assay report`.
type ReportOptions struct {
	IO         IOStreams
	Store      storeFlags
	Runs       []string
	Latest     bool
	All        bool
	Since      string
	Formations []string
	Cases      []string
	Verdicts   []string
	Format     string
	Output     string
	Wait       time.Duration
	NoVerify   bool
	// GroupBy is --group-by: the axis the report also groups its cases by ("" = by invocation only).
	GroupBy string
	// Graph is --graph DB: render the code-graph report of that database instead (runGraphReport).
	Graph     string
	graphOpts graphReportOptions
}

// NewCmdReport builds `assay report [RUN...]`.
func NewCmdReport(io IOStreams, runF func(context.Context, *ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "report [RUN...]",
		Short: "Render an audit report of the evidence store: Markdown, HTML, JSON, JUnit XML or SARIF, for any selection of runs",
		Long: longHelp("0 when the report was written; 1 when the store could not be read or the file written; 2 on bad "+
			"input: an unknown run, format or verdict, a malformed --since, selections that exclude each other, no store, a "+
			"store a writer holds. The exit status never depends on the runs' verdicts.",
			"Render the runs named, or those of --latest (the last invocation, the default), --all or --since DATE, kept by "+
				"--formation, --case and --verdict, from the evidence store only: per invocation the provider, model, "+
				"environment (re-derived from its recorded preimage), policy and totals; per case its checks, members' usage "+
				"by source, timings, approvals, lineage, full hashes and links to its evidence files, failures first. "+
				"Formats: "+strings.Join(reportFormatNames(), ", ")+". With --graph DB: the code-graph report instead. docs/cli.md."),
		Example: `  assay report
  assay report --all --format json --output report.json
  assay report --since 2026-12-01 --verdict rejected
  assay report --latest --format junit --output junit.xml
  assay report run-20261201t101500-0a1b2c3d4e5f --case parallel+vote
  assay report --graph assay-out/graph.db --format html --output graph.html`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if opts.Graph != "" {
				return graphReport(c, opts)
			}
			if !c.Flags().Changed("format") {
				if f := formatOfOutput(opts.Output); f != "" {
					opts.Format = f // --output report.html writes HTML, never Markdown under that name
				}
			}
			if err := checkReportNames(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runReport(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&opts.Latest, "latest", false, "the runs of the last invocation (the default)")
	f.BoolVar(&opts.All, "all", false, "every run of the store")
	f.StringVar(&opts.Since, "since", "", "runs created at or after this time: YYYY-MM-DD or RFC 3339 (UTC when no zone)")
	f.StringSliceVar(&opts.Formations, "formation", nil, "keep runs of these formations (repeatable, comma-separated)")
	f.StringSliceVar(&opts.Cases, "case", nil, "keep runs of these catalog cases, e.g. parallel+vote (repeatable)")
	f.StringSliceVar(&opts.Verdicts, "verdict", nil, "keep runs with these verdicts: accepted, rejected, non_certifiable, interrupted, open")
	f.StringVar(&opts.Format, "format", "md", "report format: "+strings.Join(reportFormatNames(), ", "))
	f.StringVar(&opts.Output, "output", "", "write the report to this file (atomically, mode 0644) instead of stdout")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	f.StringVar(&opts.GroupBy, "group-by", "", "also group the cases by one axis (a section in md and html, group_by and groups in json, a testsuite per group in junit): "+strings.Join(reports.GroupAxisNames(), ", "))
	f.BoolVar(&opts.NoVerify, "no-verify", false, "do not recompute the runs' evidence (faster on large stores); the report then says its verdicts are unverified")
	addGraphReportFlags(f, &opts.Graph, &opts.graphOpts)
	return cmd
}

// graphReport runs `assay report --graph DB`: the code-graph report, which takes no run selection.
func graphReport(c *cobra.Command, opts *ReportOptions) error {
	for _, name := range []string{"latest", "all", "since", "formation", "case", "verdict", "store", "wait", "no-verify", "group-by"} {
		if c.Flags().Changed(name) {
			return usageErrorf("--%s selects evidence runs; --graph renders a graph database: leave one out", name)
		}
	}
	if len(opts.Runs) > 0 {
		return usageErrorf("--graph renders a graph database and takes no run ids")
	}
	g := opts.graphOpts
	g.Output = opts.Output
	if c.Flags().Changed("format") {
		g.Format = opts.Format
	}
	c.SetOut(opts.IO.Out)
	return runGraphReport(c, opts.Graph, g)
}

func reportFormatNames() []string {
	var names []string
	for _, f := range reports.Formats() {
		names = append(names, f.Name)
	}
	return append(names, sarifFormat)
}

// sarifFormat is `assay report --format sarif`: the findings of `assay audit` over the selected
// runs (every rule of the risk register), as SARIF 2.1.0.
const sarifFormat = "sarif"

// writeReportSARIF evaluates the risk register over the runs of r (none selected: a result with no
// runs, never the whole store) and writes it as SARIF 2.1.0 to --output or stdout.
func writeReportSARIF(ctx context.Context, opts *ReportOptions, store *evidence.Store, r reports.Report) error {
	var ids []string
	for _, inv := range r.Invocations {
		for _, c := range inv.Cases {
			ids = append(ids, c.RunID)
		}
	}
	if len(ids) == 0 {
		return usageErrorf("the selection holds no run: nothing to audit")
	}
	res, err := audit.Evaluate(ctx, store, audit.Options{Runs: ids,
		Bindings: harness.BindingCheckers(filepath.Dir(opts.Store.path()))})
	if err != nil {
		return err
	}
	out, err := audit.SARIF(res, audit.SARIFOptions{ToolVersion: version})
	if err != nil {
		return err
	}
	if opts.Output != "" {
		if err := reports.WriteFileAtomic(opts.Output, out); err != nil {
			return fmt.Errorf("write %s: %w", opts.Output, err)
		}
		return nil
	}
	_, err = opts.IO.Out.Write(out)
	return err
}

// reportVerdicts are the values --verdict takes: verdicts, and the statuses of runs without one.
var reportVerdicts = []string{evidence.VerdictAccepted, evidence.VerdictRejected, evidence.VerdictNonCertifiable,
	evidence.StatusInterrupted, evidence.StatusOpen}

// reportSelection checks the selection flags and builds the reports.Selection; every error is
// bad usage.
func reportSelection(opts *ReportOptions) (reports.Selection, error) {
	sel := reports.Selection{RunIDs: opts.Runs, Latest: opts.Latest, All: opts.All, Formations: opts.Formations,
		Cases: opts.Cases, Verdicts: opts.Verdicts, GroupBy: opts.GroupBy}
	if _, ok := reports.LookupGroupAxis(opts.GroupBy); opts.GroupBy != "" && !ok {
		return sel, usageErrorf("--group-by %q is not one of %s", opts.GroupBy, strings.Join(reports.GroupAxisNames(), ", "))
	}
	n := 0
	for _, set := range []bool{len(opts.Runs) > 0, opts.Latest, opts.All, opts.Since != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return sel, usageErrorf("choose one of RUN..., --latest, --all and --since")
	}
	if opts.Since != "" {
		t, err := parseSince(opts.Since)
		if err != nil {
			return sel, usageErrorf("--since %q is neither YYYY-MM-DD nor an RFC 3339 time", opts.Since)
		}
		sel.Since = t
	}
	for _, v := range opts.Verdicts {
		if !slices.Contains(reportVerdicts, v) {
			return sel, usageErrorf("--verdict %q is not one of %s", v, strings.Join(reportVerdicts, ", "))
		}
	}
	return sel, nil
}

// checkReportNames refuses a --case that is no catalog case and a --formation that is no formation:
// a typo would otherwise select nothing and read as "no runs".
func checkReportNames(opts *ReportOptions) error {
	for _, c := range opts.Cases {
		if !slices.Contains(harness.CatalogNames(), c) {
			return usageErrorf("--case %q is not a catalog case (%s)", c, strings.Join(harness.CatalogNames(), ", "))
		}
	}
	for _, f := range opts.Formations {
		if !slices.Contains(formation.Names(), f) {
			return usageErrorf("--formation %q is not a formation (%s)", f, strings.Join(formation.Names(), ", "))
		}
	}
	return nil
}

// parseSince reads YYYY-MM-DD (UTC midnight), YYYY-MM-DDTHH:MM:SS (UTC) or RFC 3339.
func parseSince(s string) (time.Time, error) {
	var err error
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		var t time.Time
		if t, err = time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

func runReport(ctx context.Context, opts *ReportOptions) error {
	format, ok := reports.LookupFormat(opts.Format)
	if !ok && opts.Format != sarifFormat {
		return usageErrorf("--format %q is not one of %s", opts.Format, strings.Join(reportFormatNames(), ", "))
	}
	sel, err := reportSelection(opts)
	if err != nil {
		return err
	}
	if err := checkOutputPath(opts.Output, opts.Store.path()); err != nil {
		return err
	}
	sel.Bindings = harness.BindingCheckers(filepath.Dir(opts.Store.path()))
	sel.NoVerify = opts.NoVerify
	store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: "assay report"})
	if err != nil {
		return err
	}
	r, err := reports.Load(ctx, store, sel)
	if err == nil && r.Totals.Cases == 0 {
		// An empty report (an empty JUnit file, a SARIF log of nothing) reads as green to a CI gate.
		store.Close()
		return usageErrorf("no run matches the selection (%s): nothing written", r.Selection)
	}
	if err == nil && opts.Format == sarifFormat {
		err = writeReportSARIF(ctx, opts, store, r)
		store.Close()
		return err
	}
	store.Close()
	if err != nil {
		return err
	}
	if opts.Output != "" {
		// Links resolve from the file's own directory.
		if r, err = r.Rebase(filepath.Dir(opts.Output)); err != nil {
			return err
		}
		return reports.WriteReportFile(opts.Output, format, r)
	}
	var buf bytes.Buffer
	if err := format.Render(&buf, r); err != nil {
		return err
	}
	_, err = opts.IO.Out.Write(buf.Bytes())
	return err
}
