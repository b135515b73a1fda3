package metrics_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/gonum/graph/network"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/assay-audit/assay/metrics"
)

// randomGraph returns n nodes and about m distinct directed edges without
// self-loops, from a fixed seed.
func randomGraph(seed uint64, n, m int) [][2]int32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := map[[2]int32]bool{}
	var edges [][2]int32
	for len(edges) < m {
		e := [2]int32{int32(r.IntN(n)), int32(r.IntN(n))}
		if e[0] == e[1] || seen[e] {
			continue
		}
		seen[e] = true
		edges = append(edges, e)
	}
	return edges
}

// TestBetweennessMatchesGonum validates the direct Brandes implementation
// against gonum's network.Betweenness (the reference) on directed graphs up
// to 2,000 nodes, to a relative error of 1e-9.
func TestBetweennessMatchesGonum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		n, m      int
		seed      uint64
		callGraph bool
	}{
		{"call-graph-like 2000 nodes", 2000, 4700, 6, true},
		{"path-like sparse", 50, 60, 1, false},
		{"dense small", 40, 600, 2, false},
		{"call-graph density", 500, 1200, 3, false},
		{"2000 nodes", 2000, 4700, 4, false},
		{"many equal shortest paths", 300, 3000, 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			edges := randomGraph(tc.seed, tc.n, tc.m)
			if tc.callGraph {
				edges = callGraphLike(tc.seed, tc.n, tc.m)
			}
			compareWithGonum(t, tc.name, tc.n, edges)
		})
	}
}

// TestBetweennessFoldedSourcesMatchGonum covers the sources that are not
// searched on their own (a single successor, see foldPlan): folded into a
// successor that reaches them back, several folded into one node, a chain
// of single-successor nodes (not folded), a single successor that is a dead
// end, and a long ring with chords whose searches are deep and narrow.
func TestBetweennessFoldedSourcesMatchGonum(t *testing.T) {
	ring := func(n int) [][2]int32 {
		var edges [][2]int32
		for i := 0; i < n; i++ {
			edges = append(edges, [2]int32{int32(i), int32((i + 1) % n)})
			if i%7 == 0 {
				edges = append(edges, [2]int32{int32(i), int32((i + 3) % n)})
			}
		}
		return edges
	}
	for _, tc := range []struct {
		name  string
		n     int
		edges [][2]int32
	}{
		{"folded source reached back", 5, [][2]int32{{0, 1}, {1, 2}, {1, 3}, {2, 0}, {3, 4}, {4, 0}}},
		{"three folded into one", 7, [][2]int32{{0, 3}, {1, 3}, {2, 3}, {3, 4}, {3, 5}, {4, 6}, {5, 6}, {6, 1}}},
		{"chain of single successors", 6, [][2]int32{{0, 1}, {1, 2}, {2, 3}, {2, 4}, {3, 5}, {4, 5}, {5, 0}}},
		{"single successor is a dead end", 4, [][2]int32{{0, 1}, {2, 0}, {2, 3}, {3, 0}}},
		{"ring with chords", 1500, ring(1500)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compareWithGonum(t, tc.name, tc.n, tc.edges)
		})
	}
}

var update = flag.Bool("update", false, "compute the gonum reference values stored under testdata/gonum again")

// goldenFrom is the node count from which gonum's reference values are
// read from testdata/gonum/<name>.json rather than computed on every run:
// gonum's network.Betweenness (maps, an allocation per path) takes most of
// this package's test time on the 1,500- and 2,000-node graphs. The file
// names the graph it was computed on (edgesSHA256); go test -update
// computes it again with gonum.
const goldenFrom = 1000

// gonumGolden is gonum's network.Betweenness of one graph, by node.
type gonumGolden struct {
	N           int       `json:"n"`
	EdgesSHA256 string    `json:"edges_sha256"`
	Betweenness []float64 `json:"betweenness"`
}

// edgesSHA256 is the SHA-256 (hex) of n and the edges in order, as
// little-endian int32s.
func edgesSHA256(n int, edges [][2]int32) string {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, int32(n))
	binary.Write(h, binary.LittleEndian, edges)
	return hex.EncodeToString(h.Sum(nil))
}

