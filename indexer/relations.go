package indexer

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strconv"
	"strings"

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
	r.methodExprOnReceiver(call, fun)
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

// methodExprOnReceiver records a method expression called with the method's own receiver as its
// first argument, (*T).m(r) or T.m(*r): the same call as r.m() (Hitz & Montazeri's "one calls the
// other" on the same object), so it is a receiver_method edge too.
func (r *relPass) methodExprOnReceiver(call *ast.CallExpr, fun ast.Expr) {
	if r.recv == nil || len(call.Args) == 0 {
		return
	}
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return
	}
	s, ok := r.info.Selections[sel]
	if !ok || s.Kind() != types.MethodExpr || len(s.Index()) != 1 {
		return
	}
	arg := unparen(call.Args[0])
	switch a := arg.(type) {
	case *ast.StarExpr:
		arg = unparen(a.X)
	case *ast.UnaryExpr:
		if a.Op == token.AND {
			arg = unparen(a.X)
		}
	}
	if id, ok := arg.(*ast.Ident); ok && r.info.Uses[id] == r.recv {
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
