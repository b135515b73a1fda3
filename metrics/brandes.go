package metrics

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// csr is a directed graph in compressed sparse row form over nodes 0..n-1:
// the successors of v are targets[offsets[v]:offsets[v+1]].
type csr struct {
	offsets []int32 // len n+1
	targets []int32
}

func newCSR(n int, edges [][2]int32) csr {
	g := csr{offsets: make([]int32, n+1), targets: make([]int32, len(edges))}
	for _, e := range edges {
		g.offsets[e[0]+1]++
	}
	for i := 0; i < n; i++ {
		g.offsets[i+1] += g.offsets[i]
	}
	next := slices.Clone(g.offsets[:n])
	for _, e := range edges {
		g.targets[next[e[0]]] = e[1]
		next[e[0]]++
	}
	return g
}

func (g csr) outDegree(v int32) int32 { return g.offsets[v+1] - g.offsets[v] }

// Betweenness returns the betweenness centrality of every node of the
// directed, unweighted graph with n nodes and the given edges (pairs of
// node indexes; duplicates must be removed by the caller, self-loops are
// ignored), by Brandes' algorithm: for each ordered pair (s, t), s != v !=
// t, the fraction of shortest s-t paths through v, summed; not normalized
// (the same values as gonum's network.Betweenness on a directed graph).
//
// With sources nil every node is a source (exact). Otherwise only the
// listed sources are used and the sums are scaled by n/len(sources)
// (an estimate, Brandes & Pich 2007). Work is spread over GOMAXPROCS
// goroutines; the result does not depend on their number (sums are taken
// in a fixed order). ctx cancels between sources.
//
// In the exact case a source s with a single successor u is not searched
// on its own: its dependencies are derived from u's search (see foldPlan),
// which gives the same values as searching from s.
//
// The searches run on nodes renumbered by ascending out-degree (see
// degreeOrder); the sums are mapped back to the caller's numbering, so the
// renumbering changes only the order in which floating-point sums are
// taken, not what is summed.
func Betweenness(ctx context.Context, n int, edges [][2]int32, sources []int32) ([]float64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("metrics: betweenness: %w", err)
	}
	// Searches run on renumbered nodes (see degreeOrder); results are
	// mapped back at the end.
	perm := degreeOrder(n, edges)
	var clean [][2]int32
	for _, e := range edges {
		if e[0] != e[1] {
			clean = append(clean, [2]int32{perm[e[0]], perm[e[1]]})
		}
	}
	if sources != nil {
		mapped := make([]int32, len(sources))
		for i, s := range sources {
			mapped[i] = perm[s]
		}
		sources = mapped
	}
	g := newCSR(n, clean)
	var fp foldPlan
	if sources == nil {
		fp = newFoldPlan(g, n)
		sources = fp.searched
	} else {
		fp = foldPlan{foldedInto: make([]int32, n)}
		for i := range fp.foldedInto {
			fp.foldedInto[i] = -1
		}
	}
	// Sources are dealt to a fixed number of chunks, each summing into its
	// own vector in source order; the chunks are then added in chunk order.
	// Which worker runs a chunk therefore does not change any sum.
	const chunks = 64
	partial := make([][]float64, chunks)
	work := make(chan int)
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var wg sync.WaitGroup
	var cancelled error
	var mu sync.Mutex
	var panicked atomic.Pointer[string]
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := newBrandesState(g, n)
			for c := range work {
				if panicked.Load() != nil {
					continue // drain: the sender must not block
				}
				msg := protect(func() {
					cb := make([]float64, n)
					for i, done := c, 0; i < len(sources); i, done = i+chunks, done+1 {
						if done%64 == 0 && ctx.Err() != nil {
							mu.Lock()
							cancelled = ctx.Err()
							mu.Unlock()
							break
						}
						s := sources[i]
						st.accumulate(s, fp.weight(s), fp.foldedInto, cb)
					}
					partial[c] = cb
				})
				if msg != "" {
					panicked.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}
	for c := 0; c < chunks; c++ {
		work <- c
	}
	close(work)
	wg.Wait()
	if msg := panicked.Load(); msg != nil {
		return nil, fmt.Errorf("metrics: betweenness: internal error: %s", *msg)
	}
	if cancelled != nil {
		return nil, fmt.Errorf("metrics: betweenness: %w", cancelled)
	}
	sum := make([]float64, n)
	for _, cb := range partial {
		for i, v := range cb {
			sum[i] += v
		}
	}
	out := make([]float64, n)
	for old, nw := range perm {
		out[old] = sum[nw]
	}
	if len(sources) < n && fp.searched == nil && len(sources) > 0 {
		scale := float64(n) / float64(len(sources))
		for i := range out {
			out[i] *= scale
		}
	}
	return out, nil
}