// gonumBetweenness returns gonum's network.Betweenness of the graph, by
// node: computed, or for a graph of goldenFrom nodes or more read from
// testdata/gonum/<name>.json (written there with -update).
func gonumBetweenness(t *testing.T, name string, n int, edges [][2]int32) []float64 {
	t.Helper()
	path := filepath.Join("testdata", "gonum", strings.ReplaceAll(name, " ", "_")+".json")
	if n >= goldenFrom && !*update {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("gonum reference values: %v (write them with go test -run %s -update)", err, t.Name())
		}
		var g gonumGolden
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if sum := edgesSHA256(n, edges); g.N != n || g.EdgesSHA256 != sum || len(g.Betweenness) != n {
			t.Fatalf("%s holds gonum's values of another graph (%d nodes, edges %s; this one: %d nodes, edges %s, %d values): run go test -run %s -update",
				path, g.N, g.EdgesSHA256, n, sum, len(g.Betweenness), t.Name())
		}
		return g.Betweenness
	}
	g := simple.NewDirectedGraph()
	for i := 0; i < n; i++ {
		g.AddNode(simple.Node(int64(i)))
	}
	for _, e := range edges {
		g.SetEdge(simple.Edge{F: simple.Node(int64(e[0])), T: simple.Node(int64(e[1]))})
	}
	ref := network.Betweenness(g)
	out := make([]float64, n)
	for i := range out {
		out[i] = ref[int64(i)]
	}
	if n >= goldenFrom {
		b, err := json.Marshal(gonumGolden{N: n, EdgesSHA256: edgesSHA256(n, edges), Betweenness: out})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// compareWithGonum checks Betweenness against gonum's network.Betweenness
// (gonumBetweenness) to a relative error of 1e-9 and fails when every
// value is 0.
func compareWithGonum(t *testing.T, name string, n int, edges [][2]int32) {
	t.Helper()
	ref := gonumBetweenness(t, name, n, edges)
	got, err := metrics.Betweenness(context.Background(), n, edges, nil)
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i := 0; i < n; i++ {
		want := ref[i]
		if want != 0 {
			nonzero++
		}
		if diff := math.Abs(got[i] - want); diff > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("node %d: betweenness %v, gonum %v (relative error %g)", i, got[i], want, diff/math.Max(1, math.Abs(want)))
		}
	}
	if nonzero == 0 {
		t.Fatalf("every betweenness is 0: the comparison proves nothing")
	}
}

// TestBetweennessIndependentOfWorkers: the same values bit for bit with one
// worker and with several.
func TestBetweennessIndependentOfWorkers(t *testing.T) {
	edges := randomGraph(7, 800, 2500)
	prev := runtime.GOMAXPROCS(1)
	one, err := metrics.Betweenness(context.Background(), 800, edges, nil)
	runtime.GOMAXPROCS(4)
	four, err2 := metrics.Betweenness(context.Background(), 800, edges, nil)
	runtime.GOMAXPROCS(prev)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	for i := range one {
		if one[i] != four[i] {
			t.Fatalf("node %d: %v with 1 worker, %v with 4", i, one[i], four[i])
		}
	}
}

// TestBetweennessListedSourcesMatchGonum: every node listed as a source,
// in shuffled order, is exact (scale n/n), so it must match gonum; this
// covers the caller's sources passing through the internal renumbering.
func TestBetweennessListedSourcesMatchGonum(t *testing.T) {
	const n = 600
	edges := randomGraph(8, n, 1500)
	sources := make([]int32, n)
	for i := range sources {
		sources[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(8, 9))
	r.Shuffle(n, func(i, j int) { sources[i], sources[j] = sources[j], sources[i] })
	g := simple.NewDirectedGraph()
	for i := 0; i < n; i++ {
		g.AddNode(simple.Node(int64(i)))
	}
	for _, e := range edges {
		g.SetEdge(simple.Edge{F: simple.Node(int64(e[0])), T: simple.Node(int64(e[1]))})
	}
	ref := network.Betweenness(g)
	got, err := metrics.Betweenness(context.Background(), n, edges, sources)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		want := ref[int64(i)]
		if diff := math.Abs(got[i] - want); diff > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("node %d: betweenness %v, gonum %v", i, got[i], want)
		}
	}
}

