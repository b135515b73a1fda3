package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGraphQueries(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "--metrics=false", "../../indexer/testdata/relations"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	callers := runCLI(t, "graph", "callers", "--out", out, "graph.Node.Name")
	if callers.code != 0 || !strings.Contains(callers.stdout, "method:example.com/rel/graph.Node.Describe") {
		t.Fatalf("callers: exit %d\n%s%s", callers.code, callers.stdout, callers.stderr)
	}

	callees := runCLI(t, "graph", "callees", "--out", out, "--format", "json", "example.com/rel/graph.Run")
	var got struct {
		Symbol       string
		DynamicSites []struct{ Expr, Mode string } `json:"dynamic_sites"`
	}
	if err := json.Unmarshal([]byte(callees.stdout), &got); err != nil || callees.code != 0 {
		t.Fatalf("callees json: exit %d %v %q", callees.code, err, callees.stdout)
	}
	if got.Symbol != "func:example.com/rel/graph.Run" || len(got.DynamicSites) != 1 || got.DynamicSites[0].Mode != "func_value" {
		t.Errorf("callees of Run = %+v", got)
	}

	dyn := runCLI(t, "graph", "callers", "--out", out, "--format", "dot", "imethod:example.com/rel/graph.Sizer.Size")
	if dyn.code != 0 || !strings.HasPrefix(dyn.stdout, "digraph") || !strings.Contains(dyn.stdout, `"calls_dynamic"`) {
		t.Fatalf("dot callers: exit %d\n%s", dyn.code, dyn.stdout)
	}

	path := runCLI(t, "graph", "path", "--out", out, "--format", "json", "example.com/rel/graph", "fmt")
	if path.code != 0 || !strings.Contains(path.stdout, `"pkg:fmt"`) {
		t.Fatalf("path: exit %d %s %s", path.code, path.stdout, path.stderr)
	}
	// The end of an import path, whole elements, names the one package it ends.
	short := runCLI(t, "graph", "path", "--out", out, "--format", "json", "rel/graph", "fmt")
	if short.code != 0 || !strings.Contains(short.stdout, `"pkg:example.com/rel/graph"`) || !strings.Contains(short.stdout, `"pkg:fmt"`) {
		t.Fatalf("path by import path ends: exit %d %s %s", short.code, short.stdout, short.stderr)
	}
	if r := runCLI(t, "graph", "path", "--out", out, "el/graph", "fmt"); r.code != 2 {
		t.Fatalf("a partial path element matched a package: exit %d %s", r.code, r.stdout)
	}
	none := runCLI(t, "graph", "path", "--out", out, "fmt", "example.com/rel/graph")
	if none.code != 1 {
		t.Fatalf("no import path: exit %d, want 1", none.code)
	}

	syms := runCLI(t, "graph", "symbols", "--out", out, "cg/cg.go")
	if syms.code != 0 || !strings.Contains(syms.stdout, "func:example.com/rel/cg.Add") {
		t.Fatalf("symbols: exit %d\n%s%s", syms.code, syms.stdout, syms.stderr)
	}

	for _, args := range [][]string{
		{"graph", "callers", "--out", out, "NoSuchThing"},
		{"graph", "callers", "--out", out, "Name"}, // ambiguous
		{"graph", "symbols", "--out", out, "missing.go"},
		{"graph", "callers", "--out", out, "--format", "svg", "graph.Run"},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
		oneLine(t, r, "")
	}
}

// TestGraphCallersTestVariant: Rect.Area has no caller in the base variant;
// the test variant's copy (shapes [shapes.test]) is called by TestArea.
// callers of the base symbol says so and how to see them, --variant all
// shows them, json gives the test variant's count; and graph symbols gives
// physical lines with the //line directive's position beside them.
func TestGraphCallersTestVariant(t *testing.T) {
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "--metrics=false", "../../indexer/testdata/fixture"); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	const testID = "method:example.com/fixture/shapes [example.com/fixture/shapes.test].Rect.Area"
	base := runCLI(t, "graph", "callers", "--out", out, "shapes.Rect.Area")
	if base.code != 0 || strings.Contains(base.stdout, "TestArea") ||
		!strings.Contains(base.stdout, "the test variant "+testID+" has 1 callers") || !strings.Contains(base.stdout, "--variant all shows them") {
		t.Fatalf("callers of the base Rect.Area: exit %d, want no TestArea and a note on the test variant\n%s%s", base.code, base.stdout, base.stderr)
	}
	all := runCLI(t, "graph", "callers", "--out", out, "--variant", "all", "shapes.Rect.Area")
	if all.code != 0 || !strings.Contains(all.stdout, "TestArea") || strings.Contains(all.stdout, "--variant all shows them") {
		t.Fatalf("callers --variant all: exit %d, want TestArea and no note\n%s%s", all.code, all.stdout, all.stderr)
	}
	j := runCLI(t, "graph", "callers", "--out", out, "--format", "json", "shapes.Rect.Area")
	var got struct {
		TestVariant *struct {
			Symbol  string
			Callers int
		} `json:"test_variant"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &got); err != nil || got.TestVariant == nil || got.TestVariant.Symbol != testID || got.TestVariant.Callers != 1 {
		t.Errorf("callers json test_variant = %+v (%v):\n%s", got.TestVariant, err, j.stdout)
	}
	if bad := runCLI(t, "graph", "callers", "--out", out, "--variant", "test", "shapes.Rect.Area"); bad.code != 2 || bad.stdout != "" {
		t.Errorf("--variant test: exit %d stdout %q, want 2 and nothing", bad.code, bad.stdout)
	}

	syms := runCLI(t, "graph", "symbols", "--out", out, "shapes/shapes.go")
	var line string
	for _, l := range strings.Split(syms.stdout, "\n") {
		if strings.Contains(l, "shapes.lineDirected") {
			line = l
		}
	}
	if f := strings.Fields(line); syms.code != 0 || len(f) != 6 || f[0] != "56" || f[5] != "shapes/renamed.go:100" {
		t.Fatalf("symbols: lineDirected row %q, want physical line 56 and the directive's shapes/renamed.go:100\n%s%s", line, syms.stdout, syms.stderr)
	}
	if !strings.Contains(syms.stdout, "LINE is the physical line in the file on disk; 1 declarations are under a //line directive") {
		t.Errorf("symbols does not say its lines are physical:\n%s", syms.stdout)
	}
	help := runCLI(t, "graph", "symbols", "--help")
	if !strings.Contains(oneSpaced(help.stdout), "Positions are physical") {
		t.Errorf("graph symbols --help does not say positions are physical:\n%s", help.stdout)
	}
}
