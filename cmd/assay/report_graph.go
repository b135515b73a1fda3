package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/assay-audit/assay/internal/atomicfile"
	"github.com/assay-audit/assay/reports"
)

// graphReportOptions are the options of `assay report --graph DB`: Format and Output are `assay
// report`'s own --format and --output, Top is --top.
type graphReportOptions struct {
	Format string
	Output string
	Top    int
}

// graphReportFormats are the formats of the code-graph report; the first is the default unless
// --output's extension names another.
var graphReportFormats = []string{"md", "html", "json"}

// addGraphReportFlags registers the flags only the code-graph report has: --graph (the graph
// database `assay index` wrote, into db) and --top (into opts.Top).
func addGraphReportFlags(fs *pflag.FlagSet, db *string, opts *graphReportOptions) {
	fs.StringVar(db, "graph", "", "render the code-graph report of this graph database (written by 'assay index') instead of the evidence store's")
	fs.IntVar(&opts.Top, "top", reports.DefaultGraphTop, "with --graph: how many functions the top-functions table lists")
}

// runGraphReport renders the code-graph report of the graph database db in opts.Format (md, html
// or json; "" means md, or what --output's extension names) to opts.Output (stdout when "";
// written atomically, mode 0644).
func runGraphReport(cmd *cobra.Command, db string, opts graphReportOptions) error {
	format := opts.Format
	if format == "" {
		format = formatOfOutput(opts.Output)
	}
	format, err := outputFormat(format, graphReportFormats...)
	if err != nil {
		return err
	}
	if err := checkOutputPath(opts.Output, "", db); err != nil {
		return err
	}
	if opts.Top < 1 {
		return usageErrorf("--top %d: want at least 1 function", opts.Top)
	}
	r, err := reports.ReadGraph(cmd.Context(), db, reports.GraphOptions{Top: opts.Top})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	switch format {
	case "html":
		err = reports.GraphHTML(&buf, r)
	case "json":
		err = reports.GraphJSON(&buf, r)
	default:
		err = reports.GraphMarkdown(&buf, r)
	}
	if err != nil {
		return err
	}
	if opts.Output == "" {
		_, err := cmd.OutOrStdout().Write(buf.Bytes())
		return err
	}
	if err := atomicfile.Write(opts.Output, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report %s: %w", opts.Output, err)
	}
	return nil
}

// formatOfOutput is the report format an --output file's extension names: html for .html/.htm,
// json for .json, junit for .xml, sarif for .sarif, md for .md; "" for any other (the command's
// default then applies, and a format the command lacks is refused as bad usage).
func formatOfOutput(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".html", ".htm":
		return "html"
	case ".json":
		return "json"
	case ".xml":
		return "junit"
	case ".sarif":
		return "sarif"
	case ".md":
		return "md"
	}
	return ""
}