// degreeOrder returns a renumbering perm[old] = new of the nodes 0..n-1
// by ascending out-degree (self-loops excluded), ties by old number.
//
// Why: a search scans a level's nodes in ascending number, and the loop
// over each node's successors ends after out-degree steps. Under an
// arbitrary numbering that trip count changes from node to node and the
// processor mispredicts most loop exits; with nodes grouped by out-degree
// a level is a few runs of equal trip counts, which predict well
// (measured in docs/performance.md, "Betweenness"). It is a permutation,
// so every value is unchanged up to summation order.
func degreeOrder(n int, edges [][2]int32) []int32 {
	deg := make([]int32, n)
	for _, e := range edges {
		if e[0] != e[1] {
			deg[e[0]]++
		}
	}
	byDeg := make([]int32, n)
	for i := range byDeg {
		byDeg[i] = int32(i)
	}
	slices.SortStableFunc(byDeg, func(a, b int32) int { return int(deg[a]) - int(deg[b]) })
	perm := make([]int32, n)
	for nw, old := range byDeg {
		perm[old] = int32(nw)
	}
	return perm
}

// foldPlan says which sources are searched and which are folded into the
// search of their only successor.
//
// Let s have exactly one successor u. Every shortest path from s to a
// target t != s is the edge s->u followed by a shortest u-t path, and no
// shortest u-t path passes through s for t != s (it would visit u twice).
// Hence, writing δ_x(v) for the dependency of source x on v (Brandes 2001)
// and R(u) for the nodes reachable from u (u included):
//
//	δ_s(u) = |R(u)| - 1 - [s ∈ R(u)]
//	δ_s(v) = δ_u(v) - [s ∈ R(u)]·σ_us(v)/σ_us   for v ∉ {s, u}
//
// where σ_us(v)/σ_us is the fraction of shortest u-s paths through v.
// Both terms come out of u's backward pass (accumulate), so s needs no
// search of its own. Only sources whose successor is itself searched are
// folded (no chains), and a source whose only successor has no successors
// is dropped: it lies on no path between two other nodes and no path leaves
// it except to a dead end, so all its dependencies are 0.
type foldPlan struct {
	// searched are the sources to search, ascending; nil when the caller
	// chose the sources.
	searched []int32
	// foldedInto[s] is the source whose search accounts for s, or -1.
	foldedInto []int32
	// folded[u] is the number of sources folded into u.
	folded []int32
}

func newFoldPlan(g csr, n int) foldPlan {
	fp := foldPlan{searched: []int32{}, foldedInto: make([]int32, n), folded: make([]int32, n)}
	for s := int32(0); s < int32(n); s++ {
		fp.foldedInto[s] = -1
		switch g.outDegree(s) {
		case 0:
			// No successor: s reaches nothing.
		case 1:
			u := g.targets[g.offsets[s]]
			switch g.outDegree(u) {
			case 0:
				// s only reaches the dead end u: no dependency.
			case 1:
				fp.searched = append(fp.searched, s)
			default:
				fp.foldedInto[s] = u
				fp.folded[u]++
			}
		default:
			fp.searched = append(fp.searched, s)
		}
	}
	return fp
}

// weight is the number of sources whose dependencies s's search accounts
// for: itself and those folded into it.
func (fp foldPlan) weight(s int32) float64 {
	if fp.folded == nil {
		return 1
	}
	return float64(1 + fp.folded[s])
}

// dagEdge is an edge v->w of the shortest-path DAG of the current source:
// v is at position pos of the search order, w one level deeper.
type dagEdge struct {
	pos, w int32
}

// visitBits are 64 nodes' bits: visited at the current level or above, and
// found for the next level.
type visitBits struct {
	visited, next uint64
}

// brandesState is one worker's scratch space, reused across sources. The
// search runs level by level: a level's nodes are scanned in ascending
// order (which makes reads of the adjacency arrays nearly sequential), the
// test "not yet visited" reads an n-bit bitmap, and the edges of the
// shortest-path DAG are written in order to dag, so that the σ pass and
// the backward pass are flat loops over DAG edges rather than rescans of
// every edge.
type brandesState struct {
	g      csr
	bits   []visitBits
	sigma  []float64 // σ, then in the backward pass (W - fold)/σ + Σ successors
	sums   []float64 // per search position: Σ over DAG successors
	order  []int32   // nodes by level, ascending within a level
	dag    []dagEdge // DAG edges by level of their tail
	levels []int32   // level l is order[levels[l]:levels[l+1]]
	dagLvl []int32   // DAG edges of level l are dag[dagLvl[l]:dagLvl[l+1]]
}

