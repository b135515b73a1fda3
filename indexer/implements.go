package indexer

import (
	"cmp"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// typeObj is a named type with a node, a candidate for implements.
type typeObj struct {
	obj *types.TypeName
	id  string
}

// addImplements adds an implements edge from each named type T (struct,
// interface or other; aliases and generic types excluded) to each named
// interface I with at least one method (constraint interfaces and generic
// interfaces excluded) such that T or *T implements I (go/types), T != I.
// Only types that can meet in one build are paired: a package's base
// variant is not paired with the test build that replaces it with its test
// variant.
func (b *builder) addImplements() {
	// Sources: the indexed named types. Targets: the indexed interfaces and
	// the exported interfaces of every package an indexed package imports
	// (from export data), whether or not any code mentions them.
	var cands []typeObj
	for obj, id := range b.objIDs {
		if tn, ok := obj.(*types.TypeName); ok && b.rootOf[tn.Pkg()] != nil {
			cands = append(cands, typeObj{obj: tn, id: id})
		}
	}
	slices.SortFunc(cands, func(a, c typeObj) int { return strings.Compare(a.id, c.id) })
	targets := slices.Clone(cands)
	seenPkg := map[*types.Package]bool{}
	var depTargets []typeObj
	for _, p := range b.rootOf {
		for _, imp := range p.Types.Imports() {
			if seenPkg[imp] || b.rootOf[imp] != nil {
				continue
			}
			seenPkg[imp] = true
			for _, name := range imp.Scope().Names() {
				if tn, ok := imp.Scope().Lookup(name).(*types.TypeName); ok && tn.Exported() && types.IsInterface(tn.Type()) {
					depTargets = append(depTargets, typeObj{obj: tn})
				}
			}
		}
	}
	slices.SortFunc(depTargets, func(a, c typeObj) int {
		return cmp.Or(strings.Compare(a.obj.Pkg().Path(), c.obj.Pkg().Path()), strings.Compare(a.obj.Name(), c.obj.Name()))
	})
	targets = append(targets, depTargets...)

	// variants[build][path] is set when the test build for package path
	// `build` compiles its own variant of package `path`.
	variants := map[string]map[string]bool{}
	for _, p := range b.rootOf {
		if p.ForTest != "" {
			if variants[p.ForTest] == nil {
				variants[p.ForTest] = map[string]bool{}
			}
			variants[p.ForTest][p.PkgPath] = true
		}
	}
	build := func(tn *types.TypeName) string {
		if p := b.rootOf[tn.Pkg()]; p != nil {
			return p.ForTest
		}
		return ""
	}
	compatible := func(t, i *types.TypeName) bool {
		bt, bi := build(t), build(i)
		switch {
		case bt == bi:
			return true
		case bt == "":
			return !variants[bi][t.Pkg().Path()]
		case bi == "":
			return !variants[bt][i.Pkg().Path()]
		}
		return false
	}

	type iface struct {
		typeObj
		it    *types.Interface
		names []string
	}
	byKey := map[string][]iface{}
	for _, c := range targets {
		if c.obj.IsAlias() {
			continue
		}
		n, ok := c.obj.Type().(*types.Named)
		if !ok || n.TypeParams().Len() > 0 {
			continue
		}
		it, ok := n.Underlying().(*types.Interface)
		if !ok || !it.IsMethodSet() || it.NumMethods() == 0 {
			continue
		}
		f := iface{typeObj: c, it: it}
		for i := range it.NumMethods() {
			f.names = append(f.names, it.Method(i).Name())
		}
		// Index by the last method name (sorted), a rough proxy for the rarest.
		byKey[f.names[len(f.names)-1]] = append(byKey[f.names[len(f.names)-1]], f)
	}
	var cache typeutil.MethodSetCache
	for _, c := range cands {
		if c.obj.IsAlias() || b.rootOf[c.obj.Pkg()] == nil {
			continue // only indexed types are sources
		}
		n, ok := c.obj.Type().(*types.Named)
		if !ok || n.TypeParams().Len() > 0 {
			continue
		}
		var mset *types.MethodSet
		if types.IsInterface(n) {
			mset = cache.MethodSet(n)
		} else {
			mset = cache.MethodSet(types.NewPointer(n))
		}
		if mset.Len() == 0 {
			continue
		}
		names := map[string]bool{}
		sorted := make([]string, 0, mset.Len())
		for i := range mset.Len() {
			name := mset.At(i).Obj().Name()
			names[name] = true
			sorted = append(sorted, name)
		}
		slices.Sort(sorted)
		variant := packageVariant(b.rootOf[c.obj.Pkg()])
		for _, name := range sorted {
			for _, f := range byKey[name] {
				if f.obj == c.obj || !compatible(c.obj, f.obj) {
					continue
				}
				all := true
				for _, m := range f.names {
					if !names[m] {
						all = false
						break
					}
				}
				if !all {
					continue
				}
				if types.Implements(n, f.it) || (!types.IsInterface(n) && types.Implements(types.NewPointer(n), f.it)) {
					dst := f.id
					if dst == "" {
						dst = b.objNode(f.obj)
					}
					b.edge(c.id, dst, "implements", variant)
				}
			}
		}
	}
}
