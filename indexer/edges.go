package indexer

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// edgeSeq is an edge_rows row: an edge with its nodes' seqs, and the
// edge's index in the graph's edges.
type edgeSeq struct {
	src, dst      int64
	kind, variant string
	index         int32
}

// numberedEdges are a graph's edges as numberEdges numbers and sorts them:
// rows and err are set once done is closed.
type numberedEdges struct {
	run  func() // numbers, sorts and closes done; call it once
	done chan struct{}
	rows []edgeSeq // by (src, dst, kind): edge_rows' primary key order
	err  error     // an edge names a node that is not in the graph (ErrDatabaseCheck)
}

// numberEdges returns the numbering of edges with their nodes' seqs,
// sorted by (src, dst, kind): its run does the work (once, on the
// goroutine that calls it) and closes done.
func numberEdges(edges []edgeRow, seqOf map[string]int64) *numberedEdges {
	ne := &numberedEdges{done: make(chan struct{})}
	ne.run = func() {
		defer close(ne.done)
		// Until the rows are in place (a panic ends run early).
		ne.err = fmt.Errorf("internal error: the edges were not numbered")
		if len(edges) > math.MaxInt32 {
			ne.err = fmt.Errorf("%w: %d edges, more than this index numbers", ErrDatabaseCheck, len(edges))
			return
		}
		rows := make([]edgeSeq, len(edges))
		for i, e := range edges {
			src, ok1 := seqOf[e.src]
			dst, ok2 := seqOf[e.dst]
			if !ok1 || !ok2 {
				ne.err = fmt.Errorf("%w: %s edge %s -> %s names a node that is not in the graph", ErrDatabaseCheck, e.kind, e.src, e.dst)
				return
			}
			rows[i] = edgeSeq{src, dst, e.kind, e.variant, int32(i)}
		}
		slices.SortFunc(rows, func(a, b edgeSeq) int {
			if c := cmp.Compare(a.src, b.src); c != 0 {
				return c
			}
			if c := cmp.Compare(a.dst, b.dst); c != 0 {
				return c
			}
			return strings.Compare(a.kind, b.kind)
		})
		ne.rows, ne.err = rows, nil
	}
	return ne
}

// order returns the indexes of the edges in the order of rows, waiting
// for them, and false when they could not be numbered.
func (ne *numberedEdges) order() ([]int, bool) {
	<-ne.done
	if ne.err != nil {
		return nil, false
	}
	idx := make([]int, len(ne.rows))
	for i, r := range ne.rows {
		idx[i] = int(r.index)
	}
	return idx, true
}
