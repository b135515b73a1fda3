package indexer

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/objectpath"
	"golang.org/x/tools/go/types/typeutil"
)

// relWork is one indexed file with type information, visited by the
// relation pass once every package's declarations have node ids.
type relWork struct {
	pkg                            *packages.Package
	pkgID, fileID, variant, origin string
	file                           *ast.File
	isTest                         bool
	// lineAdjusted is set for a file cgo rewrote: positions are reported
	// through its //line directives, which name the source file.
	lineAdjusted bool
}

// memberRow is one row of members: a field of a struct type or a method
// declared in an interface type.
type memberRow struct {
	id, typeID, packageID, name, kind string
	embedded, exported                bool
}

// dynamicCallRow is one row of dynamic_calls: a call site whose callee is
// not known statically.
type dynamicCallRow struct {
	src       string
	closure   sql.Null[string]
	mode      string
	target    sql.Null[string]
	expr      string
	signature sql.Null[string]
	fileID    string
	line, col int
	variant   string
}

// packageOrigin is a package node's origin: test variants and external test
// packages are test code; a base package or a package recompiled for a test
// is production code.
func packageOrigin(variant string) string {
	switch variant {
	case "test", "xtest":
		return "test"
	default:
		return "production"
	}
}

// isExampleName reports whether name is a testable example's name as the
// go command recognizes it: "Example", or "Example" followed by a suffix
// that does not start with a lower-case letter.
func isExampleName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Example")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}

// addModules adds a module node per module of the indexed packages and a
// contains edge from it to each of its packages.
func (b *builder) addModules(res *loadResult) {
	seen := map[string]bool{}
	for _, p := range res.roots {
		m := p.Module
		if m == nil || m.Path == "" {
			continue
		}
		id := "mod:" + m.Path
		if !seen[id] {
			seen[id] = true
			origin := "dependency"
			if m.Main {
				origin = "production"
			}
			b.g.moduleNodes = append(b.g.moduleNodes, nodeRow{id: id, kind: "module", name: valid(m.Path), origin: origin})
		}
		b.g.edges = append(b.g.edges, edgeRow{src: id, dst: packageNodeID(p.ID), kind: "contains", variant: packageVariant(p)})
	}
}

// addRelations is the relation pass: calls, dynamic calls, references,
// field accesses, receiver method uses, instantiations, embeds, closures,
// and then implements over every named type and interface.
//
// The files are visited by GOMAXPROCS goroutines, each writing what it
// finds to its file's relOut; the outputs are then applied in work order,
// so the graph is the one a single goroutine visiting the files in order
// builds (same rows, same order, same deduplication). During the visits the
// builder's maps are only read.
func (b *builder) addRelations(ctx context.Context) error {
	b.enc = &objectpath.Encoder{}
	outs := make([]relOut, len(b.work))
	err := parallelEach(ctx, len(b.work), func(i int) string { return "visiting " + b.work[i].fileID }, func() func(int) {
		z := &resolver{b: b, ids: map[types.Object]string{}}
		return func(i int) {
			w := b.work[i]
			z.out = &outs[i]
			r := relPass{b: b, z: z, out: &outs[i], w: w, info: w.pkg.TypesInfo, fset: w.pkg.Fset}
			r.visitFile()
		}
	})
	if err != nil {
		return fmt.Errorf("indexer: build relations: %w", err)
	}
	n := len(b.g.edges)
	for i := range outs {
		n += len(outs[i].edges)
	}
	b.g.edges = slices.Grow(b.g.edges, n-len(b.g.edges))
	for i := range outs {
		o := &outs[i]
		for _, x := range o.ext {
			b.applyExt(x)
		}
		b.g.declNodes = append(b.g.declNodes, o.closures...)
		for _, e := range o.edges {
			b.edge(e.src, e.dst, e.kind, e.variant)
		}
		b.g.dynamicCalls = append(b.g.dynamicCalls, o.dynamic...)
		outs[i] = relOut{}
	}
	b.addImplements()
	return nil
}

// relOut is what the relation pass found in one file, in visit order.
type relOut struct {
	// edges are the relation edges, not deduplicated.
	edges []edgeRow
	// closures are the closure nodes.
	closures []nodeRow
	// dynamic are the dynamic call sites.
	dynamic []dynamicCallRow
	// ext are the nodes to create for objects outside the indexed
	// declarations, each recorded by the first file of its goroutine that
	// refers to it (so by the first file of all, in work order).
	ext []extNode
}

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

// relPass visits one file's declarations, reading the builder and writing
// what it finds to out.
type relPass struct {
	b    *builder
	z    *resolver
	out  *relOut
	w    relWork
	info *types.Info
	fset *token.FileSet

	// Per declaration being visited.
	src        string        // node id of the declaration
	recv       *types.Var    // the method's receiver variable, nil for funcs
	recvStruct *types.Struct // the receiver type's struct (generic origin), if any
	callees    map[*ast.Ident]bool
	closures   []string       // node ids of the func literals enclosing the current node
	litCount   map[string]int // closures numbered per parent
	stack      []ast.Node     // walk's, kept for the next walk
	origin     string
}

