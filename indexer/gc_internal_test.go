package indexer

import (
	"math"
	"runtime"
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

// TestHoldCollector: a hold turns the pacing off at once and, once it
// has collected, sets a limit of holdHeadroom times the runtime's memory,
// never above a limit set before; overlapping holds share it and both
// settings come back only when the last one ends, also after a raise and
// holds interleaved from many goroutines; a release or collected called
// twice counts once; GOGC in the environment is left alone.
func TestHoldCollector(t *testing.T) {
	percent, limit := gcSettings(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ca, a := holdCollector()
	if p, l := percent(), limit(); p != holdGCPercent || l != math.MaxInt64 {
		t.Fatalf("held, not collected yet: GC percent %d limit %d, want %d and no limit", p, l, holdGCPercent)
	}
	ca()
	ca() // a second call must not count as another hold's collection
	if p := percent(); p != holdGCPercent {
		t.Fatalf("held: GC percent %d, want %d", p, holdGCPercent)
	}
	if l := limit(); l < int64(float64(ms.Sys)*holdHeadroom)/2 || l > int64(float64(ms.Sys)*holdHeadroom)*2 {
		t.Fatalf("held and collected: memory limit %d, want about %.1f times Sys %d", l, holdHeadroom, ms.Sys)
	}
	cb, b := holdCollector()
	if l := limit(); l != math.MaxInt64 {
		t.Fatalf("a second hold has not collected: limit %d, want none until it has", l)
	}
	cb()
	if l := limit(); l == math.MaxInt64 {
		t.Fatal("both holds collected: no memory limit")
	}
	a()
	a() // a second call must not end b's hold
	if p, l := percent(), limit(); p != holdGCPercent || l == math.MaxInt64 {
		t.Fatalf("one of two holds released (once twice): GC percent %d limit %d, want %d and a limit still", p, l, holdGCPercent)
	}
	b()
	if p, l := percent(), limit(); p != 100 || l != math.MaxInt64 {
		t.Fatalf("after both holds: GC percent %d limit %d, want 100 and no limit restored", p, l)
	}

	// A hold released before it collected (an error while building the
	// graph) leaves no limit behind for the holds after it.
	_, d := holdCollector()
	d()
	ce, e := holdCollector()
	if l := limit(); l != math.MaxInt64 {
		t.Fatalf("after a hold released uncollected: limit %d, want none", l)
	}
	ce()
	e()
	ce() // after the release: nothing
	if p, l := percent(), limit(); p != 100 || l != math.MaxInt64 {
		t.Fatalf("collected after its release: GC percent %d limit %d, want 100 and no limit", p, l)
	}

	// A collector the process turned off stays off, without a limit.
	debug.SetGCPercent(-1)
	coff, off := holdCollector()
	coff()
	if p, l := percent(), limit(); p != -1 || l != math.MaxInt64 {
		t.Fatalf("held and collected with the collector turned off: GC percent %d limit %d, want -1 and no limit", p, l)
	}
	off()
	if p := percent(); p != -1 {
		t.Fatalf("after the hold: GC percent %d, want -1 restored", p)
	}
	debug.SetGCPercent(100)

	// A limit set before is an upper bound.
	debug.SetMemoryLimit(1 << 20)
	cc, c := holdCollector()
	if l := limit(); l != 1<<20 {
		t.Fatalf("held under a 1 MiB limit: limit %d, want 1 MiB kept", l)
	}
	cc()
	if l := limit(); l != 1<<20 {
		t.Fatalf("held and collected under a 1 MiB limit: limit %d, want 1 MiB kept", l)
	}
	c()
	if l := limit(); l != 1<<20 {
		t.Fatalf("after the hold: limit %d, want 1 MiB restored", l)
	}
	debug.SetMemoryLimit(math.MaxInt64)

	// Raises and holds nested as Index nests them, from many goroutines.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := raiseGCPercent()
			ch, h := holdCollector()
			if i%2 == 0 {
				ch()
			}
			h()
			r()
		}()
	}
	wg.Wait()
	if p, l := percent(), limit(); p != 100 || l != math.MaxInt64 {
		t.Fatalf("after concurrent raises and holds: GC percent %d limit %d, want 100 and no limit", p, l)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	cg, g := holdCollector()
	cg()
	if p, l := percent(), limit(); p != 50 || l != math.MaxInt64 {
		t.Fatalf("with GOGC=50 in the environment: GC percent %d limit %d, want 50 and no limit", p, l)
	}
	g()
}

// TestHoldWaitsForEveryLoad: while another Index call is still loading,
// a call past its load does not turn the pacing off or set a memory limit
// (sized for its own load, it would make the other collect continuously);
// the hold applies once every running call holds, its limit once every
// one has also collected, and each call's end brings back the settings
// the remaining ones call for.
func TestHoldWaitsForEveryLoad(t *testing.T) {
	percent, limit := gcSettings(t)
	want := func(step string, p int, limited bool) {
		t.Helper()
		if got := percent(); got != p {
			t.Fatalf("%s: GC percent %d, want %d", step, got, p)
		}
		if l := limit(); (l != math.MaxInt64) != limited {
			t.Fatalf("%s: memory limit %d, want limited=%v", step, l, limited)
		}
	}

	a, b := raiseGCPercent(), raiseGCPercent()
	want("two calls loading", indexGCPercent, false)
	ca, ha := holdCollector()
	ca()
	want("one call past its load and collected, one loading", indexGCPercent, false)
	cb, hb := holdCollector()
	want("both past their load, one collected", holdGCPercent, false)
	cb()
	want("both past their load and collected", holdGCPercent, true)
	c := raiseGCPercent()
	want("a third call starts loading", indexGCPercent, false)
	c()
	want("the third call ended", holdGCPercent, true)
	hb()
	b()
	want("one call left, holding", holdGCPercent, true)
	ha()
	want("its hold ended", indexGCPercent, false)
	a()
	want("all ended", 100, false)
}

// gcSettings starts a test of the process's GC settings from GC percent
// 100, no memory limit and no GOGC in the environment, restores what was
// there when the test ends, and returns readers of the current percent and
// limit (bytes).
func gcSettings(t *testing.T) (percent func() int, limit func() int64) {
	t.Helper()
	origPercent := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(origPercent) })
	origLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(origLimit) })
	t.Setenv("GOGC", "")
	percent = func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	limit = func() int64 { return debug.SetMemoryLimit(-1) }
	return percent, limit
}
