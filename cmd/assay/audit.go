package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/atomicfile"
	"github.com/assay-audit/assay/reports/audit"
)

// AuditOptions are the parsed flags of `assay audit`.
type AuditOptions struct {
	IO      IOStreams
	Store   storeFlags
	Runs    []string
	Rules   []string
	Format  string
	Output  string        // file to write instead of stdout; "" = stdout
	Graph   string        // graph database for --fail-on; "" = none
	FailOn  []string      // METRIC>N thresholds
	Wait    time.Duration // how long to wait for a writer holding the store
	Metrics bool          // metric thresholds only: --graph given without a store flag or RUN
}

// NewCmdAudit builds `assay audit [RUN...]`.
func NewCmdAudit(io IOStreams, runF func(context.Context, *AuditOptions) error) *cobra.Command {
	opts := &AuditOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "audit [RUN...]",
		Short: "Check the evidence store against the risk register (R01–R14) and code metrics against thresholds",
		Long: longHelp("0 no critical finding and no threshold exceeded; 1 a critical finding, a threshold exceeded, or a "+
			"store that could not be read; 2 on bad input: no store, an unknown run, rule, metric or format, a threshold "+
			"that does not parse, a store a writer holds (nothing is written then).",
			"Evaluate the risk register (RISKS.md R01–R14) over the evidence store, read-only: each rule re-derives its "+
				"answer from the recorded bytes and lists its status: passed (evaluated over rows that exist), finding "+
				"(severity, evidence rows, the query that found it) or not_assessable (with the reason; never passed). RUN... "+
				"narrows the runs. --graph DB --fail-on METRIC>N (>=, <, <=; repeatable) reports code over a metric "+
				"threshold with file and lines. Reference: docs/audit.md, docs/cli.md."),
		Example: `  assay audit
  assay audit --rule R10,R11 --format json
  assay audit --format sarif --output audit.sarif
  assay audit --graph assay-out/graph.db --fail-on 'cognitive>30' --fail-on 'cyclomatic>=15' --format sarif`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			opts.Metrics = opts.Graph != "" && len(args) == 0 && !c.Flags().Changed("out") && !c.Flags().Changed("store")
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runAudit(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	cmd.Flags().StringSliceVar(&opts.Rules, "rule", nil, "rules to evaluate, e.g. R01,R10 (default: all)")
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table, json or sarif")
	cmd.Flags().StringVar(&opts.Output, "output", "", "write the output to this file instead of stdout")
	cmd.Flags().StringVar(&opts.Graph, "graph", "", "code graph database whose metrics --fail-on checks")
	cmd.Flags().StringArrayVar(&opts.FailOn, "fail-on", nil, "metric threshold METRIC>N (also >=, <, <=); repeatable; needs --graph")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runAudit(ctx context.Context, opts *AuditOptions) error {
	format, err := outputFormat(opts.Format, "table", "json", "sarif")
	if err != nil {
		return err
	}
	for _, id := range opts.Rules {
		if _, ok := audit.Lookup(id); !ok {
			return usageErrorf("--rule %q is not a rule of the risk register (%s)", id, strings.Join(audit.IDs(), ", "))
		}
	}
	var ths []audit.Threshold
	for _, s := range opts.FailOn {
		t, err := audit.ParseThreshold(s)
		if err != nil {
			return usageErrorf("--fail-on: %w", err)
		}
		ths = append(ths, t)
	}
	if len(ths) > 0 && opts.Graph == "" {
		return usageErrorf("--fail-on needs --graph DB (the code graph 'assay index' wrote)")
	}
	if opts.Graph != "" && len(ths) == 0 {
		return usageErrorf("--graph needs at least one --fail-on METRIC>N")
	}
	if err := checkOutputPath(opts.Output, opts.Store.path(), opts.Graph); err != nil {
		return err
	}
	res := audit.Result{SchemaVersion: audit.SchemaVersion, Runs: []string{}, Rules: []audit.RuleResult{}}
	if !opts.Metrics {
		store, err := evidence.Open(ctx, opts.Store.path(), evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: "assay audit"})
		if err != nil {
			return err
		}
		res, err = audit.Evaluate(ctx, store, audit.Options{Runs: opts.Runs, Rules: opts.Rules,
			Bindings: harness.BindingCheckers(filepath.Dir(opts.Store.path()))})
		store.Close()
		if err != nil {
			return err
		}
	}
	if len(ths) > 0 {
		res.Graph = opts.Graph
		if res.Thresholds, res.Exceeded, err = audit.CheckThresholds(ctx, opts.Graph, ths); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	switch format {
	case "json":
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	case "sarif":
		var out []byte
		out, err = audit.SARIF(res, audit.SARIFOptions{ToolVersion: version})
		b.Write(out)
	default:
		err = writeAuditTable(&b, res)
	}
	if err != nil {
		return err
	}
	if opts.Output != "" {
		if err := atomicfile.Write(opts.Output, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", opts.Output, err)
		}
	} else if _, err := opts.IO.Out.Write(b.Bytes()); err != nil {
		return err
	}
	var why []string
	if res.Critical() {
		why = append(why, "critical findings")
	}
	if len(res.Exceeded) > 0 {
		why = append(why, fmt.Sprintf("%d metric values over a threshold", len(res.Exceeded)))
	}
	if len(why) > 0 {
		return failed("audit: %s", strings.Join(why, " and "))
	}
	return nil
}

// writeAuditTable prints one row per rule, then each finding with its evidence and procedure, then
// the metric values over a threshold.
func writeAuditTable(w io.Writer, res audit.Result) error {
	if len(res.Rules) > 0 {
		t := table{header: []string{"RULE", "SEVERITY", "STATUS", "FINDINGS", "TITLE", "EVALUATED / REASON"}}
		for _, r := range res.Rules {
			t.rows = append(t.rows, []string{r.ID, string(r.Severity), string(r.Status), strconv.Itoa(len(r.Findings)), r.Title, r.Reason})
		}
		if err := t.writeText(w); err != nil {
			return err
		}
	}
	for _, f := range res.Findings() {
		fmt.Fprintf(w, "\n%s %s %s\n  %s\n", f.Rule, f.Severity, f.RunID, f.Message)
		for _, e := range f.Evidence {
			fmt.Fprintf(w, "  evidence: %s\n", rowText(e))
		}
		fmt.Fprintf(w, "  found by: %s\n", f.Procedure)
	}
	if len(res.Thresholds) > 0 {
		fmt.Fprintln(w)
		for _, th := range res.Thresholds {
			fmt.Fprintf(w, "threshold %s: %d values compared, %d unavailable (not compared)\n", th, th.Compared, th.Unavailable)
		}
		if len(res.Exceeded) > 0 {
			t := table{header: []string{"THRESHOLD", "SUBJECT", "VALUE", "KIND", "LOCATION"}}
			for _, m := range res.Exceeded {
				t.rows = append(t.rows, []string{m.Threshold, m.Subject, strconv.FormatFloat(m.Value, 'g', -1, 64), m.Kind, fmt.Sprintf("%s:%d", m.File, m.StartLine)})
			}
			return t.writeText(w)
		}
	}
	return nil
}

// rowText renders an evidence row as key=value pairs, full hashes included.
func rowText(r audit.Row) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("run", r.RunID)
	add("table", r.Table)
	if r.Seq != 0 {
		add("seq", strconv.FormatInt(r.Seq, 10))
	}
	add("key", r.Key)
	add("value", r.Value)
	add("sha256", r.Digest)
	return strings.Join(parts, " ")
}
