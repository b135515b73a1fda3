package metrics

import (
	"context"
	"fmt"
	"strings"
)

// ReasonNoState begins the reason of an LCOM4 value whose type's methods
// touch no receiver state: the value counts the methods not linked by calls
// and says nothing about cohesion, so it must not be ranked among
// incohesive types (see Value.NoState).
const ReasonNoState = "no_state"

// NoState reports whether v is an LCOM4 value of a type whose methods
// touch no receiver state (its reason begins with ReasonNoState).
func (v Value) NoState() bool {
	return v.Metric == "lcom4" && v.Kind != Unavailable && strings.HasPrefix(v.Reason, ReasonNoState+":")
}

func lcom4() *Descriptor {
	d := &Descriptor{
		Name: "lcom4", Title: "Lack of cohesion of methods (LCOM4)", Kind: Measured, Scope: ScopeType, Integer: true,
		Method: Method{ID: "lcom4-receiver-graph", Version: 2},
		Source: "M. Hitz and B. Montazeri, \"Measuring Coupling and Cohesion in Object-Oriented Systems\", " +
			"Proc. Int. Symposium on Applied Corporate Computing, 1995",
		Doc: "The number of connected components of the undirected graph whose vertices are the struct type's " +
			"methods and fields, with an edge from a method to each field it accesses through its receiver and " +
			"to each method of the same type it calls (or takes as a method value) through its receiver. " +
			"1 is a cohesive type; n > 1 suggests n types in one. Computed for every named struct type with at " +
			"least one method; unavailable (with a reason) for a struct type without methods.",
		Choices: []string{
			"Vertices are methods AND fields, so a field no method touches is a component of its own (dead state shows up as lost cohesion).",
			"Only accesses through the method's own receiver variable count (r.f, r.m()); another value of the same type (other.f) does not link anything, nor does passing the receiver to a function.",
			"An embedded field counts as one attribute whether it is reached through a promoted field (r.x where x belongs to the embedded type) or through a promoted method (r.M() declared on the embedded type): both are an access of the embedded field.",
			"A method value (r.handle without a call) links the method to handle, like a call.",
			"A closure inside a method counts for the method that contains it.",
			"A method with a generic receiver (func (b *Box[T]) ...) belongs to the generic type Box; fields are the generic type's fields.",
			"Methods are those declared with the type as receiver in the same package variant; promoted methods of embedded types are the embedded type's, not this type's.",
			"Test variants are separate subjects: the test variant's type (p [p.test]) includes methods declared in _test.go files, the base variant's does not, and the two values are never mixed.",
			"A type whose methods touch no receiver state (e.g. a struct{} receiver) is reported with its strict value (one component per method not linked by calls) and the reason no_state, so that it is not read as incohesive.",
		},
		Limits: []string{
			"Accesses through a copy of the receiver (x := r; x.f) or through a pointer stored elsewhere are not seen.",
			"A field reached only through a method of another type (type T2 T1; T2's methods access T1's fields) links nothing, since those fields are T1's.",
			"Non-struct named types (type Count int) have no fields and are not measured.",
		},
		Coverage: "the type's package: 1 when it loaded without errors, else 0 (its methods and field accesses may be incomplete); the same for a type without methods.",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		access := map[string][]string{}
		for _, e := range in.Edges["field_access"] {
			access[e.Src] = append(access[e.Src], e.Dst)
		}
		calls := map[string][]string{}
		for _, e := range in.Edges["receiver_method"] {
			calls[e.Src] = append(calls[e.Src], e.Dst)
		}
		var out []Value
		for _, t := range in.Types {
			if !t.Resolved || t.TypeKind != "struct" {
				continue
			}
			coverage := 1.0
			if p := in.Packages[t.PackageID]; p != nil {
				coverage = okCoverage(p)
			}
			if len(t.Methods) == 0 {
				out = append(out, d.unavailable(in, t.ID, "the type has no methods", coverage))
				continue
			}
			n, touches := lcom4Components(t, access, calls)
			v := d.measured(in, t.ID, float64(n))
			v.Coverage = coverage
			if !touches {
				v.Reason = ReasonNoState + ": the methods touch no receiver state; strict LCOM4 counts one component per method not linked by calls"
			}
			v.Detail = fmt.Sprintf("methods=%d fields=%d", len(t.Methods), len(t.Fields))
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

// lcom4Components counts the connected components of t's method-field
// graph and reports whether any method accesses a field.
func lcom4Components(t *Type, access, calls map[string][]string) (int, bool) {
	index := map[string]int{}
	for _, m := range t.Methods {
		index[m] = len(index)
	}
	for _, f := range t.Fields {
		index[f] = len(index)
	}
	parent := make([]int, len(index))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	components := len(index)
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra != rb {
			parent[ra] = rb
			components--
		}
	}
	touches := false
	for _, m := range t.Methods {
		mi := index[m]
		for _, f := range access[m] {
			if fi, ok := index[f]; ok {
				touches = true
				union(mi, fi)
			}
		}
		for _, callee := range calls[m] {
			if ci, ok := index[callee]; ok {
				union(mi, ci)
			}
		}
	}
	return components, touches
}
