package indexer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/types/objectpath"
)

// span is a physical source range: 1-based line and byte column of the
// start, and of the position just after the end.
type span struct {
	startLine, startCol, endLine, endCol int
}

// nodeRow is one row of nodes (see the package doc for the columns).
type nodeRow struct {
	id, kind  string
	name      sql.Null[string]
	packageID sql.Null[string]
	fileID    sql.Null[string]
	pos       *span
	origin    string
	// objectPath is golang.org/x/tools/go/types/objectpath's path of the
	// node's object within its package, NULL where none applies.
	objectPath sql.Null[string]
}

// edgeRow is one row of edges.
type edgeRow struct {
	src, dst, kind, variant string
}

// packageRow is one row of packages.
type packageRow struct {
	id, goID, importPath string
	name, dir            sql.Null[string]
	modulePath           sql.Null[string]
	moduleVersion        sql.Null[string]
	moduleDir            sql.Null[string]
	moduleMain           sql.Null[bool]
	variant              string
	forTest              sql.Null[string]
	illTyped             bool
	errorCount           int
}

// fileRow is one row of files.
type fileRow struct {
	id, packageID, path, name      string
	relPath                        sql.Null[string]
	isTest                         bool
	generated                      sql.Null[bool]
	synthesized, compiled, indexed bool
	sha256                         sql.Null[string]
	sizeBytes, lines               sql.Null[int64]
}

// typeRow is one row of types.
type typeRow struct {
	id, packageID, name, typeKind string
	exported                      bool
	typeParams                    int
	resolved                      bool
}

// funcRow is one row of funcs (functions and methods).
type funcRow struct {
	id, packageID, name string
	isMethod            bool
	receiver            sql.Null[string]
	receiverTypeName    sql.Null[string]
	receiverPointer     sql.Null[bool]
	receiverTypeID      sql.Null[string]
	exported            bool
	typeParams          int
	signature           sql.Null[string]
	resolved            bool
}

// importRow is one row of imports.
type importRow struct {
	packageID, importPath, importedID string
	importedIndexed                   bool
}

// loadErrorRow is one row of load_errors; seq is assigned on insert.
type loadErrorRow struct {
	packageID      sql.Null[string]
	goID, kind     string
	position, file sql.Null[string]
	line, col      sql.Null[int64]
	message        string
}

// graph is the whole database content, in insertion order. Every slice is
// built in a deterministic order so that the same inputs give the same file.
type graph struct {
	packageNodes []nodeRow // indexed packages, then dependencies
	fileNodes    []nodeRow
	declNodes    []nodeRow
	edges        []edgeRow
	packages     []packageRow
	files        []fileRow
	types        []typeRow
	funcs        []funcRow
	imports      []importRow
	loadErrors   []loadErrorRow
	members      []memberRow
	dynamicCalls []dynamicCallRow
	moduleNodes  []nodeRow
	extNodes     []nodeRow // declarations of dependencies and synthesized objects, targets of edges

	modulePaths        []string
	unmatched          int
	packagesWithErrors int
	packagesIllTyped   int
	// packagesFailed counts packages with load errors or ill-typed.
	packagesFailed int
	// digests maps a source file's module-qualified path to its SHA-256 hex
	// ("" when unreadable); it feeds Snapshot.ID.
	digests map[string]string
	// sortedNodes holds every node row in id order and seqOf each node's
	// seq, its position there from 1 (nodeSeqs); buildGraph sets both.
	sortedNodes []nodeRow
	seqOf       map[string]int64
	// syntax holds, in a full index, the syntax tree of every indexed file
	// that parses without errors, by path: parsed from the bytes whose
	// SHA-256 the file's row records.
	syntax map[string]SourceSyntax
}

// allNodes returns every node row in insertion order.
func (g *graph) allNodes() []nodeRow {
	return slices.Concat(g.moduleNodes, g.packageNodes, g.fileNodes, g.declNodes, g.extNodes)
}

