package indexer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// TestParallelEach: every index runs exactly once; a panic in one call,
// or in making a worker, is an error naming it (and the process goes on);
// a cancelled context stops the calls with its error.
func TestParallelEach(t *testing.T) {
	ctx := context.Background()
	const n = 1000
	var seen [n]atomic.Int32
	if err := parallelEach(ctx, n, func(i int) string { return "item" }, func() func(int) {
		return func(i int) { seen[i].Add(1) }
	}); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if c := seen[i].Load(); c != 1 {
			t.Fatalf("index %d ran %d times, want once", i, c)
		}
	}

	err := parallelEach(ctx, n, func(i int) string { return "file f" + strings.Repeat("x", i%2) }, func() func(int) {
		return func(i int) {
			if i == 500 {
				panic("boom")
			}
		}
	})
	if err == nil || !strings.Contains(err.Error(), "internal error: boom (file f)") {
		t.Fatalf("panic at 500: err = %v, want it named", err)
	}

	err = parallelEach(ctx, n, func(i int) string { return "x" }, func() func(int) { panic("no worker") })
	if err == nil || !strings.Contains(err.Error(), "no worker (starting a worker)") {
		t.Fatalf("panic making a worker: err = %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	var ran atomic.Int32
	err = parallelEach(cctx, n, func(i int) string { return "x" }, func() func(int) {
		return func(i int) {
			if ran.Add(1) == 10 {
				cancel()
			}
		}
	})
	if !errors.Is(err, context.Canceled) || ran.Load() >= n {
		t.Fatalf("cancelled after 10 calls: err = %v after %d calls, want context.Canceled before all %d", err, ran.Load(), n)
	}
}