func (r *relPass) visitFile() {
	for _, decl := range r.w.file.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if id, ok := r.b.declIDs[declKey{r.w.pkg.ID, decl}]; ok {
				r.funcDecl(decl, id)
			}
		case *ast.GenDecl:
			if decl.Tok != token.TYPE {
				continue
			}
			for _, spec := range decl.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok {
					if id, ok := r.b.declIDs[declKey{r.w.pkg.ID, ts}]; ok {
						r.typeDecl(ts, id)
					}
				}
			}
		}
	}
}

func (r *relPass) reset(src string) {
	r.src, r.recv, r.recvStruct = src, nil, nil
	if r.callees == nil {
		r.callees, r.litCount = map[*ast.Ident]bool{}, map[string]int{}
	}
	if len(r.callees) > 0 {
		clear(r.callees)
	}
	if len(r.litCount) > 0 {
		clear(r.litCount)
	}
	r.closures = r.closures[:0]
	r.origin = r.w.origin
}

func (r *relPass) edge(dst, kind string) { r.edgeFrom(r.src, dst, kind) }

// edgeFrom records a relation edge of the file's variant (deduplicated
// when the outputs are applied).
func (r *relPass) edgeFrom(src, dst, kind string) {
	if src == "" || dst == "" {
		return
	}
	r.out.edges = append(r.out.edges, edgeRow{src: src, dst: dst, kind: kind, variant: r.w.variant})
}

func (r *relPass) funcDecl(fd *ast.FuncDecl, id string) {
	r.reset(id)
	if fd.Recv == nil && isExampleName(fd.Name.Name) && r.w.isTest {
		r.origin = "example"
	}
	if fd.Recv != nil && len(fd.Recv.List) > 0 && len(fd.Recv.List[0].Names) > 0 {
		if v, ok := r.info.Defs[fd.Recv.List[0].Names[0]].(*types.Var); ok {
			r.recv = v
			if n := namedOf(v.Type()); n != nil {
				r.recvStruct, _ = n.Underlying().(*types.Struct)
			}
		}
	}
	if fd.Recv != nil {
		r.walk(fd.Recv)
	}
	r.walk(fd.Type)
	if fd.Body != nil {
		r.walk(fd.Body)
	}
}

func (r *relPass) typeDecl(ts *ast.TypeSpec, id string) {
	r.reset(id)
	if ts.TypeParams != nil {
		r.walk(ts.TypeParams)
	}
	r.walk(ts.Type)
	t := ts.Type
	for {
		p, ok := t.(*ast.ParenExpr)
		if !ok {
			break
		}
		t = p.X
	}
	var list *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	}
	if list == nil {
		return
	}
	for _, f := range list.List {
		if len(f.Names) > 0 {
			continue
		}
		tv, ok := r.info.Types[f.Type]
		if !ok || tv.Type == nil {
			continue
		}
		if n := namedOf(tv.Type); n != nil {
			r.edge(r.z.objNode(n.Obj()), "embeds")
		}
	}
}

// walk visits n, keeping track of the func literals entered.
func (r *relPass) walk(n ast.Node) {
	stack := r.stack[:0]
	defer func() { r.stack = stack[:0] }()
	ast.Inspect(n, func(n ast.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if _, ok := top.(*ast.FuncLit); ok {
				r.closures = r.closures[:len(r.closures)-1]
			}
			return true
		}
		var parent ast.Node
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		stack = append(stack, n)
		switch n := n.(type) {
		case *ast.FuncLit:
			r.funcLit(n, parent)
		case *ast.CallExpr:
			r.call(n)
		case *ast.SelectorExpr:
			r.selector(n)
		case *ast.Ident:
			r.ident(n)
		}
		return true
	})
}

// funcLit adds a closure node, contained by the enclosing declaration or
// closure, named like its parent with "$n" appended (n counts the parent's
// literals in source order from 1).
func (r *relPass) funcLit(lit *ast.FuncLit, parent ast.Node) {
	parentID := r.src
	if len(r.closures) > 0 {
		parentID = r.closures[len(r.closures)-1]
	}
	r.litCount[parentID]++
	id := parentID + "$" + strconv.Itoa(r.litCount[parentID])
	name := id[strings.LastIndex(id, ".")+1:]
	s, e := r.fset.PositionFor(lit.Pos(), r.w.lineAdjusted), r.fset.PositionFor(lit.End(), r.w.lineAdjusted)
	r.out.closures = append(r.out.closures, nodeRow{
		id: id, kind: "closure", name: valid(name), packageID: valid(r.w.pkgID), fileID: valid(r.w.fileID),
		pos: &span{startLine: s.Line, startCol: s.Column, endLine: e.Line, endCol: e.Column}, origin: r.origin,
	})
	r.edgeFrom(parentID, id, "contains")
	if call, ok := parent.(*ast.CallExpr); ok && unparen(call.Fun) == lit {
		r.edgeFrom(parentID, id, "calls")
	}
	r.closures = append(r.closures, id)
}

