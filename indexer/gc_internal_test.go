package indexer

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestRaiseGCPercent: overlapping calls share one raise and the previous
// target comes back only when the last one ends; a higher target is kept;
// GOGC in the environment is left alone.
func TestRaiseGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	t.Setenv("GOGC", "")

	a := raiseGCPercent()
	b := raiseGCPercent()
	if got := debug.SetGCPercent(-1); got != indexGCPercent {
		t.Fatalf("while indexing: GC percent %d, want %d", got, indexGCPercent)
	}
	debug.SetGCPercent(indexGCPercent)
	a()
	if got := debug.SetGCPercent(indexGCPercent); got != indexGCPercent {
		t.Fatalf("one of two calls ended: GC percent %d, want %d still", got, indexGCPercent)
	}
	b()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after both calls: GC percent %d, want 100 restored", got)
	}

	debug.SetGCPercent(400)
	raiseGCPercent()()
	if got := debug.SetGCPercent(100); got != 400 {
		t.Fatalf("a higher target became %d, want 400 kept", got)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	r := raiseGCPercent()
	if got := debug.SetGCPercent(50); got != 50 {
		t.Fatalf("with GOGC=50 in the environment: GC percent %d, want 50", got)
	}
	r()

	// Many concurrent calls end with the target restored.
	t.Setenv("GOGC", "")
	debug.SetGCPercent(100)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raiseGCPercent()()
		}()
	}
	wg.Wait()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after concurrent calls: GC percent %d, want 100", got)
	}
}
