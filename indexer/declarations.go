package indexer

import (
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/tools/go/types/objectpath"
)

// idAllocator makes node ids unique within a package: the second use of
// an id gets "#2", the third "#3", in the order ids are requested.
type idAllocator map[string]int

func (a idAllocator) next(id string) string {
	a[id]++
	if n := a[id]; n > 1 {
		return id + "#" + strconv.Itoa(n)
	}
	return id
}

// declExtractor records the package-level declarations of one file.
type declExtractor struct {
	b       *builder
	enc     *objectpath.Encoder // nil without type information
	g       *graph
	fset    *token.FileSet
	info    *types.Info // nil when only syntax is available
	pkg     *types.Package
	goID    string
	pkgID   string
	fileID  string
	variant string
	origin  string
	ids     *idAllocator
}

func (d *declExtractor) span(from, to token.Pos) *span {
	if !from.IsValid() || !to.IsValid() {
		return nil
	}
	// go/parser ends a declaration that the end of its file cuts off (a
	// parameter list not closed) one past that end: in the file set, the
	// first position of whichever file go/packages parsed next.
	if f := d.fset.File(from); f != nil && int(to) > f.Base()+f.Size() {
		to = token.Pos(f.Base() + f.Size())
	}
	s, e := d.fset.PositionFor(from, false), d.fset.PositionFor(to, false)
	return &span{startLine: s.Line, startCol: s.Column, endLine: e.Line, endCol: e.Column}
}

func (d *declExtractor) node(id, kind, name string, sp *span) {
	d.nodeWithOrigin(id, kind, name, sp, d.origin, nil)
}

// nodeWithOrigin adds a declaration node contained by the current file and
// records obj (when not nil) as declared by it.
func (d *declExtractor) nodeWithOrigin(id, kind, name string, sp *span, origin string, obj types.Object) {
	row := nodeRow{
		id: id, kind: kind, name: valid(name), packageID: valid(d.pkgID), fileID: valid(d.fileID),
		pos: sp, origin: origin,
	}
	if obj != nil {
		d.b.objIDs[obj] = id
		if d.enc != nil {
			if path, err := d.enc.For(obj); err == nil {
				row.objectPath = valid(string(path))
			}
		}
	}
	d.g.declNodes = append(d.g.declNodes, row)
	d.b.declared[id] = true
	d.g.edges = append(d.g.edges, edgeRow{src: d.fileID, dst: id, kind: "contains", variant: d.variant})
}

func (d *declExtractor) extract(file *ast.File) {
	for _, decl := range file.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			if decl.Tok != token.TYPE {
				continue
			}
			for _, spec := range decl.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || ts.Name == nil {
					continue
				}
				from := ts.Pos()
				if !decl.Lparen.IsValid() {
					from = decl.Pos()
				}
				d.typeSpec(ts, d.span(from, ts.End()))
			}
		case *ast.FuncDecl:
			if decl.Name != nil {
				d.funcDecl(decl)
			}
		}
	}
}

func (d *declExtractor) typeSpec(ts *ast.TypeSpec, sp *span) {
	name := ts.Name.Name
	row := typeRow{
		id:         d.ids.next("type:" + d.goID + "." + name),
		packageID:  d.pkgID,
		name:       name,
		exported:   ast.IsExported(name),
		typeParams: ts.TypeParams.NumFields(),
		typeKind:   syntaxTypeKind(ts),
	}
	var tn *types.TypeName
	if d.info != nil {
		if obj, ok := d.info.Defs[ts.Name].(*types.TypeName); ok {
			tn = obj
			row.resolved = true
			row.typeKind = typeKind(tn)
		}
	}
	var obj types.Object
	if tn != nil {
		obj = tn
	}
	d.nodeWithOrigin(row.id, "type", name, sp, d.origin, obj)
	d.b.declIDs[declKey{d.goID, ts}] = row.id
	d.g.types = append(d.g.types, row)
	if tn != nil && !tn.IsAlias() {
		d.members(ts, row.id, name)
	}
}

