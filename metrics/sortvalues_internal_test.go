package metrics

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortValuesBySeqEqualsByID: ordering subjects by node seq (their
// position in id order) gives the order of comparing the ids, and an id
// without a seq falls back to comparing ids.
func TestSortValuesBySeqEqualsByID(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("func:example.com/m/p%d.F%d", r.IntN(40), i))
	}
	sortedIDs := slices.Sorted(slices.Values(ids))
	seqOf := map[string]int64{}
	for i, id := range sortedIDs {
		seqOf[id] = int64(i + 1)
	}
	seq := func(id string) (int64, bool) { s, ok := seqOf[id]; return s, ok }
	metricsNames := []string{"fan_in", "cyclomatic", "cognitive"}
	var vals []Value
	for i := range 2000 {
		vals = append(vals, Value{Metric: metricsNames[r.IntN(3)], Subject: ids[r.IntN(len(ids))], Detail: fmt.Sprint(i)})
	}
	want := slices.Clone(vals)
	slices.SortStableFunc(want, func(a, b Value) int {
		if c := strings.Compare(a.Metric, b.Metric); c != 0 {
			return c
		}
		return strings.Compare(a.Subject, b.Subject)
	})
	got := slices.Clone(vals)
	sortValues(got, seq)
	for i := range got {
		if got[i].Metric != want[i].Metric || got[i].Subject != want[i].Subject {
			t.Fatalf("value %d: got %s %s, want %s %s", i, got[i].Metric, got[i].Subject, want[i].Metric, want[i].Subject)
		}
	}
	// Every value is still there once.
	count := func(vs []Value) map[string]int {
		m := map[string]int{}
		for _, v := range vs {
			m[v.Detail]++
		}
		return m
	}
	if c := count(got); len(c) != len(vals) {
		t.Fatalf("%d distinct values after sorting, %d before", len(c), len(vals))
	}
	// A subject without a seq: ordered by id all the same.
	withStranger := append(slices.Clone(vals), Value{Metric: "cyclomatic", Subject: "func:a.Stranger"})
	sortValues(withStranger, seq)
	if !slices.IsSortedFunc(withStranger, func(a, b Value) int {
		if c := strings.Compare(a.Metric, b.Metric); c != 0 {
			return c
		}
		return strings.Compare(a.Subject, b.Subject)
	}) {
		t.Fatal("values with a subject that has no seq are not sorted by (metric, subject)")
	}
}
