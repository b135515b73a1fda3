package indexer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/objectpath"
)

// addPackage adds one root package with its files, declarations and
// errors; addImports adds its imports.
func (b *builder) addPackage(p *packages.Package) {
	g := b.g
	id := packageNodeID(p.ID)
	variant := packageVariant(p)
	g.packageNodes = append(g.packageNodes, nodeRow{
		id: id, kind: "package", name: nonEmpty(p.Name), origin: packageOrigin(variant),
	})
	row := packageRow{
		id: id, goID: p.ID, importPath: p.PkgPath,
		name: nonEmpty(p.Name), dir: nonEmpty(p.Dir),
		variant: variant, forTest: nonEmpty(p.ForTest),
		illTyped: p.IllTyped,
	}
	if row.importPath == "" {
		row.importPath = p.ID
	}
	if m := p.Module; m != nil {
		row.modulePath = nonEmpty(m.Path)
		row.moduleVersion = nonEmpty(m.Version)
		row.moduleDir = nonEmpty(m.Dir)
		row.moduleMain = valid(m.Main)
	}
	before := len(g.loadErrors)
	b.addErrors(p, valid(id))
	b.addFiles(p, id, variant)
	row.errorCount = len(g.loadErrors) - before
	if row.errorCount > 0 {
		g.packagesWithErrors++
	}
	if row.illTyped {
		g.packagesIllTyped++
	}
	if row.errorCount > 0 || row.illTyped {
		g.packagesFailed++
	}
	g.packages = append(g.packages, row)
}

// addImports adds the imports of root package p (after its declarations,
// addPackage) and returns the dependency nodes they introduced.
func (b *builder) addImports(p *packages.Package) []nodeRow {
	g := b.g
	id := packageNodeID(p.ID)
	variant := packageVariant(p)
	var deps []nodeRow
	for _, path := range slices.Sorted(maps.Keys(p.Imports)) {
		imp := p.Imports[path]
		dst := packageNodeID(imp.ID)
		indexed := b.indexed[imp.ID]
		if !indexed && !b.depNodes[dst] {
			b.depNodes[dst] = true
			deps = append(deps, nodeRow{id: dst, kind: "package", origin: "dependency"})
		}
		g.imports = append(g.imports, importRow{packageID: id, importPath: path, importedID: dst, importedIndexed: indexed})
		g.edges = append(g.edges, edgeRow{src: id, dst: dst, kind: "imports", variant: variant})
	}
	return deps
}

// read returns path's content and SHA-256, reading it at most once.
func (b *builder) read(path string) *fileContent {
	b.contentMu.Lock()
	defer b.contentMu.Unlock()
	if c, ok := b.content[path]; ok {
		return c
	}
	c := &fileContent{}
	c.data, c.err = os.ReadFile(path)
	if c.err == nil {
		s := sha256.Sum256(c.data)
		c.sum = hex.EncodeToString(s[:])
	}
	b.content[path] = c
	return c
}

