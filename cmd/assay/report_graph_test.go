package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runGraphReportCLI runs `assay report ARGS...` (with --graph among ARGS) through assay's root.
func runGraphReportCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, append([]string{"report"}, args...)...)
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
		{"with a run selection", []string{"--graph", "x.db", "--all"}, "--all"},
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
