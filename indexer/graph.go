package indexer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/types"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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

	modulePaths []string
	unmatched   int
	// excluded counts the package directories the build context excluded
	// (findExcluded); each is a matched package that did not load.
	excluded           int
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
	// syntax holds the syntax tree of every indexed file that parses
	// without errors, by path: parsed from the bytes whose SHA-256 the
	// file's row records.
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
		PackagesExcluded:   g.excluded,
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
// resolved to no package plus package directories the build context
// excluded.
func (g *graph) matched() int { return len(g.packages) + g.unmatched + g.excluded }

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