// addFiles records p's Go files and the declarations of its source files.
func (b *builder) addFiles(p *packages.Package, pkgID, variant string) {
	g := b.g
	compiled := map[string]bool{}
	for _, f := range p.CompiledGoFiles {
		compiled[filepath.Clean(f)] = true
	}
	var paths []string
	seen := map[string]bool{}
	for _, f := range slices.Concat(p.GoFiles, p.CompiledGoFiles) {
		f = filepath.Clean(f)
		if !seen[f] {
			seen[f] = true
			paths = append(paths, f)
		}
	}
	slices.Sort(paths)
	syntax := map[string]*ast.File{}
	for _, f := range p.Syntax {
		if tf := p.Fset.File(f.FileStart); tf != nil {
			syntax[filepath.Clean(tf.Name())] = f
		}
	}
	ids := idAllocator{}
	enc := &objectpath.Encoder{}
	firstType, firstFunc := len(g.types), len(g.funcs)
	pkgDir := filepath.Clean(p.Dir)

	for _, path := range paths {
		base := filepath.Base(path)
		fr := fileRow{
			id:          ids.next("file:" + p.ID + ":" + base),
			packageID:   pkgID,
			path:        path,
			name:        base,
			isTest:      strings.HasSuffix(base, "_test.go"),
			synthesized: p.Dir == "" || filepath.Dir(path) != pkgDir,
			compiled:    compiled[path],
		}
		content := b.read(path)
		if content.err != nil {
			g.loadErrors = append(g.loadErrors, loadErrorRow{
				packageID: valid(pkgID), goID: p.ID, kind: "file", file: valid(path),
				message: fmt.Sprintf("read %s: %v", path, content.err),
			})
		} else {
			fr.sha256 = valid(content.sum)
			fr.sizeBytes = valid(int64(len(content.data)))
			fr.lines = valid(countLines(content.data))
		}
		if rel, ok := moduleRelPath(p.Module, path); ok {
			fr.relPath = valid(rel)
			if !fr.synthesized {
				g.digests[p.Module.Path+"/"+rel] = content.sum
			}
		} else if !fr.synthesized {
			g.digests[path] = content.sum
		}

		fset, file, info := p.Fset, syntax[path], p.TypesInfo
		// parsedClean: file is a complete tree of the hashed bytes.
		parsedClean := content.parsed && !content.syntaxErrors
		if file == nil {
			info = nil
			fset = token.NewFileSet()
			if content.err == nil {
				mode := parser.ParseComments | parser.SkipObjectResolution
				if fr.synthesized {
					mode |= parser.PackageClauseOnly
				}
				var perr error
				file, perr = parser.ParseFile(fset, path, content.data, mode)
				parsedClean = perr == nil
				// go/packages already reported parse errors of the files it
				// compiled; report only what it did not see.
				if perr != nil && !fr.compiled {
					g.loadErrors = append(g.loadErrors, loadErrorRow{
						packageID: valid(pkgID), goID: p.ID, kind: "parse", file: valid(path),
						message: perr.Error(),
					})
				}
			}
		}
		if file != nil {
			fr.generated = valid(ast.IsGenerated(file))
		}
		fr.indexed = file != nil && !fr.synthesized
		// The tree must be of the hashed bytes: parsed here from them, or by
		// go/packages from the bytes its ParseFile hook hashed. A file with
		// syntax errors has none handed over: go/packages' partial tree
		// (all errors) is not the one the metrics' own parse gives (which
		// stops at the tenth error), and the metrics read such a file.
		if fr.indexed && content.err == nil && parsedClean {
			g.syntax[path] = SourceSyntax{Fset: fset, File: file}
		}
		origin := "production"
		switch {
		case fr.synthesized:
			origin = "synthesized"
		case fr.generated.V:
			origin = "generated"
		case fr.isTest:
			origin = "test"
		}
		g.files = append(g.files, fr)
		g.fileNodes = append(g.fileNodes, nodeRow{
			id: fr.id, kind: "file", name: valid(base), packageID: valid(pkgID), origin: origin,
		})
		g.edges = append(g.edges, edgeRow{src: pkgID, dst: fr.id, kind: "contains", variant: variant})
		if !fr.indexed {
			continue
		}
		d := declExtractor{
			b: b, g: g, fset: fset, info: info, pkg: p.Types, goID: p.ID,
			pkgID: pkgID, fileID: fr.id, variant: variant, origin: origin, ids: &ids,
		}
		if info != nil {
			d.enc = enc
		}
		d.extract(file)
		if info != nil {
			b.work = append(b.work, relWork{pkg: p, pkgID: pkgID, fileID: fr.id, variant: variant, origin: origin, file: file,
				isTest: fr.isTest})
		}
	}
	linkReceivers(g, g.types[firstType:], g.funcs[firstFunc:], variant)
	b.bindCgo(p, pkgID, variant, syntax, g.types[firstType:], g.funcs[firstFunc:])
}

