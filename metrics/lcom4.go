package metrics

import (
	"context"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// ReasonNoState begins the reason of an LCOM4 value whose type's methods
// use no field of their receiver: no two methods can share a field, so the
// value counts the groups of methods linked by calls and says nothing
// about shared state; it must not be ranked among incohesive types (see
// Value.NoState).
const ReasonNoState = "no_state"

// NoState reports whether v is an LCOM4 value of a type whose methods
// use no field of their receiver (its reason begins with ReasonNoState).
func (v Value) NoState() bool {
	return v.Metric == "lcom4" && v.Kind != Unavailable && strings.HasPrefix(v.Reason, ReasonNoState+":")
}

// lcom4Source is the published definition LCOM4 and the field counts
// beside it follow.
const lcom4Source = "M. Hitz and B. Montazeri, \"Measuring Coupling and Cohesion in Object-Oriented Systems\", " +
	"Proc. Int. Symposium on Applied Corporate Computing, 1995 (LCOM4: the graph G_X with V = M_X, the methods)"

// noMethods is the reason of a type-scope value of a struct type that
// declares no method: the method graph has no vertex, so there is no
// component to count (the paper's graph would be empty; 0 would read as
// "perfectly cohesive", which says nothing about a type without methods).
const noMethods = "the type has no methods: LCOM4's graph has no vertex (not assessable)"

func lcom4() *Descriptor {
	d := &Descriptor{
		Name: "lcom4", Title: "Lack of cohesion of methods (LCOM4)", Kind: Measured, Scope: ScopeType, Integer: true,
		Method: Method{ID: "lcom4-receiver-graph", Version: 4},
		Source: lcom4Source,
		Doc: "The number of connected components of the undirected graph whose vertices are the struct type's " +
			"methods (only its methods: fields are not vertices), with an edge between two methods that use a common " +
			"field of their receiver, or where one calls the other (or takes it as a method value) through its receiver " +
			"(Hitz & Montazeri 1995, LCOM4). 1 is a cohesive type; n > 1 suggests n types in one. A type with one method " +
			"has LCOM4 1 whatever its fields. Computed for every named struct type with at least one method; unavailable " +
			"(not assessable, never 0) for a struct type without methods. Fields no method uses are counted apart " +
			"(n_unused_fields), not as components.",
		Choices: []string{
			"Vertices are the methods only, as in the paper (V = M_X): a field no method uses adds no component; n_fields and n_unused_fields report the fields.",
			"Only uses through the method's own receiver variable count (r.f, r.m()); another value of the same type (other.f) does not link anything, nor does passing the receiver to a function.",
			"An embedded field counts as one field whether it is reached through a promoted field (r.x where x belongs to the embedded type) or through a promoted method (r.M() declared on the embedded type): both are a use of the embedded field, so two methods that reach it are joined.",
			"A method value (r.handle without a call) joins the method to handle, like a call; so does a method expression called on the receiver ((*T).handle(r)), which is the call r.handle().",
			"A closure inside a method counts for the method that contains it.",
			"A method with a generic receiver (func (b *Box[T]) ...) belongs to the generic type Box; fields are the generic type's fields.",
			"Methods are those declared with the type as receiver in the same package variant; promoted methods of embedded types are the embedded type's, not this type's.",
			"Test variants are separate subjects: the test variant's type (p [p.test]) includes methods declared in _test.go files, the base variant's does not, and the two values are never mixed.",
			"A type whose methods use no receiver field (e.g. a struct{} receiver) is reported with the paper's value (one component per group of methods linked by calls) and the reason no_state, so that it is not read as incohesive.",
			"A type without methods has no value (unavailable, reason: not assessable), never 0 or 1.",
		},
		Limits: []string{
			"Uses through a copy of the receiver (x := r; x.f) or through a pointer stored elsewhere are not seen.",
			"A field reached only through a method of another type (type T2 T1; T2's methods access T1's fields) links nothing, since those fields are T1's.",
			"Non-struct named types (type Count int) have no fields and are not measured.",
		},
		Coverage: "the type's package: 1 when it loaded without errors, else 0 (its methods and field accesses may be incomplete); the same for a type without methods.",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		var out []Value
		for _, c := range methodGraphs(in) {
			if len(c.t.Methods) == 0 {
				out = append(out, d.unavailable(in, c.t.ID, noMethods, c.coverage))
				continue
			}
			v := d.measured(in, c.t.ID, float64(c.components))
			v.Coverage = c.coverage
			if c.usedFields == 0 {
				v.Reason = ReasonNoState + ": the methods use no field of their receiver; LCOM4 counts one component per group of methods linked by calls, not a lack of shared state"
			}
			v.Detail = fmt.Sprintf("methods=%d fields=%d", len(c.t.Methods), len(c.t.Fields))
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func nFields() *Descriptor {
	d := &Descriptor{
		Name: "n_fields", Title: "Number of fields", Kind: Measured, Scope: ScopeType, Integer: true,
		Method: Method{ID: "struct-fields", Version: 1},
		Source: "The Go Programming Language Specification, Struct types (an embedded field is one field); " +
			"reported beside LCOM4 (" + lcom4Source + "), whose graph leaves fields out",
		Doc: "The number of fields the named struct type declares (its own, not those promoted from embedded types; " +
			"an embedded field counts as one; blank fields count). Computed for every named struct type, with or " +
			"without methods.",
		Choices: []string{
			"An embedded field is one field, as LCOM4 counts it; the fields it promotes are not counted.",
		},
		Coverage: "the type's package: 1 when it loaded without errors, else 0.",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		var out []Value
		for _, c := range methodGraphs(in) {
			v := d.measured(in, c.t.ID, float64(len(c.t.Fields)))
			v.Coverage = c.coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func nUnusedFields() *Descriptor {
	d := &Descriptor{
		Name: "n_unused_fields", Title: "Fields no method uses", Kind: Measured, Scope: ScopeType, Integer: true,
		Method: Method{ID: "lcom4-receiver-graph-unused-fields", Version: 1},
		Source: "reported beside LCOM4 (" + lcom4Source + "): the fields that join no method to another, which LCOM4's " +
			"method graph does not show",
		Doc: "The number of the struct type's fields that none of its methods uses through its receiver (the uses LCOM4 " +
			"counts: read, write, a promoted field or method through an embedded field). Such a field may still be " +
			"used by functions, by other values of the type, or by code outside the package: the count says that no " +
			"method's state includes it, not that it is dead. Computed for every named struct type with at least one " +
			"method; unavailable for a struct type without methods.",
		Choices: []string{
			"The uses are exactly LCOM4's (see 'assay metrics explain lcom4'): through the method's own receiver, closures included, an embedded field reached through a promoted field or method counting as used.",
		},
		Limits: []string{
			"A field used only through a copy of the receiver, another value of the type, or a function that is not a method counts as unused.",
		},
		Coverage: "the type's package: 1 when it loaded without errors, else 0 (its methods and field accesses may be incomplete).",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		var out []Value
		for _, c := range methodGraphs(in) {
			if len(c.t.Methods) == 0 {
				out = append(out, d.unavailable(in, c.t.ID, "the type has no methods: no method could use a field", c.coverage))
				continue
			}
			v := d.measured(in, c.t.ID, float64(len(c.t.Fields)-c.usedFields))
			v.Coverage = c.coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

// methodGraph is one struct type's LCOM4 method graph, summarised.
type methodGraph struct {
	t *Type
	// components is the number of connected components of the graph
	// whose vertices are t's methods (0 when it has none).
	components int
	// usedFields is the number of t's fields some method uses.
	usedFields int
	coverage   float64
}

// methodGraphs builds the method graph of every resolved named struct
// type of in, in in.Types order.
func methodGraphs(in *Input) []methodGraph {
	uses := map[string][]string{}
	for _, e := range in.Edges["field_access"] {
		uses[e.Src] = append(uses[e.Src], e.Dst)
	}
	calls := map[string][]string{}
	for _, e := range in.Edges["receiver_method"] {
		calls[e.Src] = append(calls[e.Src], e.Dst)
	}
	var out []methodGraph
	for _, t := range in.Types {
		if !t.Resolved || t.TypeKind != "struct" {
			continue
		}
		c := methodGraph{t: t, coverage: 1}
		if p := in.Packages[t.PackageID]; p != nil {
			c.coverage = okCoverage(p)
		}
		c.components, c.usedFields = lcom4Components(t, uses, calls)
		out = append(out, c)
	}
	return out
}

// lcom4Components counts the connected components of t's method graph
// (Hitz & Montazeri 1995: V = the methods; an edge joins two methods that
// use a common field, or where one calls the other) and the number of t's
// fields some method uses. Two methods sharing a field are joined through
// the field's first user, which leaves the components as the pairwise
// edges would.
func lcom4Components(t *Type, uses, calls map[string][]string) (components, usedFields int) {
	if len(t.Methods) == 0 {
		return 0, 0
	}
	g := simple.NewUndirectedGraph()
	vertex := make(map[string]int64, len(t.Methods))
	for i, m := range t.Methods {
		vertex[m] = int64(i)
		g.AddNode(simple.Node(i))
	}
	isField := make(map[string]bool, len(t.Fields))
	for _, f := range t.Fields {
		isField[f] = true
	}
	firstUser := map[string]int64{}
	join := func(a, b int64) {
		if a != b {
			g.SetEdge(g.NewEdge(simple.Node(a), simple.Node(b)))
		}
	}
	for _, m := range t.Methods {
		mi := vertex[m]
		for _, f := range uses[m] {
			if !isField[f] {
				continue
			}
			if u, ok := firstUser[f]; ok {
				join(u, mi)
			} else {
				firstUser[f] = mi
			}
		}
		for _, callee := range calls[m] {
			if ci, ok := vertex[callee]; ok {
				join(mi, ci)
			}
		}
	}
	return len(topo.ConnectedComponents(g)), len(firstUser)
}