func unparen(e ast.Expr) ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			return e
		}
		e = p.X
	}
}

// calleeIdent returns the identifier that names a call's function
// (f, x.f, f[T], x.f[T]).
func calleeIdent(fun ast.Expr) *ast.Ident {
	for {
		switch e := unparen(fun).(type) {
		case *ast.Ident:
			return e
		case *ast.SelectorExpr:
			return e.Sel
		case *ast.IndexExpr:
			fun = e.X
		case *ast.IndexListExpr:
			fun = e.X
		default:
			return nil
		}
	}
}

func (r *relPass) call(call *ast.CallExpr) {
	fun := unparen(call.Fun)
	if _, ok := fun.(*ast.FuncLit); ok {
		return // the literal's calls edge is added when it is visited
	}
	callee := typeutil.Callee(r.info, call)
	if callee == nil {
		// A conversion, or a call of something other than a named
		// function, method, builtin or variable.
		if tv, ok := r.info.Types[call.Fun]; ok && (tv.IsType() || tv.IsBuiltin()) {
			return
		}
	}
	if _, ok := callee.(*types.Builtin); ok {
		return
	}
	if id := calleeIdent(fun); id != nil {
		r.callees[id] = true
	}
	switch callee := callee.(type) {
	case *types.Func:
		// typeutil.StaticCallee's test: not a method of an interface.
		if recv := callee.Signature().Recv(); recv == nil || !types.IsInterface(recv.Type()) {
			r.edge(r.z.objNode(callee.Origin()), "calls")
			return
		}
		target := r.z.objNode(callee)
		r.edge(target, "calls_dynamic")
		r.dynamic(call, "interface", target)
	case *types.Var:
		target := ""
		if callee.IsField() {
			target = r.z.objNode(callee.Origin())
		}
		r.edge(target, "calls_dynamic")
		r.dynamic(call, "func_value", target)
	case *types.Builtin, *types.TypeName:
	default:
		r.dynamic(call, "func_value", "")
	}
}

// dynamic records a call site whose callee is not known statically.
func (r *relPass) dynamic(call *ast.CallExpr, mode, target string) {
	row := dynamicCallRow{
		src: r.src, mode: mode, target: nonEmpty(target), expr: truncate(types.ExprString(call.Fun), 200),
		fileID: r.w.fileID, variant: r.w.variant,
	}
	if len(r.closures) > 0 {
		row.closure = valid(r.closures[len(r.closures)-1])
	}
	if tv, ok := r.info.Types[call.Fun]; ok && tv.Type != nil {
		row.signature = valid(types.TypeString(tv.Type, types.RelativeTo(r.w.pkg.Types)))
	}
	pos := r.fset.PositionFor(call.Lparen, r.w.lineAdjusted)
	row.line, row.col = pos.Line, pos.Column
	r.out.dynamic = append(r.out.dynamic, row)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// selector records what a method does with its own receiver: a field read
// or written (field_access, to the receiver's own field, which for a
// promoted field or method is the embedded field it is reached through)
// and a method of the same receiver called or taken as a method value
// (receiver_method).
func (r *relPass) selector(sel *ast.SelectorExpr) {
	if r.recv == nil {
		return
	}
	x := unparen(sel.X)
	if star, ok := x.(*ast.StarExpr); ok {
		x = unparen(star.X)
	}
	id, ok := x.(*ast.Ident)
	if !ok || r.info.Uses[id] != r.recv {
		return
	}
	s, ok := r.info.Selections[sel]
	if !ok {
		return
	}
	idx := s.Index()
	switch s.Kind() {
	case types.FieldVal:
		r.fieldAccess(idx[0])
	case types.MethodVal:
		if len(idx) > 1 {
			r.fieldAccess(idx[0])
			return
		}
		if fn, ok := s.Obj().(*types.Func); ok {
			r.edge(r.z.objNode(fn.Origin()), "receiver_method")
		}
	}
}

func (r *relPass) fieldAccess(i int) {
	if r.recvStruct == nil || i >= r.recvStruct.NumFields() {
		return
	}
	r.edge(r.b.objIDs[r.recvStruct.Field(i)], "field_access")
}

// ident records references to package-level types and to functions used
// as values, and instantiations of generic types and functions.
func (r *relPass) ident(id *ast.Ident) {
	obj := r.info.Uses[id]
	if obj == nil {
		return
	}
	if _, ok := r.info.Instances[id]; ok {
		switch o := obj.(type) {
		case *types.Func:
			r.edge(r.z.objNode(o.Origin()), "instantiates")
		case *types.TypeName:
			r.edge(r.z.objNode(o), "instantiates")
		}
	}
	switch o := obj.(type) {
	case *types.TypeName:
		if o.Pkg() != nil && o.Parent() == o.Pkg().Scope() {
			r.edge(r.z.objNode(o), "references")
		}
	case *types.Func:
		if !r.callees[id] {
			r.edge(r.z.objNode(o.Origin()), "references")
		}
	}
}

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