// bindCgo attaches type information to the declarations of a cgo package's
// source files. go/packages type-checks the files cgo rewrote (in the build
// cache, with //line directives back to the sources), not the sources the
// declarations were recorded from; each declaration of a rewritten file is
// matched to the source file its //line directive names and to the node of
// the same name there, which then becomes resolved, and the rewritten file
// is visited by the relation pass on behalf of that source file. The
// relation pass reports positions in such files //line-adjusted, since
// the physical positions are in the build cache.
func (b *builder) bindCgo(p *packages.Package, pkgID, variant string, syntax map[string]*ast.File, pkgTypes []typeRow, pkgFuncs []funcRow) {
	if p.TypesInfo == nil {
		return
	}
	fileIDs := map[string]string{}
	for i := range b.g.files {
		f := &b.g.files[i]
		if f.packageID == pkgID && f.indexed {
			fileIDs[f.path] = f.id
		}
	}
	origins := map[string]string{}
	for _, n := range b.g.fileNodes {
		if n.packageID.V == pkgID {
			origins[n.id] = n.origin
		}
	}
	types_ := map[string]*typeRow{}
	for i := range pkgTypes {
		types_[pkgTypes[i].id] = &pkgTypes[i]
	}
	funcs := map[string]*funcRow{}
	for i := range pkgFuncs {
		funcs[pkgFuncs[i].id] = &pkgFuncs[i]
	}
	pkgDir := filepath.Clean(p.Dir)
	paths := make([]string, 0, len(syntax))
	for path := range syntax {
		if filepath.Dir(path) != pkgDir {
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	for _, path := range paths {
		file := syntax[path]
		userFile := ""
		for _, decl := range file.Decls {
			pos := p.Fset.PositionFor(decl.Pos(), true)
			fid, ok := fileIDs[filepath.Clean(pos.Filename)]
			if !ok {
				continue
			}
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				fn, ok := p.TypesInfo.Defs[decl.Name].(*types.Func)
				if !ok {
					continue
				}
				id := "func:" + p.ID + "." + decl.Name.Name
				if decl.Recv != nil && len(decl.Recv.List) > 0 {
					recv, _, _ := receiverTypeName(decl.Recv.List[0].Type)
					id = "method:" + p.ID + "." + recv + "." + decl.Name.Name
				}
				row, ok := funcs[id]
				if !ok || row.resolved {
					continue
				}
				row.resolved = true
				row.signature = valid(types.TypeString(fn.Type(), types.RelativeTo(p.Types)))
				b.objIDs[fn] = id
				b.declIDs[declKey{p.ID, decl}] = id
				userFile = fid
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok {
						continue
					}
					tn, ok := p.TypesInfo.Defs[ts.Name].(*types.TypeName)
					id := "type:" + p.ID + "." + ts.Name.Name
					row, found := types_[id]
					if !ok || !found || row.resolved {
						continue
					}
					row.resolved = true
					row.typeKind = typeKind(tn)
					b.objIDs[tn] = id
					b.declIDs[declKey{p.ID, ts}] = id
					userFile = fid
				}
			}
		}
		if userFile != "" {
			b.work = append(b.work, relWork{pkg: p, pkgID: pkgID, fileID: userFile, variant: variant,
				origin: origins[userFile], file: file, lineAdjusted: true})
		}
	}
}

// linkReceivers sets receiver_type_id and adds the method_of edge for each
// method of one package whose receiver type is declared in that package.
func linkReceivers(g *graph, pkgTypes []typeRow, pkgFuncs []funcRow, variant string) {
	typeIDs := map[string]string{}
	for _, t := range pkgTypes {
		if _, dup := typeIDs[t.name]; !dup {
			typeIDs[t.name] = t.id
		}
	}
	for i := range pkgFuncs {
		f := &pkgFuncs[i]
		if !f.isMethod || !f.receiverTypeName.Valid {
			continue
		}
		if tid, ok := typeIDs[f.receiverTypeName.V]; ok {
			f.receiverTypeID = valid(tid)
			g.edges = append(g.edges, edgeRow{src: f.id, dst: tid, kind: "method_of", variant: variant})
		}
	}
}

func countLines(data []byte) int64 {
	n := int64(bytes.Count(data, []byte{'\n'}))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// moduleRelPath returns path relative to the module root, slash-separated,
// when path is inside it.
func moduleRelPath(m *packages.Module, path string) (string, bool) {
	if m == nil || m.Dir == "" {
		return "", false
	}
	rel, err := filepath.Rel(m.Dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
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