// dedupEdges drops repeated (src, dst, kind) relations, keeping the first
// (two import paths resolving to one package are one relation).
func (g *graph) dedupEdges() {
	type key struct{ src, dst, kind string }
	seen := make(map[key]bool, len(g.edges))
	out := g.edges[:0]
	for _, e := range g.edges {
		k := key{e.src, e.dst, e.kind}
		if !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	g.edges = out
}

func (g *graph) counts() Counts {
	c := Counts{
		Nodes:              len(g.moduleNodes) + len(g.packageNodes) + len(g.fileNodes) + len(g.declNodes) + len(g.extNodes),
		Edges:              len(g.edges),
		Packages:           len(g.packages),
		Files:              len(g.files),
		Types:              len(g.types),
		Imports:            len(g.imports),
		LoadErrors:         len(g.loadErrors),
		PackagesWithErrors: g.packagesWithErrors,
		PackagesIllTyped:   g.packagesIllTyped,
		UnmatchedPatterns:  g.unmatched,
	}
	for _, f := range g.funcs {
		if f.isMethod {
			c.Methods++
		} else {
			c.Funcs++
		}
	}
	return c
}

// matched is the coverage denominator: indexed packages plus patterns that
// resolved to no package.
func (g *graph) matched() int { return len(g.packages) + g.unmatched }

// ok is the coverage numerator: indexed packages without load errors that
// go/packages does not mark ill-typed (a package whose dependency failed has
// incomplete type information even when it reports no error of its own).
func (g *graph) ok() int { return len(g.packages) - g.packagesFailed }

func (g *graph) coverage() float64 {
	if g.matched() == 0 {
		return 0
	}
	return float64(g.ok()) / float64(g.matched())
}

// moduleFileDigests returns the SHA-256 of go.mod and go.sum of every main
// module of the indexed packages, by module-qualified path, sorted ("" for
// a file that cannot be read: go.sum may not exist).
func (g *graph) moduleFileDigests() []fileDigest {
	dirs := map[string]string{} // module path -> dir
	for _, p := range g.packages {
		if p.moduleMain.Valid && p.moduleMain.V && p.moduleDir.Valid && p.modulePath.Valid {
			dirs[p.modulePath.V] = p.moduleDir.V
		}
	}
	var out []fileDigest
	for mod, dir := range dirs {
		for _, name := range []string{"go.mod", "go.sum"} {
			d := fileDigest{Path: mod + "/" + name}
			if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				s := sha256.Sum256(b)
				d.SHA256 = hex.EncodeToString(s[:])
			}
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b fileDigest) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func (g *graph) sourceDigests() []fileDigest {
	out := make([]fileDigest, 0, len(g.digests))
	for p, s := range g.digests {
		out = append(out, fileDigest{Path: p, SHA256: s})
	}
	slices.SortFunc(out, func(a, b fileDigest) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// fileContent is what is read from disk once per path, or what go/packages
// parsed (parsed set).
type fileContent struct {
	data   []byte
	sum    string
	err    error
	parsed bool
	// syntaxErrors is set when go/packages' parse of data reported errors:
	// its tree (parsed with parser.AllErrors) is then partial.
	syntaxErrors bool
}

// declKey identifies a declaration's syntax within one package variant.
type declKey struct {
	goID string
	node ast.Node
}

// builder carries the state of one buildGraph call.
type builder struct {
	g        *graph
	indexed  map[string]bool // package IDs being indexed
	depNodes map[string]bool // dependency node ids already added
	content  map[string]*fileContent
	// objIDs maps the go/types objects declared by indexed packages (types,
	// funcs, methods, fields, interface methods) to their node ids. Each
	// package variant has its own objects, so variants never merge.
	objIDs map[types.Object]string
	// declIDs maps a declaration's syntax (*ast.FuncDecl, *ast.TypeSpec) in
	// one package variant to its node id, for the relation pass. go/packages
	// shares one syntax tree between a package and its test variant, so the
	// variant is part of the key.
	declIDs map[declKey]string
	// rootOf maps an indexed package's types.Package to its go/packages
	// package.
	rootOf map[*types.Package]*packages.Package
	// extIDs holds the ids of nodes created for objects outside the indexed
	// declarations (dependencies, cgo-synthesized functions).
	extIDs map[string]bool
	// work lists what the relation pass visits: each indexed file with type
	// information, in graph order.
	work []relWork
	// enc computes object paths of dependency objects.
	enc *objectpath.Encoder
	// declared holds the ids of the indexed declarations' nodes.
	declared map[string]bool
	// contentMu guards content, which the declaration pass's fragments
	// (builder.fragment) share.
	contentMu *sync.Mutex
}

// buildGraph turns the load result into database rows. The content and
// hash of a file go/packages parsed are the bytes it parsed; any other
// source file is read once for its hash.
func buildGraph(ctx context.Context, res *loadResult) (*graph, error) {
	b := &builder{
		g:         &graph{digests: map[string]string{}, syntax: map[string]SourceSyntax{}, unmatched: len(res.unmatched)},
		indexed:   map[string]bool{},
		depNodes:  map[string]bool{},
		content:   maps.Clone(res.parsed),
		objIDs:    map[types.Object]string{},
		declIDs:   map[declKey]string{},
		rootOf:    map[*types.Package]*packages.Package{},
		extIDs:    map[string]bool{},
		declared:  map[string]bool{},
		contentMu: &sync.Mutex{},
	}
	for _, p := range res.roots {
		b.indexed[p.ID] = true
		if p.Types != nil {
			b.rootOf[p.Types] = p
		}
	}
	modules := map[string]bool{}
	var deps []nodeRow
	frags, err := b.declareAll(ctx, res.roots)
	if err != nil {
		return nil, err
	}
	for i, p := range res.roots {
		b.merge(frags[i])
		frags[i] = nil
		deps = append(deps, b.addImports(p)...)
		if p.Module != nil && p.Module.Path != "" {
			modules[p.Module.Path] = true
		}
	}
	b.g.packageNodes = append(b.g.packageNodes, deps...)
	b.addDependencyErrors(res.roots)
	if err := b.addRelations(ctx); err != nil {
		return nil, err
	}
	b.addModules(res)
	// Every node is known from here on: they are numbered (nodeSeqs) while
	// the edges are deduplicated.
	numbered := make(chan struct{})
	go func() {
		defer close(numbered)
		b.g.sortedNodes, b.g.seqOf = nodeSeqs(b.g)
	}()
	b.g.dedupEdges()
	for _, p := range res.testMains {
		b.addErrors(p, sql.Null[string]{})
	}
	for _, p := range res.unmatched {
		b.addErrors(p, sql.Null[string]{})
	}
	for m := range modules {
		b.g.modulePaths = append(b.g.modulePaths, m)
	}
	slices.Sort(b.g.modulePaths)
	<-numbered
	return b.g, nil
}

func valid[T any](v T) sql.Null[T] { return sql.Null[T]{V: v, Valid: true} }

func nonEmpty(s string) sql.Null[string] { return sql.Null[string]{V: s, Valid: s != ""} }

func packageNodeID(goID string) string { return "pkg:" + goID }

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

// declareAll runs addPackage for every root on all cores, each into a
// fragment of b (builder.fragment), and returns the fragments in roots'
// order. A panic in one package is returned as an error, like the
// relation pass's.
func (b *builder) declareAll(ctx context.Context, roots []*packages.Package) ([]*builder, error) {
	frags := make([]*builder, len(roots))
	err := parallelEach(ctx, len(roots), func(i int) string { return "declarations of " + roots[i].ID }, func() func(int) {
		return func(i int) {
			f := b.fragment()
			f.addPackage(roots[i])
			frags[i] = f
		}
	})
	if err != nil {
		return nil, fmt.Errorf("indexer: build graph: %w", err)
	}
	return frags, nil
}

// parallelEach calls the function worker returns for every i in 0..n-1, on
// min(GOMAXPROCS, n) goroutines that each call worker once (for state of
// their own) and take the next i until none is left. It returns ctx's
// error when ctx ended before every call ran, and a panic of any call as
// an error "internal error: VALUE (describe(i))": a defect met in one
// package or file is an error of the Index call, not a crash of the
// process that called it. No call starts after a panic.
func parallelEach(ctx context.Context, n int, describe func(i int) string, worker func() func(i int)) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Pointer[string]
	for range max(1, min(runtime.GOMAXPROCS(0), n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			current := -1
			defer func() {
				if r := recover(); r != nil {
					what := "starting a worker"
					if current >= 0 {
						what = describe(current)
					}
					msg := fmt.Sprintf("%v (%s)", r, what)
					panicked.CompareAndSwap(nil, &msg)
				}
			}()
			each := worker()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil || panicked.Load() != nil {
					return
				}
				current = i
				each(i)
			}
		}()
	}
	wg.Wait()
	if msg := panicked.Load(); msg != nil {
		return fmt.Errorf("internal error: %s", *msg)
	}
	return ctx.Err()
}

// fragment returns a builder that records one package's declarations into
// a graph of its own: it shares b's read-only state and the file content
// cache (under contentMu), and has its own maps of what it declares.
// merge adds it to b.
func (b *builder) fragment() *builder {
	return &builder{
		g:         &graph{digests: map[string]string{}, syntax: map[string]SourceSyntax{}},
		indexed:   b.indexed,
		content:   b.content,
		contentMu: b.contentMu,
		objIDs:    map[types.Object]string{},
		declIDs:   map[declKey]string{},
		rootOf:    b.rootOf,
		declared:  map[string]bool{},
	}
}

// merge appends fragment f's rows to b's graph and its maps to b's: the
// result is what running f's addPackage on b would have given, since every
// package's rows are contiguous in each slice and a later package's map
// entries replace an earlier one's.
func (b *builder) merge(f *builder) {
	g, fg := b.g, f.g
	g.packageNodes = append(g.packageNodes, fg.packageNodes...)
	g.fileNodes = append(g.fileNodes, fg.fileNodes...)
	g.declNodes = append(g.declNodes, fg.declNodes...)
	g.edges = append(g.edges, fg.edges...)
	g.packages = append(g.packages, fg.packages...)
	g.files = append(g.files, fg.files...)
	g.types = append(g.types, fg.types...)
	g.funcs = append(g.funcs, fg.funcs...)
	g.loadErrors = append(g.loadErrors, fg.loadErrors...)
	g.members = append(g.members, fg.members...)
	g.packagesWithErrors += fg.packagesWithErrors
	g.packagesIllTyped += fg.packagesIllTyped
	g.packagesFailed += fg.packagesFailed
	maps.Copy(g.digests, fg.digests)
	maps.Copy(g.syntax, fg.syntax)
	maps.Copy(b.objIDs, f.objIDs)
	maps.Copy(b.declIDs, f.declIDs)
	maps.Copy(b.declared, f.declared)
	b.work = append(b.work, f.work...)
}

// addDependencyErrors records the errors of the packages the roots import
// that are not indexed themselves (a missing module, a dependency that does
// not build): the root's own error only says that the import failed, and
// the go command's reason would otherwise be lost. Each dependency's errors
// are recorded once, without a package row (package_id NULL, go_id the
// dependency's), in the order the roots and their sorted imports reach it.
func (b *builder) addDependencyErrors(roots []*packages.Package) {
	seen := map[string]bool{}
	for _, p := range roots {
		for _, path := range slices.Sorted(maps.Keys(p.Imports)) {
			imp := p.Imports[path]
			if b.indexed[imp.ID] || seen[imp.ID] {
				continue
			}
			seen[imp.ID] = true
			if len(imp.Errors) > 0 || (imp.Module != nil && imp.Module.Error != nil) {
				b.addErrors(imp, sql.Null[string]{})
			}
		}
	}
}

// messagePosition returns the position a go command message starts with
// when its error has none of its own ("# pkg" header lines skipped):
// "p/bad.go:3:23" of "# example.com/m/p\np/bad.go:3:23: syntax error: ...",
// and "" when the first line does not start with FILE:LINE[:COL]: .
func messagePosition(msg string) string {
	for line := range strings.Lines(msg) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		head, _, found := strings.Cut(line, ": ")
		if !found || strings.ContainsAny(head, " \t") {
			return ""
		}
		if _, l, _, ok := splitPosition(head); ok && l > 0 {
			return head
		}
		return ""
	}
	return ""
}

// addErrors records p's errors, and its module's error if any.
func (b *builder) addErrors(p *packages.Package, pkgID sql.Null[string]) {
	for _, e := range p.Errors {
		r := loadErrorRow{packageID: pkgID, goID: p.ID, kind: errorKind(e.Kind), message: e.Msg}
		pos := e.Pos
		if pos == "" || pos == "-" {
			pos = messagePosition(e.Msg)
		}
		if pos != "" && pos != "-" {
			r.position = valid(pos)
			if file, line, col, ok := splitPosition(pos); ok {
				r.file = valid(file)
				r.line = valid(int64(line))
				if col > 0 {
					r.col = valid(int64(col))
				}
			}
		}
		b.g.loadErrors = append(b.g.loadErrors, r)
	}
	if p.Module != nil && p.Module.Error != nil {
		b.g.loadErrors = append(b.g.loadErrors, loadErrorRow{
			packageID: pkgID, goID: p.ID, kind: "module",
			message: fmt.Sprintf("module %s: %s", p.Module.Path, p.Module.Error.Err),
		})
	}
}

func errorKind(k packages.ErrorKind) string {
	switch k {
	case packages.ListError:
		return "list"
	case packages.ParseError:
		return "parse"
	case packages.TypeError:
		return "type"
	default:
		return "unknown"
	}
}

// splitPosition parses go/packages' "file:line:col" or "file:line"; ok is
// false (and the results zero) for anything else, such as "-".
func splitPosition(pos string) (file string, line, col int, ok bool) {
	rest, last, found := cutLast(pos, ":")
	if !found {
		return "", 0, 0, false
	}
	n, err := strconv.Atoi(last)
	if err != nil {
		return "", 0, 0, false
	}
	if head, mid, found := cutLast(rest, ":"); found {
		if m, err := strconv.Atoi(mid); err == nil && head != "" {
			return head, m, n, true
		}
	}
	if rest == "" {
		return "", 0, 0, false
	}
	return rest, n, 0, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
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
