package metrics

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/assay-audit/assay/indexer"
)

// Queryer is what metrics reads the graph database through: a *sql.DB or
// *sql.Tx.
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Options tunes Compute. The zero value computes every metric exactly.
type Options struct {
	// BetweennessSources, when > 0 and smaller than a graph's node count,
	// makes betweenness a Proxy estimated from that many source nodes
	// chosen deterministically (evenly spaced in id order) and scaled by
	// n/k (Brandes & Pich 2007); 0 means exact, all sources.
	BetweennessSources int
	// IncludeSynthetic keeps cgo-synthesized functions in the call graph
	// used for centrality; by default they are excluded.
	IncludeSynthetic bool
}

// SnapshotInfo is the part of the snapshot row metrics records.
type SnapshotInfo struct {
	ID       string
	Coverage float64
}

// Input is the graph database loaded for Compute: read once, shared by
// every descriptor, never modified by them.
type Input struct {
	Snapshot     SnapshotInfo
	BuildContext string
	Options      Options

	// Packages are the indexed packages, by node id.
	Packages map[string]*Package
	// PackageIDs are the keys of Packages, sorted.
	PackageIDs []string
	// Nodes are every node's kind, origin and location, by id.
	Nodes map[string]*Node
	// Types are the named types declared by indexed packages, sorted by id.
	Types []*Type
	// Funcs are the functions and methods declared by indexed packages,
	// sorted by id.
	Funcs []*Func
	// Closures are the closure node ids, sorted.
	Closures []string
	// Edges holds every edge by kind, each list sorted by (src, dst).
	Edges map[string][]Edge
	// Files are the indexed source files, by node id.
	Files map[string]*File

	sources *sourceSet
	// syntax, when not nil, holds the indexer's syntax trees of the
	// indexed files by path (FromGraph); sourcesOnce measures them instead
	// of reading and parsing the files, and drops them.
	syntax map[string]indexer.SourceSyntax
	// workers bounds the goroutines measuring sources and running
	// descriptors; 0 means GOMAXPROCS.
	workers int
	// seq, when not nil, gives a node id's nodes.seq in the database being
	// written (FromGraph): ids compare as their seqs do.
	seq func(id string) (int64, bool)
	// dynamic counts dynamic call sites per declared function.
	dynamic map[string]int
	calls   *callFacts
	// modules maps a package node id to its module's path (relPath).
	modules map[string]string
	// notClean says why each package that is not OK did not load cleanly
	// (see loadProblem), built once.
	notClean     map[string]string
	notCleanOnce sync.Once
}

// Package is one indexed package (one variant).
type Package struct {
	ID, ImportPath, Variant string
	// OK is false when the package had load errors or is ill-typed.
	OK bool
	// Errors counts the package's own load errors (packages.error_count);
	// a package with none that is not OK is ill-typed through a
	// dependency that did not load cleanly.
	Errors int
}

// Node is one node's kind, origin and where it is.
type Node struct {
	ID, Kind, Origin, PackageID, FileID string
	StartLine, StartCol                 int
}

// Type is a named type declared at package level.
type Type struct {
	ID, PackageID, Name, TypeKind string
	Resolved                      bool
	// Fields are the node ids of the struct type's fields.
	Fields []string
	// Methods are the node ids of the methods declared with this receiver
	// type in the same package variant.
	Methods []string
}

// Func is a declared function or method.
type Func struct {
	ID, PackageID, Name string
	IsMethod, Resolved  bool
	ReceiverTypeID      string
}

// Edge is one relation.
type Edge struct{ Src, Dst string }

// File is an indexed source file.
type File struct {
	ID, Path, SHA256 string
}

func (in *Input) origin(id string) string {
	if n, ok := in.Nodes[id]; ok {
		return n.Origin
	}
	return ""
}

func (in *Input) variant(id string) string {
	n, ok := in.Nodes[id]
	if !ok {
		return ""
	}
	if p, ok := in.Packages[n.PackageID]; ok {
		return p.Variant
	}
	if p, ok := in.Packages[id]; ok {
		return p.Variant
	}
	return ""
}