func newBrandesState(g csr, n int) *brandesState {
	return &brandesState{g: g, bits: make([]visitBits, (n+63)/64), sigma: make([]float64, n),
		sums: make([]float64, n), order: make([]int32, 0, n), dag: make([]dagEdge, len(g.targets)+1)}
}

// scanLevel scans the successors of the level's nodes (level, at search
// positions from pos0): each unvisited successor is marked found for the
// next level and the DAG edge to it is appended to dag from index k; it
// returns the new length. Every successor is written to dag[k] and k
// advances only for DAG edges, so the inner loop has no data-dependent
// branch. Kept apart from accumulate so that the compiler keeps its state
// in registers.
func scanLevel(level []int32, pos0 int32, g csr, bm []visitBits, dag []dagEdge, k int) int {
	offsets, targets := g.offsets, g.targets
	for i, v := range level {
		pos := pos0 + int32(i)
		for _, w := range targets[offsets[v]:offsets[v+1]] {
			b := &bm[w>>6]
			unvisited := ^b.visited >> (w & 63) & 1
			b.next |= unvisited << (w & 63)
			dag[k] = dagEdge{pos, w}
			k += int(unvisited)
		}
	}
	return k
}

// accumulate adds source s's dependencies, weighted, to cb (see foldPlan):
// cb[v] += weight·δ_s(v) - Σ_{x folded into s, x reached} σ_sx(v)/σ_sx for
// v != s, and cb[s] += the folded sources' dependencies on s. With weight
// 1 and nothing folded into s this is Brandes 2001 for one source.
//
// The backward pass carries q(v) = (weight - [v folded into s])/σ(v) +
// Σ_w q(w) over v's DAG successors w; then weight·δ_s(v) minus the folded
// sources' path fractions through v equals σ(v)·Σ_w q(w) (Brandes 2001,
// Theorem 6, applied to each source and summed, since the recurrence is
// linear).
func (st *brandesState) accumulate(s int32, weight float64, foldedInto []int32, cb []float64) {
	g, bm, sigma, sums, dag := st.g, st.bits, st.sigma, st.sums, st.dag
	if g.outDegree(s) == 0 {
		return
	}
	order := append(st.order[:0], s)
	levels := append(st.levels[:0], 0, 1)
	dagLvl := append(st.dagLvl[:0], 0)
	bm[s>>6].visited |= 1 << (s & 63)
	sigma[s] = 1
	k := 0
	for {
		lo, hi := levels[len(levels)-2], levels[len(levels)-1]
		k = scanLevel(order[lo:hi], lo, g, bm, dag, k)
		start := int(dagLvl[len(dagLvl)-1])
		dagLvl = append(dagLvl, int32(k))
		if start == k {
			break
		}
		// σ(w) is the sum of σ over w's DAG predecessors (exact integers
		// while below 2^53).
		for _, e := range dag[start:k] {
			sigma[e.w] += sigma[order[e.pos]]
		}
		// The next level: read from the bitmap, ascending, when it is
		// large; from the DAG edges when that is cheaper than reading
		// every word (a deep, narrow search would otherwise pay n/64 per
		// level).
		if k-start >= len(bm) {
			for i := range bm {
				word := bm[i].next
				if word == 0 {
					continue
				}
				bm[i].visited |= word
				bm[i].next = 0
				for ; word != 0; word &= word - 1 {
					order = append(order, int32(i<<6+bits.TrailingZeros64(word)))
				}
			}
		} else {
			for _, e := range dag[start:k] {
				b, bit := &bm[e.w>>6], uint64(1)<<(e.w&63)
				if b.next&bit != 0 {
					b.next &^= bit
					b.visited |= bit
					order = append(order, e.w)
				}
			}
		}
		levels = append(levels, int32(len(order)))
	}
	folded := 0
	for l := len(levels) - 2; l >= 1; l-- {
		for _, e := range dag[dagLvl[l]:dagLvl[l+1]] {
			sums[e.pos] += sigma[e.w]
		}
		for pos := levels[l]; pos < levels[l+1]; pos++ {
			v := order[pos]
			sv := sigma[v]
			sum := sums[pos]
			sums[pos] = 0
			cb[v] += sv * sum
			own := weight
			if foldedInto[v] == s {
				own--
				folded++
			}
			sigma[v] = own/sv + sum
		}
	}
	if weight > 1 {
		// Each folded source x depends on s for every node s reaches
		// except s and x.
		cb[s] += (weight-1)*float64(len(order)-1) - float64(folded)
	}
	if len(order) > len(bm) {
		clear(bm)
	} else {
		for _, v := range order {
			bm[v>>6].visited = 0
		}
	}
	for _, v := range order {
		sigma[v] = 0
	}
	st.order, st.levels, st.dagLvl = order, levels, dagLvl
}
