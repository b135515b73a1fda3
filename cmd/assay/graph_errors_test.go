package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
)

// writeModule writes files (slash paths) into a fresh directory.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// positionOf returns the 1-based line and byte column of the first
// occurrence of needle in content.
func positionOf(t *testing.T, content, needle string) (line, col int) {
	t.Helper()
	i := strings.Index(content, needle)
	if i < 0 {
		t.Fatalf("%q not in %q", needle, content)
	}
	before := content[:i]
	return strings.Count(before, "\n") + 1, i - strings.LastIndex(before, "\n")
}

// TestGraphErrorsListsRecordedLoadErrors: `assay graph errors` lists the
// type error and the syntax error of a real module with their files and
// lines, in table and JSON, every row of load_errors and nothing else, and
// the snapshot's coverage; --package keeps one package's, and refuses a
// pattern that matches no package.
func TestGraphErrorsListsRecordedLoadErrors(t *testing.T) {
	t.Parallel()
	typeSrc := "package typed\n\n// A returns a string where an int is declared.\nfunc A() int {\n\treturn \"not an int\"\n}\n"
	syntaxSrc := "package syntax\n\nfunc Good() int { return 1 }\n\n// Broken lacks a comma.\nvar Broken = [2]int{1 2}\n"
	mod := writeModule(t, map[string]string{
		"go.mod":          "module example.com/le\n\ngo 1.22\n",
		"ok/ok.go":        "package ok\n\nfunc OK() {}\n",
		"typed/typed.go":  typeSrc,
		"syntax/extra.go": "package syntax\n\nfunc Extra() {}\n",
		"syntax/bad.go":   syntaxSrc,
	})
	out := t.TempDir()
	ix := runCLI(t, "index", "--out", out, "--format", "json", "--metrics=false", mod)
	if ix.code != 0 {
		t.Fatalf("index exit %d: %s", ix.code, ix.stderr)
	}
	var snap indexer.Snapshot
	if err := json.Unmarshal([]byte(ix.stdout), &snap); err != nil {
		t.Fatal(err)
	}
	typeLine, typeCol := positionOf(t, typeSrc, `"not an int"`)
	syntaxLine, syntaxCol := positionOf(t, syntaxSrc, "2}")

	r := runCLI(t, "graph", "errors", "--out", out, "--format", "json")
	if r.code != 0 {
		t.Fatalf("graph errors exit %d: %s", r.code, r.stderr)
	}
	var rep indexer.LoadErrorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(rep.Errors) != snap.Counts.LoadErrors {
		t.Errorf("%d errors listed, the index recorded %d", len(rep.Errors), snap.Counts.LoadErrors)
	}
	if rep.Snapshot != snap.ID || rep.PackagesOK != 1 || rep.PackagesMatched != 3 || rep.Coverage != snap.Coverage {
		t.Errorf("snapshot %s, packages_ok %d, packages_matched %d, coverage %v; want %s, 1, 3, %v",
			rep.Snapshot, rep.PackagesOK, rep.PackagesMatched, rep.Coverage, snap.ID, snap.Coverage)
	}
	// Each error in the sources is reported twice: by go/packages (kind
	// parse or type) and by the go command (kind list), whose position is
	// taken from its message. Nothing else is reported.
	type pos struct {
		Package, Kind, File string
		Line, Col           int
	}
	var positioned []pos
	for _, e := range rep.Errors {
		positioned = append(positioned, pos{e.Package, e.Kind, e.File, e.Line, e.Col})
		if e.Kind == "list" && !strings.Contains(e.Message, fmt.Sprintf("%s:%d:%d: ", e.File, e.Line, e.Col)) {
			t.Errorf("a list error's position is not the one its message starts with: %+v", e)
		}
	}
	wantPositioned := []pos{
		{"example.com/le/syntax", "list", "syntax/bad.go", syntaxLine, syntaxCol},
		{"example.com/le/syntax", "parse", "syntax/bad.go", syntaxLine, syntaxCol},
		{"example.com/le/typed", "list", "typed/typed.go", typeLine, typeCol},
		{"example.com/le/typed", "type", "typed/typed.go", typeLine, typeCol},
	}
	if diff := cmp.Diff(wantPositioned, positioned); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if !slices.IsSortedFunc(rep.Errors, func(a, b indexer.LoadError) int { return strings.Compare(a.Package, b.Package) }) {
		t.Errorf("errors not sorted by package: %+v", rep.Errors)
	}

	tab := runCLI(t, "graph", "errors", "--out", out)
	if tab.code != 0 {
		t.Fatalf("graph errors exit %d: %s", tab.code, tab.stderr)
	}
	lines := strings.Split(strings.TrimRight(tab.stdout, "\n"), "\n")
	if got, want := len(lines), 1+len(rep.Errors)+2; got != want {
		t.Fatalf("table has %d lines, want a header, %d rows, a blank line and the footer:\n%s", got, len(rep.Errors), tab.stdout)
	}
	if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"PACKAGE", "KIND", "POSITION", "MESSAGE"}) {
		t.Errorf("header %q", lines[0])
	}
	for i, e := range rep.Errors {
		f := strings.Fields(lines[1+i])
		wantPos := "-"
		if e.File != "" {
			wantPos = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
		}
		if len(f) < 4 || f[0] != e.Package || f[1] != e.Kind || f[2] != wantPos {
			t.Errorf("row %d = %q, want %s %s %s ...", i, lines[1+i], e.Package, e.Kind, wantPos)
		}
	}
	footer := fmt.Sprintf("%d load errors in 2 packages; coverage of the snapshot 0.333: 1 of 3 matched packages loaded and type-checked without errors", len(rep.Errors))
	if lines[len(lines)-1] != footer {
		t.Errorf("footer %q, want %q", lines[len(lines)-1], footer)
	}

	for _, tc := range []struct {
		pattern string
		want    []string // packages listed
	}{
		{"example.com/le/typed", []string{"example.com/le/typed"}},
		{"example.com/le/...", []string{"example.com/le/syntax", "example.com/le/typed"}},
		{"example.com/.../syntax", []string{"example.com/le/syntax"}},
	} {
		r := runCLI(t, "graph", "errors", "--out", out, "--format", "json", "--package", tc.pattern)
		var got indexer.LoadErrorReport
		if err := json.Unmarshal([]byte(r.stdout), &got); r.code != 0 || err != nil {
			t.Fatalf("--package %s: exit %d %v %s", tc.pattern, r.code, err, r.stderr)
		}
		var pkgs []string
		for _, e := range got.Errors {
			if !slices.Contains(pkgs, e.Package) {
				pkgs = append(pkgs, e.Package)
			}
		}
		if !slices.Equal(pkgs, tc.want) {
			t.Errorf("--package %s lists the errors of %q, want %q", tc.pattern, pkgs, tc.want)
		}
	}
	clean := runCLI(t, "graph", "errors", "--out", out, "--package", "example.com/le/ok")
	if want := "no load errors recorded for example.com/le/ok (coverage of the snapshot 0.333: 1 of 3 matched packages loaded and type-checked without errors)\n"; clean.code != 0 || clean.stdout != want {
		t.Errorf("a clean package: exit %d, stdout %q, want %q", clean.code, clean.stdout, want)
	}
	for _, args := range [][]string{
		{"--package", "example.com/other/..."},
		{"--package", ""},
		{"--format", "dot"},
		{"extra-argument"},
	} {
		r := runCLI(t, append([]string{"graph", "errors", "--out", out}, args...)...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%q: exit %d stdout %q, want 2 and nothing", args, r.code, r.stdout)
		}
		oneLine(t, r, "")
	}
}