// relPath names f as files.rel_path does: its path relative to the root of
// its package's module, slash-separated ("syn/syn.go"), derived from the
// package's import path and module (the contains edge from its module
// node); f.Path when that does not place f in its module. It caches the
// modules in in: call it before the descriptors run (sourcesOnce does).
func (in *Input) relPath(f *File) string {
	n := in.Nodes[f.ID]
	if n == nil {
		return f.Path
	}
	p := in.Packages[n.PackageID]
	if p == nil {
		return f.Path
	}
	if in.modules == nil {
		in.modules = map[string]string{}
		for _, e := range in.Edges["contains"] {
			if strings.HasPrefix(e.Src, "mod:") {
				in.modules[e.Dst] = strings.TrimPrefix(e.Src, "mod:")
			}
		}
	}
	module := in.modules[p.ID]
	importPath := p.ImportPath
	if p.Variant == "xtest" {
		importPath = strings.TrimSuffix(importPath, "_test") // p_test lives in p's directory
	}
	dir := ""
	switch {
	case module == "":
		return f.Path
	case importPath == module:
	case strings.HasPrefix(importPath, module+"/"):
		dir = importPath[len(module)+1:] + "/"
	default:
		return f.Path
	}
	rel := dir + filepath.Base(f.Path)
	if !strings.HasSuffix(filepath.ToSlash(f.Path), "/"+rel) {
		return f.Path
	}
	return rel
}

// loadProblem says, for a reason, why p did not load cleanly: its own
// load or type errors, or, for a package with none that go/packages marks
// ill-typed, the imports that did not load cleanly (a type error there
// leaves some of p's expressions untyped). Safe for concurrent use.
func (in *Input) loadProblem(p *Package) string {
	in.notCleanOnce.Do(func() {
		in.notClean = map[string]string{}
		failed := map[string][]string{}
		for _, e := range in.Edges["imports"] {
			src, dst := in.Packages[e.Src], in.Packages[e.Dst]
			if src != nil && dst != nil && !src.OK && src.Errors == 0 && !dst.OK && e.Src != e.Dst {
				failed[e.Src] = append(failed[e.Src], dst.ImportPath)
			}
		}
		for _, id := range in.PackageIDs {
			q := in.Packages[id]
			switch {
			case q.OK:
			case q.Errors > 0:
				in.notClean[id] = "package " + q.ImportPath + " has load or type errors"
			case len(failed[id]) == 1:
				in.notClean[id] = "package " + q.ImportPath + " has no errors of its own but is ill-typed through its import " +
					failed[id][0] + ", which did not load cleanly"
			case len(failed[id]) > 1:
				in.notClean[id] = "package " + q.ImportPath + " has no errors of its own but is ill-typed through its imports " +
					strings.Join(failed[id], ", ") + ", which did not load cleanly"
			default:
				in.notClean[id] = "package " + q.ImportPath + " has no errors of its own but is ill-typed through a dependency that did not load cleanly"
			}
		}
	})
	return in.notClean[p.ID]
}

