package indexer

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// indexGCPercent is the garbage collector's target (GOGC) while Index
// loads and writes: the heap may grow to three times the live data between
// collections instead of the default two. Loading type-checks every
// package from source and allocates most of what it keeps, so fewer
// collections save about a tenth of the CPU time (docs/performance.md),
// while the peak stays near 1.5 times the default's bound. A GOGC set in
// the environment is left alone.
const indexGCPercent = 200

var gcTuning struct {
	sync.Mutex
	active int // Index calls running with the raised target
	saved  int // the target to restore when the last one ends
}

// raiseGCPercent sets the GC target to indexGCPercent unless the
// environment sets GOGC or it is already higher, and returns the function
// that restores it. Concurrent Index calls share the raise: the previous
// target comes back when the last one ends.
func raiseGCPercent() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	gcTuning.Lock()
	defer gcTuning.Unlock()
	if gcTuning.active == 0 {
		old := debug.SetGCPercent(indexGCPercent)
		if old < 0 || old > indexGCPercent {
			debug.SetGCPercent(old) // off or already higher: keep it
		}
		gcTuning.saved = old
	}
	gcTuning.active++
	return func() {
		gcTuning.Lock()
		defer gcTuning.Unlock()
		gcTuning.active--
		if gcTuning.active == 0 {
			debug.SetGCPercent(gcTuning.saved)
		}
	}
}

// holdHeadroom bounds the Go runtime's memory while the collector is held
// (holdCollector): 1.8 times what it had obtained by the end of the load.
// docs/performance.md's bound on an index's peak RSS is twice the bare
// load's; the rest is left for SQLite's own memory.
const holdHeadroom = 1.8

var gcHold struct {
	sync.Mutex
	holds   int   // Index calls holding the collector
	percent int   // the target to restore when the last one ends
	limit   int64 // the memory limit to restore, bytes
	held    int64 // the memory limit while held, bytes
}

// holdGCPercent is the GC target while held: a heap goal ten thousand
// times the live heap, which the memory limit always comes before. It is
// not -1 (off) because turning the collector off waits for a running
// cycle's marking to end (runtime.setGCPercent), where this lets that
// cycle finish alongside the graph build.
const holdGCPercent = 1_000_000

// holdCollector turns the collector's pacing off (holdGCPercent) for the
// work that follows a load, under a memory limit (runtime/debug SetMemoryLimit)
// of holdHeadroom times the memory the Go runtime holds now
// (runtime.MemStats.Sys, bytes), never above a limit already set
// (GOMEMLIMIT). It returns the function that restores both settings, safe
// to call more than once; concurrent Index calls share the hold, and the
// settings come back when the last one ends. A GOGC set in the
// environment is left alone, as raiseGCPercent leaves it.
//
// Why: after the load the heap is mostly the load's syntax trees and type
// information, live until the graph is built. A cycle the pacer starts
// while the graph is built marks all of it and frees little, and its
// assists slow the relation pass; on golang.org/x/tools that cost about
// 0.15 s of CPU time and 0.07 s of wall time in the median of ten runs
// (docs/performance.md). The collection Index runs once the graph is
// built (runtime.GC runs whatever the target) frees the type information,
// and the limit bounds what is allocated after it.
func holdCollector() (release func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	want := int64(math.Min(float64(ms.Sys)*holdHeadroom, math.MaxInt64))

	gcHold.Lock()
	defer gcHold.Unlock()
	if gcHold.holds == 0 {
		gcHold.limit = debug.SetMemoryLimit(-1) // a negative limit only reads it
		gcHold.percent = debug.SetGCPercent(holdGCPercent)
		gcHold.held = 0
	}
	gcHold.holds++
	// Concurrent holds share one limit: the largest any of them asks for,
	// within the one set before them.
	gcHold.held = min(max(gcHold.held, want), gcHold.limit)
	debug.SetMemoryLimit(gcHold.held)
	return sync.OnceFunc(func() {
		gcHold.Lock()
		defer gcHold.Unlock()
		gcHold.holds--
		if gcHold.holds == 0 {
			debug.SetGCPercent(gcHold.percent)
			debug.SetMemoryLimit(gcHold.limit)
		}
	})
}
