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
