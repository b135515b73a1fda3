package indexer

import "testing"

// TestEdgeOrderOfChangedEdges: a view whose Edges no longer have the
// length the indexer numbered gets no order (the caller sorts itself);
// one without an order at hand gets none; an intact one gets the
// indexer's.
func TestEdgeOrderOfChangedEdges(t *testing.T) {
	g := &graph{edges: []edgeRow{{src: "b", dst: "a", kind: "calls"}, {src: "a", dst: "b", kind: "calls"}}}
	seq := map[string]int64{"a": 1, "b": 2}
	ne := numberEdges(g.edges, seq)
	ne.run()
	v := &GraphView{Edges: []GraphEdge{{Src: "b", Dst: "a", Kind: "calls"}, {Src: "a", Dst: "b", Kind: "calls"}}, edgeOrder: ne.order}
	if order, ok := v.EdgeOrder(); !ok || len(order) != 2 || order[0] != 1 || order[1] != 0 {
		t.Fatalf("intact view: order %v, %v; want [1 0]", order, ok)
	}
	v.Edges = append(v.Edges, GraphEdge{Src: "a", Dst: "a", Kind: "calls"})
	if order, ok := v.EdgeOrder(); ok {
		t.Fatalf("edges appended after numbering: order %v given", order)
	}
	if _, ok := (&GraphView{}).EdgeOrder(); ok {
		t.Fatal("a view without an indexer's order got one")
	}
}