// TestGraphErrorsOfACleanModule: nothing recorded, coverage 1.
func TestGraphErrorsOfACleanModule(t *testing.T) {
	t.Parallel()
	mod := writeModule(t, map[string]string{
		"go.mod": "module example.com/clean\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() int { return 1 }\n",
	})
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "--metrics=false", mod); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	tab := runCLI(t, "graph", "errors", "--out", out)
	if tab.code != 0 || tab.stdout != "no load errors recorded (coverage 1)\n" {
		t.Errorf("table: exit %d, stdout %q", tab.code, tab.stdout)
	}
	js := runCLI(t, "graph", "errors", "--out", out, "--format", "json")
	var rep map[string]any
	if err := json.Unmarshal([]byte(js.stdout), &rep); js.code != 0 || err != nil {
		t.Fatalf("json: exit %d %v %q", js.code, err, js.stdout)
	}
	if errs, ok := rep["errors"].([]any); !ok || len(errs) != 0 || rep["coverage"] != 1.0 {
		t.Errorf("json: errors %#v coverage %v, want an empty list and 1", rep["errors"], rep["coverage"])
	}
}

// TestGraphErrorsNamesAFailedDependency: a package importing a package no
// module provides gets only "could not import" from the type checker; the
// go command's reason is the dependency's own error, which is recorded
// under the dependency (not an indexed package) and listed. A pattern that
// matched nothing is counted in the coverage footer by name.
func TestGraphErrorsNamesAFailedDependency(t *testing.T) {
	t.Parallel()
	mod := writeModule(t, map[string]string{
		"go.mod":   "module example.com/dep\n\ngo 1.22\n",
		"m/m.go":   "package m\n\nimport \"example.com/nothere/x\"\n\nvar _ = x.Y\n",
		"ok/ok.go": "package ok\n\nfunc OK() {}\n",
	})
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "--metrics=false", "--pattern", "./...,./nosuch/...", mod); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	js := runCLI(t, "graph", "errors", "--out", out, "--format", "json")
	var rep indexer.LoadErrorReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); js.code != 0 || err != nil {
		t.Fatalf("json: exit %d %v %q", js.code, err, js.stdout)
	}
	var dep *indexer.LoadError
	for i, e := range rep.Errors {
		if e.Package == "example.com/nothere/x" {
			dep = &rep.Errors[i]
		}
	}
	if dep == nil || dep.PackageID != "" || dep.Kind != "list" || !strings.Contains(dep.Message, "example.com/nothere/x") || dep.File != "m/m.go" {
		t.Fatalf("the failed dependency's own error is not listed as such: %+v in %+v", dep, rep.Errors)
	}
	if rep.UnmatchedPatterns != 1 || rep.PackagesMatched != 3 || rep.PackagesOK != 1 {
		t.Errorf("matched %d ok %d unmatched %d, want 3 (m, ok and the pattern), 1 and 1", rep.PackagesMatched, rep.PackagesOK, rep.UnmatchedPatterns)
	}
	tab := runCLI(t, "graph", "errors", "--out", out)
	for _, want := range []string{
		"example.com/nothere/x",
		"not indexed (dependencies that failed, patterns that matched nothing, packages the build context excluded, test mains)",
		"1 of 3 matched packages loaded and type-checked without errors (the 3 count 1 pattern that matched no package)",
	} {
		if !strings.Contains(tab.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, tab.stdout)
		}
	}
}

