package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// newCmdGraphReport stands in for `assay report --graph DB` (branch report-core owns `assay
// report`): the same flags, parsed through assay's root, so the test runs runGraphReport end to end.
// Once `assay report` calls runGraphReport, these tests can run `report --graph` instead.
func newCmdGraphReport(io IOStreams) *cobra.Command {
	var db string
	var opts graphReportOptions
	cmd := &cobra.Command{
		Use:    "report-graph --graph DB",
		Short:  "Render the code-graph report (temporary: becomes assay report --graph)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if db == "" {
				return usageErrorf("--graph is required: the graph database 'assay index' wrote (default assay-out/graph.db)")
			}
			c.SetOut(io.Out)
			return runGraphReport(c, db, opts)
		},
	}
	addGraphReportFlags(cmd.Flags(), &db, &opts)
	cmd.Flags().StringVar(&opts.Format, "format", "", "output format: md, html or json (default md, or --output's extension)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "write the report to this file (default stdout)")
	return cmd
}

// runGraphReportCLI runs `assay report-graph ARGS...` through assay's root command and exit codes.
func runGraphReportCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut strings.Builder
	io := IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	root := newRoot(io)
	root.AddCommand(newCmdGraphReport(io))
	finishTree(root)
	root.SetArgs(append([]string{"report-graph"}, args...))
	code := report(io.ErrOut, root.ExecuteContext(context.Background()))
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestGraphReportFormats(t *testing.T) {
	db := filepath.Join(indexFixture(t), "graph.db")
	dir := t.TempDir()

	md := runGraphReportCLI(t, "--graph", db, "--top", "3")
	if md.code != 0 || !strings.Contains(md.stdout, "# assay code-graph report") || !strings.Contains(md.stdout, "## Top 3 functions") {
		t.Fatalf("md to stdout: exit %d, stderr %q, stdout %.300q", md.code, md.stderr, md.stdout)
	}

	page := filepath.Join(dir, "graph.html")
	if r := runGraphReportCLI(t, "--graph", db, "--output", page); r.code != 0 {
		t.Fatalf("html: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "<!doctype html>") || strings.Count(string(b), `class="assay-chart"`) != 3 {
		t.Errorf("--output graph.html did not write the HTML report with its three charts")
	}
	if fi, err := os.Stat(page); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("report file mode = %v (%v), want 0644 like the other outputs", fi.Mode().Perm(), err)
	}

	js := runGraphReportCLI(t, "--graph", db, "--format", "json", "--top", "2")
	var back struct {
		Top          int `json:"top"`
		TopFunctions []struct {
			ID string `json:"id"`
		} `json:"top_functions"`
		Packages []json.RawMessage `json:"packages"`
	}
	if js.code != 0 {
		t.Fatalf("json: exit %d: %s", js.code, js.stderr)
	}
	if err := json.Unmarshal([]byte(js.stdout), &back); err != nil || back.Top != 2 || len(back.TopFunctions) != 2 || len(back.Packages) == 0 {
		t.Errorf("json: %v; top %d, %d functions, %d packages", err, back.Top, len(back.TopFunctions), len(back.Packages))
	}
}

func TestGraphReportRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"--graph", "x.db", "--format", "pdf"}, "--format"},
		{"top zero", []string{"--graph", "x.db", "--top", "0"}, "--top"},
		{"no database", []string{"--graph", filepath.Join(t.TempDir(), "none.db")}, "no graph database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runGraphReportCLI(t, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (bad input); stderr %q", r.code, r.stderr)
			}
			oneLine(t, r, tc.want)
		})
	}
}