// TestBetweennessIndependentOfLabels: renaming the nodes by a random
// permutation (edges and sampled sources alike) renames the results and
// changes nothing else, exact and sampled.
func TestBetweennessIndependentOfLabels(t *testing.T) {
	const n = 700
	edges := randomGraph(9, n, 1800)
	r := rand.New(rand.NewPCG(9, 10))
	p := r.Perm(n)
	renamed := make([][2]int32, len(edges))
	for i, e := range edges {
		renamed[i] = [2]int32{int32(p[e[0]]), int32(p[e[1]])}
	}
	sources := []int32{3, 40, 41, 100, 250, 511, 699}
	renamedSources := make([]int32, len(sources))
	for i, s := range sources {
		renamedSources[i] = int32(p[s])
	}
	for _, tc := range []struct {
		name      string
		src, src2 []int32
	}{{"exact", nil, nil}, {"sampled", sources, renamedSources}} {
		a, err := metrics.Betweenness(context.Background(), n, edges, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := metrics.Betweenness(context.Background(), n, renamed, tc.src2)
		if err != nil {
			t.Fatal(err)
		}
		nonzero := 0
		for v := 0; v < n; v++ {
			if a[v] != 0 {
				nonzero++
			}
			if diff := math.Abs(a[v] - b[p[v]]); diff > 1e-9*math.Max(1, math.Abs(a[v])) {
				t.Fatalf("%s: node %d: %v, renamed node %d: %v", tc.name, v, a[v], p[v], b[p[v]])
			}
		}
		if nonzero == 0 {
			t.Fatalf("%s: every value is 0: the comparison proves nothing", tc.name)
		}
	}
}

func TestBetweennessHandGraph(t *testing.T) {
	// 0 -> 1 -> 2, 0 -> 3 -> 2: node 1 and node 3 each carry half of the
	// two shortest 0->2 paths.
	got, err := metrics.Betweenness(context.Background(), 4, [][2]int32{{0, 1}, {1, 2}, {0, 3}, {3, 2}, {2, 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 0.5, 0, 0.5}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d = %v, want %v", i, got[i], want[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := metrics.Betweenness(ctx, 4, [][2]int32{{0, 1}}, nil); err == nil {
		t.Errorf("cancelled context: no error")
	}
}

// BenchmarkBetweenness30k times exact betweenness on a 30,000-node,
// 70,000-edge uniformly random directed graph: a worst case for Brandes'
// algorithm, since almost every node lies in one giant strongly connected
// component and every source reaches all of it.
func BenchmarkBetweenness30k(b *testing.B) {
	edges := randomGraph(11, 30000, 70000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := metrics.Betweenness(context.Background(), 30000, edges, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// callGraphLike returns n nodes and m distinct edges shaped like a call
// graph: nodes in 40 layers, almost every edge calling into a deeper
// layer, one in a hundred calling back to a nearby node (local recursion
// and small cycles, as in real call graphs, where strongly connected
// components are small), callee choice skewed towards a few popular
// functions.
func callGraphLike(seed uint64, n, m int) [][2]int32 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const layers = 40
	layer := func(v int) int { return v * layers / n }
	seen := map[[2]int32]bool{}
	var edges [][2]int32
	for len(edges) < m {
		src := r.IntN(n)
		var dst int
		if r.IntN(100) == 0 || layer(src) == layers-1 {
			dst = max(0, src-1-r.IntN(50))
		} else {
			lo := (layer(src) + 1) * n / layers
			span := n - lo
			// Skewed: squaring a uniform draw favours the first nodes of the range.
			x := r.Float64()
			dst = lo + int(x*x*float64(span))
		}
		e := [2]int32{int32(src), int32(dst)}
		if e[0] == e[1] || seen[e] {
			continue
		}
		seen[e] = true
		edges = append(edges, e)
	}
	return edges
}

// BenchmarkBetweennessCallGraphLike30k times exact betweenness on a
// 30,000-node, 70,000-edge graph shaped like a call graph.
func BenchmarkBetweennessCallGraphLike30k(b *testing.B) {
	edges := callGraphLike(12, 30000, 70000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := metrics.Betweenness(context.Background(), 30000, edges, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGonumBetweenness2k is the reference's cost on 2,000 nodes, for
// comparison.
func BenchmarkGonumBetweenness2k(b *testing.B) {
	edges := randomGraph(4, 2000, 4700)
	g := simple.NewDirectedGraph()
	for i := 0; i < 2000; i++ {
		g.AddNode(simple.Node(int64(i)))
	}
	for _, e := range edges {
		g.SetEdge(simple.Edge{F: simple.Node(int64(e[0])), T: simple.Node(int64(e[1]))})
	}
	b.ResetTimer()
	for b.Loop() {
		network.Betweenness(g)
	}
}
