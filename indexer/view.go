package indexer

import (
	"context"
	"database/sql"
	"go/ast"
	"go/token"
)

// GraphView is the graph of an index, as its rows are written to the
// database, handed to Options.Enrich so that an enrichment (metrics)
// can be computed from memory while the rows are being inserted. Each
// field holds exactly the rows of the table it is named after, with NULL
// as "" or 0; the slices are in no particular order. A GraphView is a copy:
// reading it is safe while Index writes the database, and it is not
// changed afterwards.
type GraphView struct {
	// Snapshot is the snapshot being written (ID, build context, Coverage
	// and Counts are final; DBSHA256 is not known yet).
	Snapshot Snapshot
	Packages []GraphPackage
	Nodes    []GraphNode
	Types    []GraphType
	Members  []GraphMember
	Funcs    []GraphFunc
	Edges    []GraphEdge
	Files    []GraphFile
	// DynamicCallSources holds the src of every row of dynamic_calls.
	DynamicCallSources []string
	// Syntax holds the syntax tree of every indexed file (files.indexed,
	// by files.path) that parses without errors, parsed from exactly the
	// bytes whose SHA-256 the file's row records, with comments, without
	// object resolution. A file with syntax errors has no entry. The
	// trees are shared with the indexer and must not be modified; an
	// enrichment may drop the map when it is done with it.
	Syntax map[string]SourceSyntax

	seq       map[string]int64
	edgeOrder func() ([]int, bool)
}

// EdgeOrder returns the indexes of Edges sorted as edge_rows stores them:
// by the seq of Src, then the seq of Dst (NodeSeq), then Kind. It may wait
// for the indexer, which sorts them concurrently, and returns false when
// no such order is at hand (a view not from an index being written, an
// edge naming a node not in the graph, or Edges no longer of the length
// the indexer numbered); sort by NodeSeq then. The order is of Edges as
// the view was made: an enrichment that changes the slice must not use it.
func (v *GraphView) EdgeOrder() ([]int, bool) {
	if v.edgeOrder == nil {
		return nil, false
	}
	order, ok := v.edgeOrder()
	if !ok || len(order) != len(v.Edges) {
		return nil, false
	}
	return order, true
}

// NodeSeq returns the seq (INTEGER PRIMARY KEY of nodes: the node's
// position in id order, from 1) that the node id has in the database being
// written, and false for an id that is not a node of the graph. Rows an
// enrichment writes refer to nodes by seq.
func (v *GraphView) NodeSeq(id string) (int64, bool) {
	s, ok := v.seq[id]
	return s, ok
}

// SourceSyntax is one parsed source file and the file set its positions
// belong to. Positions are physical (read them with
// Fset.PositionFor(pos, false)): //line directives do not apply.
type SourceSyntax struct {
	Fset *token.FileSet
	File *ast.File
}

// GraphPackage is a row of packages.
type GraphPackage struct {
	ID, ImportPath, Variant string
	ErrorCount              int
	IllTyped                bool
}

// GraphNode is a row of nodes (PackageID, FileID "" and positions 0 when
// NULL).
type GraphNode struct {
	ID, Kind, Origin, PackageID, FileID string
	StartLine, StartCol                 int
}

// GraphType is a row of types.
type GraphType struct {
	ID, PackageID, Name, TypeKind string
	Resolved                      bool
}

// GraphMember is a row of members.
type GraphMember struct {
	ID, TypeID, Kind string
}

// GraphFunc is a row of funcs (ReceiverTypeID "" when NULL).
type GraphFunc struct {
	ID, PackageID, Name string
	IsMethod, Resolved  bool
	ReceiverTypeID      string
}

// GraphEdge is a row of the edges view.
type GraphEdge struct {
	Src, Dst, Kind string
}

// GraphFile is a row of files (SHA256 "" when NULL).
type GraphFile struct {
	ID, Path, SHA256     string
	Indexed, Synthesized bool
}

// EnrichFunc computes an enrichment (metric values) from the in-memory
// graph of an index, on its own goroutine while the graph rows are
// inserted, and returns the function that writes its rows into the
// database's transaction (called after the graph rows are in, before the
// checks and the SHA-256, so that both cover them). An error from either,
// or a panic, aborts the index: nothing is written.
type EnrichFunc func(ctx context.Context, g *GraphView) (write func(context.Context, *Tx) error, err error)

// view copies g's rows into a GraphView.
func (g *graph) view(snap Snapshot) *GraphView {
	v := &GraphView{Snapshot: snap, Syntax: g.syntax,
		Packages:           make([]GraphPackage, 0, len(g.packages)),
		Nodes:              make([]GraphNode, 0, len(g.moduleNodes)+len(g.packageNodes)+len(g.fileNodes)+len(g.declNodes)+len(g.extNodes)),
		Types:              make([]GraphType, 0, len(g.types)),
		Members:            make([]GraphMember, 0, len(g.members)),
		Funcs:              make([]GraphFunc, 0, len(g.funcs)),
		Edges:              make([]GraphEdge, 0, len(g.edges)),
		Files:              make([]GraphFile, 0, len(g.files)),
		DynamicCallSources: make([]string, 0, len(g.dynamicCalls)),
	}
	for _, p := range g.packages {
		v.Packages = append(v.Packages, GraphPackage{ID: p.id, ImportPath: p.importPath, Variant: p.variant,
			ErrorCount: p.errorCount, IllTyped: p.illTyped})
	}
	for _, rows := range [][]nodeRow{g.moduleNodes, g.packageNodes, g.fileNodes, g.declNodes, g.extNodes} {
		for _, n := range rows {
			gn := GraphNode{ID: n.id, Kind: n.kind, Origin: n.origin, PackageID: orEmpty(n.packageID), FileID: orEmpty(n.fileID)}
			if n.pos != nil {
				gn.StartLine, gn.StartCol = n.pos.startLine, n.pos.startCol
			}
			v.Nodes = append(v.Nodes, gn)
		}
	}
	for _, t := range g.types {
		v.Types = append(v.Types, GraphType{ID: t.id, PackageID: t.packageID, Name: t.name, TypeKind: t.typeKind, Resolved: t.resolved})
	}
	for _, m := range g.members {
		v.Members = append(v.Members, GraphMember{ID: m.id, TypeID: m.typeID, Kind: m.kind})
	}
	for _, f := range g.funcs {
		v.Funcs = append(v.Funcs, GraphFunc{ID: f.id, PackageID: f.packageID, Name: f.name, IsMethod: f.isMethod,
			Resolved: f.resolved, ReceiverTypeID: orEmpty(f.receiverTypeID)})
	}
	for _, e := range g.edges {
		v.Edges = append(v.Edges, GraphEdge{Src: e.src, Dst: e.dst, Kind: e.kind})
	}
	for _, f := range g.files {
		v.Files = append(v.Files, GraphFile{ID: f.id, Path: f.path, SHA256: orEmpty(f.sha256), Indexed: f.indexed, Synthesized: f.synthesized})
	}
	for _, d := range g.dynamicCalls {
		v.DynamicCallSources = append(v.DynamicCallSources, d.src)
	}
	return v
}

// orEmpty is a nullable string as the metrics read it: "" for NULL.
func orEmpty(s sql.Null[string]) string {
	if !s.Valid {
		return ""
	}
	return s.V
}
