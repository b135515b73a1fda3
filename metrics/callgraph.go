package metrics

import (
	"context"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

const brandes2001 = "U. Brandes, \"A Faster Algorithm for Betweenness Centrality\", Journal of Mathematical Sociology 25(2), 2001"

// callFacts are the static call graph's per-function facts.
type callFacts struct {
	fanIn, fanOut map[string]int
	sccSize       map[string]int
	recursive     map[string]bool
	// buildCoverage is, per build (see buildOf), the fraction of the
	// snapshot's packages of that build that loaded without errors: the
	// packages whose calls fan-in counts.
	buildCoverage map[string]float64
}

// isDeclared reports whether id is a declared function or method of an
// indexed package.
func (in *Input) declaredFuncs() map[string]*Func {
	m := make(map[string]*Func, len(in.Funcs))
	for _, f := range in.Funcs {
		m[f.ID] = f
	}
	return m
}

// calls returns the facts, computed once.
func (in *Input) callFacts() *callFacts {
	if in.calls != nil {
		return in.calls
	}
	declared := in.declaredFuncs()
	f := &callFacts{fanIn: map[string]int{}, fanOut: map[string]int{}, sccSize: map[string]int{}, recursive: map[string]bool{},
		buildCoverage: map[string]float64{}}
	packages, clean := map[string]int{}, map[string]int{}
	for _, id := range in.PackageIDs {
		b := buildOf(id)
		packages[b]++
		if in.Packages[id].OK {
			clean[b]++
		}
	}
	for b, n := range packages {
		f.buildCoverage[b] = float64(clean[b]) / float64(n)
	}
	g := simple.NewDirectedGraph()
	ids := make([]string, 0, len(in.Funcs))
	index := map[string]int64{}
	for _, fn := range in.Funcs {
		index[fn.ID] = int64(len(ids))
		g.AddNode(simple.Node(int64(len(ids))))
		ids = append(ids, fn.ID)
	}
	for _, e := range in.Edges["calls"] {
		if _, ok := declared[e.Src]; !ok {
			continue // calls edges from closures are immediately invoked literals
		}
		if n := in.Nodes[e.Dst]; n == nil || n.Kind == "closure" {
			continue
		}
		f.fanOut[e.Src]++
		callee, ok := declared[e.Dst]
		if !ok {
			continue
		}
		// Fan-in counts the callers of the same build: a production
		// function's callers in production code, a test variant's in its
		// test build. A test build's copy of a production caller (the same
		// function recompiled for another package's test) is another
		// program's caller.
		if caller := declared[e.Src]; buildOf(caller.PackageID) == buildOf(callee.PackageID) {
			f.fanIn[e.Dst]++
		}
		if e.Src == e.Dst {
			f.recursive[e.Src] = true
			continue
		}
		g.SetEdge(simple.Edge{F: simple.Node(index[e.Src]), T: simple.Node(index[e.Dst])})
	}
	for _, scc := range topo.TarjanSCC(g) {
		for _, n := range scc {
			id := ids[n.ID()]
			f.sccSize[id] = len(scc)
			if len(scc) > 1 {
				f.recursive[id] = true
			}
		}
	}
	in.calls = f
	return f
}

// buildOf names the build a package node belongs to: "" for a package as
// built for production, and the package under test ("p") for the variants
// go/packages gives with an ID suffix " [p.test]" (the test variant, the
// external test package, and packages recompiled for p's test).
func buildOf(packageID string) string {
	i := strings.LastIndex(packageID, " [")
	if i < 0 || !strings.HasSuffix(packageID, ".test]") {
		return ""
	}
	return strings.TrimSuffix(packageID[i+2:], ".test]")
}

// recursive reports the functions that take part in a recursion cycle.
func (in *Input) recursive() map[string]bool { return in.callFacts().recursive }

// funcCountMetric sets d.Compute to one value per declared function: count
// gives it, coverage the fraction of its inputs that loaded (nil: the
// function's own package, 1 when it loaded cleanly, else 0), for an
// unavailable value too.
func funcCountMetric(d *Descriptor, count func(in *Input, id string) int, coverage func(in *Input, fn *Func) float64) *Descriptor {
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		var out []Value
		for _, fn := range in.Funcs {
			p := in.Packages[fn.PackageID]
			cov := 1.0
			switch {
			case coverage != nil:
				cov = coverage(in, fn)
			case p != nil:
				cov = okCoverage(p)
			}
			if p != nil && !p.OK {
				// The package did not load or type-check cleanly: its calls are not all resolved,
				// so a count would be a lower bound shown as a measurement.
				out = append(out, d.unavailable(in, fn.ID, incompleteCalls(in, p), cov))
				continue
			}
			v := d.measured(in, fn.ID, float64(count(in, fn.ID)))
			v.Coverage = cov
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func fanIn() *Descriptor {
	return funcCountMetric(&Descriptor{
		Name: "fan_in", Title: "Fan-in", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method: Method{ID: "static-callers", Version: 5},
		Source: "S. Henry and D. Kafura, \"Software Structure Metrics Based on Information Flow\", IEEE TSE SE-7(5), 1981 (fan-in as callers)",
		Doc:    "The number of distinct declared functions and methods of the snapshot, in the same build, with a static call to this one.",
		Choices: []string{"Callers through interfaces or func values are not counted: they are not known statically (see dynamic_calls).",
			"A call made inside a closure counts as a call by the enclosing function.",
			"Same build: a production function's callers are production code; a test variant's (p [p.test]) are the packages of p's test build. " +
				"The copy of a production caller that go/packages recompiles for another package's test is not counted again for a production function."},
		Limits: []string{"Callers outside the snapshot are unknown, so fan-in of a library's API is a lower bound."},
		Coverage: "the snapshot's packages of the function's build (for a production function the base packages, " +
			"as for Ca; for a test variant's, the packages of that test build): the fraction that loaded without errors. " +
			"A caller in a package with load or type errors may have its call unresolved, so below 1 the value is a lower bound.",
	}, func(in *Input, id string) int { return in.callFacts().fanIn[id] },
		func(in *Input, fn *Func) float64 { return in.callFacts().buildCoverage[buildOf(fn.PackageID)] })
}

func fanOut() *Descriptor {
	return funcCountMetric(&Descriptor{
		Name: "fan_out", Title: "Fan-out", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method: Method{ID: "static-callees", Version: 2},
		Source: "S. Henry and D. Kafura, 1981 (fan-out as callees)",
		Doc:    "The number of distinct functions and methods (the snapshot's, dependencies', cgo's) this one calls statically.",
		Choices: []string{"Dynamic calls are counted apart (dynamic_calls), never added here.",
			"Calls inside closures count for the enclosing function."},
		Limits:   []string{"A call through an interface that has a single implementation is still dynamic."},
		Coverage: ownPackageCoverage,
	}, func(in *Input, id string) int { return in.callFacts().fanOut[id] }, nil)
}

func dynamicCalls() *Descriptor {
	return funcCountMetric(&Descriptor{
		Name: "dynamic_calls", Title: "Dynamic call sites", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method:   Method{ID: "dynamic-call-sites", Version: 2},
		Source:   "assay: the indexer's dynamic_calls table",
		Doc:      "The number of call sites in the function (closures included) whose callee is not known statically: calls through an interface method or a func value.",
		Limits:   []string{"Counts sites, not targets: one site may reach many functions at run time."},
		Coverage: ownPackageCoverage,
	}, func(in *Input, id string) int { return in.dynamic[id] }, nil)
}

func callSCC() *Descriptor {
	return funcCountMetric(&Descriptor{
		Name: "call_scc_size", Title: "Call-graph strongly connected component size", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method:   Method{ID: "tarjan-gonum-topo", Version: 2},
		Source:   "R. Tarjan, \"Depth-First Search and Linear Graph Algorithms\", SIAM J. Computing 1(2), 1972; gonum graph/topo.TarjanSCC",
		Doc:      "The number of declared functions in the strongly connected component of the static call graph that contains this one: 1 unless it is mutually recursive with others.",
		Choices:  []string{"Direct recursion (a self-call) leaves the size at 1; cognitive complexity's recursion increment covers it."},
		Coverage: ownPackageCoverage + " A cycle cannot leave the package: Go forbids import cycles.",
	}, func(in *Input, id string) int { return in.callFacts().sccSize[id] }, nil)
}

// betweennessMetric computes betweenness over a graph whose nodes are
// subjects (sorted ids) and whose edges come from edgeKind, restricted to
// subjects.
func betweennessMetric(d *Descriptor, graphName string, subjects func(in *Input) []string, edgeKind string) *Descriptor {
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		ids := subjects(in)
		index := make(map[string]int32, len(ids))
		for i, id := range ids {
			index[id] = int32(i)
		}
		var edges [][2]int32
		for _, e := range in.Edges[edgeKind] {
			s, ok1 := index[e.Src]
			t, ok2 := index[e.Dst]
			if ok1 && ok2 {
				edges = append(edges, [2]int32{s, t})
			}
		}
		var sources []int32
		detail := fmt.Sprintf("%s; nodes=%d edges=%d; algorithm=brandes-2001 exact (all sources)", graphName, len(ids), len(edges))
		kind := d.Kind
		if k := in.Options.BetweennessSources; k > 0 && k < len(ids) {
			for i := 0; i < k; i++ {
				sources = append(sources, int32(i*len(ids)/k))
			}
			kind = Proxy
			detail = fmt.Sprintf("%s; nodes=%d edges=%d; algorithm=brandes-2001 sampled: %d of %d sources evenly spaced in id order, scaled by n/k (Brandes & Pich 2007)",
				graphName, len(ids), len(edges), k, len(ids))
		}
		cb, err := Betweenness(ctx, len(ids), edges, sources)
		if err != nil {
			return nil, err
		}
		out := make([]Value, 0, len(ids))
		for i, id := range ids {
			if p := ownPackage(in, id); edgeKind == "calls" && p != nil && !p.OK {
				// Its own calls are not all resolved (a function without a
				// parsed body would show 0): a value here would be a guess
				// shown as a measurement. The graph keeps its known edges
				// for the others, whose coverage says the graph is partial.
				out = append(out, d.unavailable(in, id, incompleteCalls(in, p), in.Snapshot.Coverage))
				continue
			}
			v := d.measured(in, id, cb[i])
			v.Kind, v.Detail, v.Coverage = kind, detail, in.Snapshot.Coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

// ownPackageCoverage is the Coverage of a call-graph metric whose value
// rests on the function's own calls.
const ownPackageCoverage = "the function's package: 1 when it loaded without errors; otherwise the value is unavailable, with coverage 0."

// snapshotCoverage is the Coverage of the betweenness metrics: every
// shortest path may pass anywhere.
const snapshotCoverage = "the whole snapshot (any shortest path may run through any package): the snapshot's coverage, " +
	"packages loaded without errors / packages matched; the same for an unavailable value."

// incompleteCalls is the reason a call-graph value of a function of p, a
// package that did not load cleanly, is unavailable.
func incompleteCalls(in *Input, p *Package) string {
	if p.Errors > 0 {
		return in.loadProblem(p) + ": its static calls are incomplete"
	}
	return in.loadProblem(p) + ": calls that depend on types from there may be unresolved, so its static calls may be incomplete"
}

// ownPackage returns the package of a func subject (by its node) or the
// package subject itself; nil when unknown.
func ownPackage(in *Input, id string) *Package {
	if p := in.Packages[id]; p != nil {
		return p
	}
	if n := in.Nodes[id]; n != nil {
		return in.Packages[n.PackageID]
	}
	return nil
}

func betweennessCalls() *Descriptor {
	return betweennessMetric(&Descriptor{
		Name: "betweenness_calls", Title: "Betweenness centrality in the static call graph", Kind: Measured, Scope: ScopeFunc,
		Method: Method{ID: "brandes-csr", Version: 6}, Source: brandes2001,
		Doc: "For each declared function or method of a base package variant: the sum over ordered pairs (s, t) of " +
			"other functions of the fraction of shortest static call paths from s to t that pass through it; not normalized. " +
			"Validated against gonum's network.Betweenness on graphs up to 2,000 nodes (relative error <= 1e-9).",
		Choices: []string{
			"The graph is the static call graph among declared functions of base variants (production code as built); test variants are other programs and are not mixed in.",
			"cgo-synthesized functions are excluded (every cgo call would pass through them); the Go API keeps them with Options.IncludeSynthetic, the CLI has no flag for it.",
			"Dependencies' functions are not nodes: paths through the standard library never return to the snapshot's code.",
			"Exact unless sources are sampled (assay index --betweenness-sources N; Options.BetweennessSources in the Go API): the values are then proxies, say so, and scale the sampled sums up to all sources, whose error grows as N shrinks (one function of cobra got about 1474 at N=10 against an exact 110).",
			"A function of a package with load or type errors, or ill-typed through an import that did not load cleanly, is unavailable (its calls may be incomplete); the others are computed on the edges known, with the snapshot's coverage.",
		},
		Limits:   []string{"Calls through interfaces and func values are not edges, so a function reached only dynamically is less central than it is."},
		Coverage: snapshotCoverage,
	}, "graph=static call graph of base-variant declared functions, synthesized excluded", func(in *Input) []string {
		var ids []string
		for _, f := range in.Funcs {
			if p := in.Packages[f.PackageID]; p == nil || p.Variant != "base" {
				continue
			}
			if n := in.Nodes[f.ID]; n != nil && n.Origin == "synthesized" && !in.Options.IncludeSynthetic {
				continue
			}
			ids = append(ids, f.ID)
		}
		return ids
	}, "calls")
}

func betweennessImports() *Descriptor {
	return betweennessMetric(&Descriptor{
		Name: "betweenness_imports", Title: "Betweenness centrality in the package import graph", Kind: Measured, Scope: ScopePackage,
		Method: Method{ID: "brandes-csr", Version: 3}, Source: brandes2001,
		Doc: "For each base package of the snapshot: the sum over ordered pairs of other packages of the fraction of " +
			"shortest import paths between them that pass through it, on the directed import graph; not normalized.",
		Choices:  []string{"Nodes are the snapshot's base packages; dependencies are left out (no path between two of the snapshot's packages runs through a dependency)."},
		Coverage: snapshotCoverage,
	}, "graph=directed import graph of the snapshot's base packages", func(in *Input) []string {
		var ids []string
		for _, id := range in.PackageIDs {
			if in.Packages[id].Variant == "base" {
				ids = append(ids, id)
			}
		}
		return ids
	}, "imports")
}