// Load reads the graph database through q. Errors are wrapped SQLite
// errors; a database without a snapshot row is an error.
func Load(ctx context.Context, q Queryer, opts Options) (*Input, error) {
	in := &Input{
		Options:  opts,
		Packages: map[string]*Package{},
		Nodes:    map[string]*Node{},
		Edges:    map[string][]Edge{},
		Files:    map[string]*File{},
	}
	var goos, goarch, cgo, tags string
	err := q.QueryRowContext(ctx, `SELECT id, coverage, goos, goarch, cgo_enabled, build_tags FROM snapshots`).
		Scan(&in.Snapshot.ID, &in.Snapshot.Coverage, &goos, &goarch, &cgo, &tags)
	if err != nil {
		return nil, fmt.Errorf("metrics: read snapshot: %w", err)
	}
	var tagList []string
	if err := json.Unmarshal([]byte(tags), &tagList); err != nil {
		return nil, fmt.Errorf("metrics: decode build tags %q: %w", tags, err)
	}
	in.BuildContext = fmt.Sprintf("GOOS=%s GOARCH=%s CGO_ENABLED=%s tags=%s", goos, goarch, cgo, strings.Join(tagList, ","))

	if err := scanRows(ctx, q, `SELECT id, import_path, variant, error_count = 0 AND ill_typed = 0, error_count FROM packages ORDER BY id`,
		func(rows *sql.Rows) error {
			p := &Package{}
			if err := rows.Scan(&p.ID, &p.ImportPath, &p.Variant, &p.OK, &p.Errors); err != nil {
				return err
			}
			in.Packages[p.ID] = p
			in.PackageIDs = append(in.PackageIDs, p.ID)
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT id, kind, origin, coalesce(package_id, ''), coalesce(file_id, ''),
			coalesce(start_line, 0), coalesce(start_col, 0) FROM nodes ORDER BY id`,
		func(rows *sql.Rows) error {
			n := &Node{}
			if err := rows.Scan(&n.ID, &n.Kind, &n.Origin, &n.PackageID, &n.FileID, &n.StartLine, &n.StartCol); err != nil {
				return err
			}
			in.Nodes[n.ID] = n
			if n.Kind == "closure" {
				in.Closures = append(in.Closures, n.ID)
			}
			return nil
		}); err != nil {
		return nil, err
	}
	types := map[string]*Type{}
	if err := scanRows(ctx, q, `SELECT id, package_id, name, type_kind, resolved FROM types ORDER BY id`,
		func(rows *sql.Rows) error {
			t := &Type{}
			if err := rows.Scan(&t.ID, &t.PackageID, &t.Name, &t.TypeKind, &t.Resolved); err != nil {
				return err
			}
			in.Types = append(in.Types, t)
			types[t.ID] = t
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT type_id, id FROM members WHERE kind = 'field' ORDER BY type_id, id`,
		func(rows *sql.Rows) error {
			var tid, id string
			if err := rows.Scan(&tid, &id); err != nil {
				return err
			}
			if t := types[tid]; t != nil {
				t.Fields = append(t.Fields, id)
			}
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT id, package_id, name, is_method, resolved, coalesce(receiver_type_id, '') FROM funcs ORDER BY id`,
		func(rows *sql.Rows) error {
			f := &Func{}
			if err := rows.Scan(&f.ID, &f.PackageID, &f.Name, &f.IsMethod, &f.Resolved, &f.ReceiverTypeID); err != nil {
				return err
			}
			in.Funcs = append(in.Funcs, f)
			if t := types[f.ReceiverTypeID]; t != nil {
				t.Methods = append(t.Methods, f.ID)
			}
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT kind, src, dst FROM edges ORDER BY kind, src, dst`,
		func(rows *sql.Rows) error {
			var kind string
			var e Edge
			if err := rows.Scan(&kind, &e.Src, &e.Dst); err != nil {
				return err
			}
			in.Edges[kind] = append(in.Edges[kind], e)
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT id, path, coalesce(sha256, '') FROM files WHERE indexed = 1 AND synthesized = 0 ORDER BY id`,
		func(rows *sql.Rows) error {
			f := &File{}
			if err := rows.Scan(&f.ID, &f.Path, &f.SHA256); err != nil {
				return err
			}
			in.Files[f.ID] = f
			return nil
		}); err != nil {
		return nil, err
	}
	if err := scanRows(ctx, q, `SELECT src, count(*) FROM dynamic_calls GROUP BY src ORDER BY src`,
		func(rows *sql.Rows) error {
			var src string
			var n int
			if err := rows.Scan(&src, &n); err != nil {
				return err
			}
			if in.dynamic == nil {
				in.dynamic = map[string]int{}
			}
			in.dynamic[src] = n
			return nil
		}); err != nil {
		return nil, err
	}
	return in, nil
}

// FromGraph builds the Input Load would read from the database the
// indexer writes for g: the same rows in the same order. It does not read
// the database, so it can run while the database is written (see
// Enrich).
func FromGraph(g *indexer.GraphView, opts Options) *Input {
	in := &Input{
		Options:  opts,
		Packages: map[string]*Package{},
		Nodes:    map[string]*Node{},
		Edges:    map[string][]Edge{},
		Files:    map[string]*File{},
	}
	s := g.Snapshot
	in.Snapshot = SnapshotInfo{ID: s.ID, Coverage: s.Coverage}
	in.syntax = g.Syntax
	in.seq = g.NodeSeq
	in.BuildContext = fmt.Sprintf("GOOS=%s GOARCH=%s CGO_ENABLED=%s tags=%s", s.GOOS, s.GOARCH, s.CGOEnabled, strings.Join(s.Tags, ","))
	// Node ids sort as their nodes.seq do (a seq is the id's position in id
	// order): comparing the integers orders the rows exactly as comparing
	// the ids would, without reading the ids' long common prefixes.
	seqs := func(n int, id func(int) string) []int64 {
		out := make([]int64, n)
		for i := range out {
			s, ok := g.NodeSeq(id(i))
			if !ok {
				return nil
			}
			out[i] = s
		}
		return out
	}
	byID := func(n int, id func(int) string) func(i, j int) int {
		if s := seqs(n, id); s != nil {
			return func(i, j int) int { return cmp.Compare(s[i], s[j]) }
		}
		return func(i, j int) int { return strings.Compare(id(i), id(j)) }
	}
	for _, i := range order(len(g.Packages), byID(len(g.Packages), func(i int) string { return g.Packages[i].ID })) {
		gp := g.Packages[i]
		in.Packages[gp.ID] = &Package{ID: gp.ID, ImportPath: gp.ImportPath, Variant: gp.Variant, OK: gp.ErrorCount == 0 && !gp.IllTyped,
			Errors: gp.ErrorCount}
		in.PackageIDs = append(in.PackageIDs, gp.ID)
	}
	for _, i := range order(len(g.Nodes), byID(len(g.Nodes), func(i int) string { return g.Nodes[i].ID })) {
		gn := g.Nodes[i]
		in.Nodes[gn.ID] = &Node{ID: gn.ID, Kind: gn.Kind, Origin: gn.Origin, PackageID: gn.PackageID, FileID: gn.FileID,
			StartLine: gn.StartLine, StartCol: gn.StartCol}
		if gn.Kind == "closure" {
			in.Closures = append(in.Closures, gn.ID)
		}
	}
	types := map[string]*Type{}
	for _, i := range order(len(g.Types), byID(len(g.Types), func(i int) string { return g.Types[i].ID })) {
		gt := g.Types[i]
		t := &Type{ID: gt.ID, PackageID: gt.PackageID, Name: gt.Name, TypeKind: gt.TypeKind, Resolved: gt.Resolved}
		in.Types = append(in.Types, t)
		types[t.ID] = t
	}
	memberOrder := func(i, j int) int {
		a, b := g.Members[i], g.Members[j]
		return cmp.Or(strings.Compare(a.TypeID, b.TypeID), strings.Compare(a.ID, b.ID))
	}
	typeSeq, memberSeq := seqs(len(g.Members), func(i int) string { return g.Members[i].TypeID }), seqs(len(g.Members), func(i int) string { return g.Members[i].ID })
	if typeSeq != nil && memberSeq != nil {
		memberOrder = func(i, j int) int {
			return cmp.Or(cmp.Compare(typeSeq[i], typeSeq[j]), cmp.Compare(memberSeq[i], memberSeq[j]))
		}
	}
	for _, i := range order(len(g.Members), memberOrder) {
		if m := g.Members[i]; m.Kind == "field" {
			if t := types[m.TypeID]; t != nil {
				t.Fields = append(t.Fields, m.ID)
			}
		}
	}
	for _, i := range order(len(g.Funcs), byID(len(g.Funcs), func(i int) string { return g.Funcs[i].ID })) {
		gf := g.Funcs[i]
		f := &Func{ID: gf.ID, PackageID: gf.PackageID, Name: gf.Name, IsMethod: gf.IsMethod, Resolved: gf.Resolved, ReceiverTypeID: gf.ReceiverTypeID}
		in.Funcs = append(in.Funcs, f)
		if t := types[f.ReceiverTypeID]; t != nil {
			t.Methods = append(t.Methods, f.ID)
		}
	}
	// Each kind's edges by (src, dst): in the order the indexer sorted
	// them in, (src, dst, kind), taken kind by kind; otherwise sorted here.
	edgeOrder, sorted := g.EdgeOrder()
	if !sorted {
		byIDs := func(i, j int) int {
			a, b := g.Edges[i], g.Edges[j]
			return cmp.Or(strings.Compare(a.Src, b.Src), strings.Compare(a.Dst, b.Dst), strings.Compare(a.Kind, b.Kind))
		}
		srcSeq, dstSeq := seqs(len(g.Edges), func(i int) string { return g.Edges[i].Src }), seqs(len(g.Edges), func(i int) string { return g.Edges[i].Dst })
		if srcSeq != nil && dstSeq != nil {
			byIDs = func(i, j int) int {
				return cmp.Or(cmp.Compare(srcSeq[i], srcSeq[j]), cmp.Compare(dstSeq[i], dstSeq[j]), strings.Compare(g.Edges[i].Kind, g.Edges[j].Kind))
			}
		}
		edgeOrder = order(len(g.Edges), byIDs)
	}
	for _, i := range edgeOrder {
		e := g.Edges[i]
		in.Edges[e.Kind] = append(in.Edges[e.Kind], Edge{Src: e.Src, Dst: e.Dst})
	}
	for _, gf := range g.Files {
		if gf.Indexed && !gf.Synthesized {
			in.Files[gf.ID] = &File{ID: gf.ID, Path: gf.Path, SHA256: gf.SHA256}
		}
	}
	for _, src := range g.DynamicCallSources {
		if in.dynamic == nil {
			in.dynamic = map[string]int{}
		}
		in.dynamic[src]++
	}
	return in
}

// parallelism is how many goroutines in may use.
func (in *Input) parallelism() int {
	if in.workers > 0 {
		return in.workers
	}
	return runtime.GOMAXPROCS(0)
}

// order returns the indexes 0..n-1 sorted by compare.
func order(n int, compare func(i, j int) int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, compare)
	return idx
}

func scanRows(ctx context.Context, q Queryer, query string, scan func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("metrics: query %q: %w", firstWords(query), err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("metrics: scan %q: %w", firstWords(query), err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("metrics: read %q: %w", firstWords(query), err)
	}
	return nil
}

func firstWords(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 60 {
		return q[:60] + "..."
	}
	return q
}