// TestNoGraphDatabaseSaysHowToWriteOne: reading a graph that was never
// written names the command that writes it.
func TestNoGraphDatabaseSaysHowToWriteOne(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "nothing-here")
	for _, args := range [][]string{{"metrics", "--out", out}, {"graph", "errors", "--out", out}, {"graph", "callers", "--out", out, "F"}} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
		oneLine(t, r, "write one with 'assay index'")
	}
}

// TestGraphErrorsNamesPackagesTheBuildContextExcluded: a package whose only
// file is for another GOOS, and one whose only file is //go:build ignore,
// are dropped by the go command's "./..." without an error. The index
// warns, coverage is not 1, `graph errors` lists and names them (table and
// JSON), and the metrics table, which has no rows for them, says so.
func TestGraphErrorsNamesPackagesTheBuildContextExcluded(t *testing.T) {
	t.Parallel()
	mod := writeModule(t, map[string]string{
		"go.mod":            "module example.com/exc\n\ngo 1.22\n",
		"a/a.go":            "package a\n\nfunc A() int { return 1 }\n",
		"plan9/p_plan9.go":  "package plan9\n\nfunc P() {}\n",
		"ignored/ignore.go": "//go:build ignore\n\npackage ignored\n",
	})
	out := t.TempDir()
	ix := runCLI(t, "index", "--out", out, "--goos", "linux", mod)
	if ix.code != 0 || !strings.Contains(ix.stderr, "2 packages excluded by the build context") || !strings.Contains(ix.stdout, "0.333") {
		t.Fatalf("index exit %d, stdout %q, stderr %q: want a warning naming 2 excluded packages and coverage 0.333", ix.code, ix.stdout, ix.stderr)
	}
	want := []string{"example.com/exc/ignored", "example.com/exc/plan9"}
	js := runCLI(t, "graph", "errors", "--out", out, "--format", "json")
	var rep indexer.LoadErrorReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); js.code != 0 || err != nil {
		t.Fatalf("json: exit %d %v %q", js.code, err, js.stdout)
	}
	if !slices.Equal(rep.PackagesExcluded, want) || rep.PackagesMatched != 3 || rep.PackagesOK != 1 || len(rep.Errors) != 2 {
		t.Errorf("packages_excluded %v matched %d ok %d errors %d, want %v 3 1 2", rep.PackagesExcluded, rep.PackagesMatched, rep.PackagesOK, len(rep.Errors), want)
	}
	for _, e := range rep.Errors {
		if e.Kind != indexer.ExcludedByBuildContext || !strings.Contains(e.Message, "build constraints exclude all Go files") {
			t.Errorf("error %+v, want kind %s with the go command's reason", e, indexer.ExcludedByBuildContext)
		}
	}
	tab := runCLI(t, "graph", "errors", "--out", out)
	if tab.code != 0 || !strings.Contains(tab.stdout, "coverage of the snapshot 0.333: 1 of 3 matched packages") ||
		!strings.Contains(tab.stdout, "2 excluded by the build context, never analysed: example.com/exc/ignored, example.com/exc/plan9") {
		t.Errorf("table: exit %d, stdout %q", tab.code, tab.stdout)
	}
	mt := runCLI(t, "metrics", "--out", out)
	if mt.code != 0 || !strings.Contains(mt.stdout, "2 excluded by the build context") || !strings.Contains(mt.stdout, "example.com/exc/plan9") {
		t.Errorf("metrics: exit %d, stdout %q", mt.code, mt.stdout)
	}
	mj := runCLI(t, "metrics", "--out", out, "--format", "json")
	var m struct {
		SnapshotCoverage struct {
			Coverage         float64  `json:"coverage"`
			PackagesExcluded []string `json:"packages_excluded"`
		} `json:"snapshot_coverage"`
	}
	if err := json.Unmarshal([]byte(mj.stdout), &m); mj.code != 0 || err != nil || !slices.Equal(m.SnapshotCoverage.PackagesExcluded, want) || m.SnapshotCoverage.Coverage >= 1 {
		t.Errorf("metrics json: exit %d %v %+v", mj.code, err, m)
	}
}

// TestCoverageFigureNeverReadsComplete: one package short of 2000 rounds
// to 1 with 3 significant digits; the figure must not.
func TestCoverageFigureNeverReadsComplete(t *testing.T) {
	if got := coverageFigure(1999.0/2000, 1999, 2000); got != "0.999" {
		t.Errorf("coverageFigure(1999/2000) = %q, want 0.999", got)
	}
	if got := coverage3(1999.0 / 2000); got != "0.999" {
		t.Errorf("coverage3(1999/2000) = %q, want 0.999", got)
	}
	if got := coverageFigure(1, 5, 5); got != "1" {
		t.Errorf("coverageFigure(1) = %q, want 1", got)
	}
}
