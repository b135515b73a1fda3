package indexer

import (
	"go/types"
	"strings"

	"golang.org/x/tools/go/types/objectpath"
)

// extNode is a node to create for an object outside the indexed
// declarations, and the dependency package node it belongs to.
type extNode struct {
	obj types.Object
	row nodeRow
	// depPath is the dependency's package path, "" for a cgo-synthesized
	// function of an indexed package.
	depPath string
}

// edge adds a relation edge; buildGraph drops repeated relations once
// every edge is in (dedupEdges).
func (b *builder) edge(src, dst, kind, variant string) {
	if src == "" || dst == "" {
		return
	}
	b.g.edges = append(b.g.edges, edgeRow{src: src, dst: dst, kind: kind, variant: variant})
}

// objNode returns the node id of obj, creating its node if it is outside
// the indexed declarations (see resolveObj). Not for use during the
// concurrent part of the relation pass (resolver.objNode is).
func (b *builder) objNode(obj types.Object) string {
	if obj == nil {
		return ""
	}
	if id, ok := b.objIDs[obj]; ok {
		return id
	}
	id, ext := b.resolveObj(obj, b.enc)
	if ext != nil {
		b.applyExt(*ext)
	}
	return id
}

// applyExt creates x's node (and its dependency package's node) unless it
// exists.
func (b *builder) applyExt(x extNode) {
	b.objIDs[x.obj] = x.row.id
	if pkgNode := packageNodeID(x.depPath); x.depPath != "" && !b.depNodes[pkgNode] && !b.indexed[x.depPath] {
		b.depNodes[pkgNode] = true
		b.g.packageNodes = append(b.g.packageNodes, nodeRow{id: pkgNode, kind: "package", origin: "dependency"})
	}
	if b.extIDs[x.row.id] {
		return
	}
	b.extIDs[x.row.id] = true
	b.g.extNodes = append(b.g.extNodes, x.row)
}

// resolver resolves objects to node ids for one goroutine of the relation
// pass: it reads the builder's maps and records the nodes to create in the
// current file's relOut.
type resolver struct {
	b   *builder
	enc objectpath.Encoder
	// ids caches what this goroutine resolved.
	ids map[types.Object]string
	out *relOut
}

func (z *resolver) objNode(obj types.Object) string {
	if obj == nil {
		return ""
	}
	if id, ok := z.b.objIDs[obj]; ok {
		return id
	}
	if id, ok := z.ids[obj]; ok {
		return id
	}
	id, ext := z.b.resolveObj(obj, &z.enc)
	if id != "" {
		z.ids[obj] = id
	}
	if ext != nil {
		z.out.ext = append(z.out.ext, *ext)
	}
	return id
}

// resolveObj returns the node id of an object that is not in b.objIDs, and
// the node to create for it when it is a declaration of a dependency
// (origin "dependency") or a cgo-synthesized function of an indexed
// package (origin "synthesized"). It returns "" for objects that have no
// node: local types, universe objects (error.Error), fields and variables
// of dependencies. It reads the builder's maps and changes nothing but
// enc's cache.
func (b *builder) resolveObj(obj types.Object, enc *objectpath.Encoder) (string, *extNode) {
	pkg := obj.Pkg()
	if pkg == nil {
		return "", nil
	}
	ext := func(id, kind, name, pkgNode, origin string) *extNode {
		row := nodeRow{id: id, kind: kind, name: valid(name), packageID: valid(pkgNode), origin: origin}
		if path, err := enc.For(obj); err == nil {
			row.objectPath = valid(string(path))
		}
		x := &extNode{obj: obj, row: row}
		if origin == "dependency" {
			x.depPath = pkg.Path()
		}
		return x
	}
	if root, ok := b.rootOf[pkg]; ok {
		fn, isFunc := obj.(*types.Func)
		if !isFunc || !isCgoSynthetic(fn.Name()) {
			return "", nil
		}
		id := "func:" + root.ID + "." + fn.Name()
		return id, ext(id, "func", fn.Name(), packageNodeID(root.ID), "synthesized")
	}
	pkgNode := packageNodeID(pkg.Path())
	var id, kind string
	switch o := obj.(type) {
	case *types.Func:
		sig, _ := o.Type().(*types.Signature)
		if sig == nil || sig.Recv() == nil {
			id, kind = "func:"+pkg.Path()+"."+o.Name(), "func"
			break
		}
		named := namedOf(sig.Recv().Type())
		if named == nil {
			return "", nil
		}
		if types.IsInterface(named) {
			id, kind = "imethod:"+pkg.Path()+"."+named.Obj().Name()+"."+o.Name(), "interface_method"
		} else {
			id, kind = "method:"+pkg.Path()+"."+named.Obj().Name()+"."+o.Name(), "method"
		}
	case *types.TypeName:
		if o.Parent() != pkg.Scope() {
			return "", nil
		}
		id, kind = "type:"+pkg.Path()+"."+o.Name(), "type"
	default:
		return "", nil
	}
	if b.declared[id] {
		// The same declaration, loaded from export data by a package that
		// imports the non-test build of an indexed package: its node is the
		// indexed one (the base variant's id is the package path's).
		return id, nil
	}
	return id, ext(id, kind, obj.Name(), pkgNode, "dependency")
}

// isCgoSynthetic reports whether name is one of the functions cgo
// synthesizes for a package (_Cfunc_f, _Cgo_use, _cgo_..., _Cmacro_...).
func isCgoSynthetic(name string) bool {
	return strings.HasPrefix(name, "_C") || strings.HasPrefix(name, "_cgo_")
}

// namedOf returns the generic origin of t's named type, through one pointer.
func namedOf(t types.Type) *types.Named {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Origin()
	}
	return nil
}