// members adds the fields of a struct type and the methods declared in an
// interface type, as nodes contained by the type (the containing file's
// contains edge is replaced by the type's).
func (d *declExtractor) members(ts *ast.TypeSpec, typeID, typeName string) {
	t := ts.Type
	for {
		p, ok := t.(*ast.ParenExpr)
		if !ok {
			break
		}
		t = p.X
	}
	var list *ast.FieldList
	kind, prefix := "", ""
	switch t := t.(type) {
	case *ast.StructType:
		list, kind, prefix = t.Fields, "field", "field:"
	case *ast.InterfaceType:
		list, kind, prefix = t.Methods, "interface_method", "imethod:"
	default:
		return
	}
	if list == nil {
		return
	}
	for _, f := range list.List {
		idents := f.Names
		embedded := len(idents) == 0
		if embedded {
			if kind == "interface_method" {
				continue // an embedded interface or type term, recorded as embeds
			}
			if id := embeddedIdent(f.Type); id != nil {
				idents = []*ast.Ident{id}
			}
		}
		for _, ident := range idents {
			obj := d.info.Defs[ident]
			if obj == nil {
				continue
			}
			id := d.ids.next(prefix + d.goID + "." + typeName + "." + ident.Name)
			d.nodeWithOrigin(id, kind, ident.Name, d.span(ident.Pos(), f.End()), d.origin, obj)
			// The member belongs to its type: re-point the contains edge.
			d.g.edges[len(d.g.edges)-1].src = typeID
			d.g.members = append(d.g.members, memberRow{
				id: id, typeID: typeID, packageID: d.pkgID, name: ident.Name, kind: kind,
				embedded: embedded, exported: ast.IsExported(ident.Name),
			})
		}
	}
}

// embeddedIdent returns the identifier naming an embedded field's type
// ("E", "*E", "pkg.E", "E[T]" -> the E identifier).
func embeddedIdent(expr ast.Expr) *ast.Ident {
	for {
		switch e := expr.(type) {
		case *ast.ParenExpr:
			expr = e.X
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.SelectorExpr:
			return e.Sel
		case *ast.Ident:
			return e
		default:
			return nil
		}
	}
}

// typeKind classifies a named type by go/types: alias, or the kind of its
// underlying type.
func typeKind(tn *types.TypeName) string {
	if tn.IsAlias() {
		return "alias"
	}
	switch u := tn.Type().Underlying().(type) {
	case *types.Struct:
		return "struct"
	case *types.Interface:
		return "interface"
	case *types.Basic:
		if u.Kind() == types.Invalid {
			return "unknown"
		}
		return "other"
	case nil:
		return "unknown"
	default:
		return "other"
	}
}

// syntaxTypeKind classifies a type spec without type information. A defined
// type whose underlying type is another named type is "unknown": only type
// checking can tell.
func syntaxTypeKind(ts *ast.TypeSpec) string {
	if ts.Assign.IsValid() {
		return "alias"
	}
	t := ts.Type
	for {
		p, ok := t.(*ast.ParenExpr)
		if !ok {
			break
		}
		t = p.X
	}
	switch t.(type) {
	case *ast.StructType:
		return "struct"
	case *ast.InterfaceType:
		return "interface"
	case *ast.ArrayType, *ast.MapType, *ast.ChanType, *ast.FuncType, *ast.StarExpr:
		return "other"
	default:
		return "unknown"
	}
}

func (d *declExtractor) funcDecl(fd *ast.FuncDecl) {
	name := fd.Name.Name
	row := funcRow{
		packageID:  d.pkgID,
		name:       name,
		isMethod:   fd.Recv != nil,
		exported:   ast.IsExported(name),
		typeParams: fd.Type.TypeParams.NumFields(),
	}
	kind := "func"
	if row.isMethod {
		kind = "method"
		recvName := ""
		if len(fd.Recv.List) > 0 && fd.Recv.List[0].Type != nil {
			expr := fd.Recv.List[0].Type
			row.receiver = valid(types.ExprString(expr))
			if n, ptr, ok := receiverTypeName(expr); ok {
				recvName = n
				row.receiverTypeName = valid(n)
				row.receiverPointer = valid(ptr)
			}
		}
		row.id = d.ids.next("method:" + d.goID + "." + recvName + "." + name)
	} else {
		row.id = d.ids.next("func:" + d.goID + "." + name)
	}
	var obj types.Object
	if d.info != nil {
		if fn, ok := d.info.Defs[fd.Name].(*types.Func); ok {
			obj = fn
			row.resolved = true
			row.signature = valid(types.TypeString(fn.Type(), types.RelativeTo(d.pkg)))
		}
	}
	origin := d.origin
	if origin == "test" && !row.isMethod && isExampleName(name) {
		origin = "example"
	}
	d.nodeWithOrigin(row.id, kind, name, d.span(fd.Pos(), fd.End()), origin, obj)
	d.b.declIDs[declKey{d.goID, fd}] = row.id
	d.g.funcs = append(d.g.funcs, row)
}

// receiverTypeName returns the base type name of a receiver expression
// ("*Pair[K, V]" -> "Pair", pointer true).
func receiverTypeName(expr ast.Expr) (name string, pointer, ok bool) {
	for {
		switch e := expr.(type) {
		case *ast.ParenExpr:
			expr = e.X
		case *ast.StarExpr:
			if pointer {
				return "", false, false
			}
			pointer = true
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name, pointer, true
		default:
			return "", false, false
		}
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
