package indexer

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// indexGCPercent is the garbage collector's target (GOGC) while an Index
// call loads (and while any other call of the process does; after the
// load see holdCollector): the heap may grow to three times the live data between
// collections instead of the default two. Loading type-checks every
// package from source and allocates most of what it keeps, so fewer
// collections save about a tenth of the CPU time (docs/performance.md),
// while the peak stays near 1.5 times the default's bound. A GOGC set in
// the environment is left alone.
const indexGCPercent = 200

// holdHeadroom bounds the Go runtime's memory while the collector is held
// (holdCollector): 1.8 times what it had obtained by the end of the load.
// docs/performance.md's bound on an index's peak RSS is twice the bare
// load's; the rest is left for SQLite's own memory.
const holdHeadroom = 1.8

// holdGCPercent is the GC target while held: a heap goal ten thousand
// times the live heap, so that no cycle starts but at the memory limit
// (once it applies) or the runtime.GC Index calls. It is not -1 (off),
// which would also stop the collection at the memory limit.
const holdGCPercent = 1_000_000

// gcTuning is the garbage collector's setting shared by the Index calls of
// one process: while any of them loads, the target is indexGCPercent with
// the memory limit found; once every running call is past its load
// (holdCollector), the pacing is off, and once every one has also run its
// collection, under a memory limit. When the last call ends, the target
// and limit found before the first come back.
var gcTuning struct {
	sync.Mutex
	active     int   // Index calls running (raiseGCPercent)
	holds      int   // of those, the ones past their load (holdCollector)
	limiting   int   // of those, the ones past their own collection (collected)
	holding    bool  // the hold applies (set by applyGCTuning)
	saved      int   // the target to restore when the last one ends
	savedLimit int64 // the memory limit to restore, bytes
	held       int64 // the memory limit the limiting holds asked for, bytes
}

// applyGCTuning sets the target and limit gcTuning's counts call for.
// Holding only once every running call holds keeps a call that is still
// loading from collecting against a limit sized for another's smaller
// load. The caller holds gcTuning's lock.
func applyGCTuning() {
	t := &gcTuning
	holding := t.holding
	t.holding = t.holds > 0 && t.holds >= t.active
	switch {
	case t.active == 0 && t.holds == 0:
		debug.SetGCPercent(t.saved)
		debug.SetMemoryLimit(t.savedLimit)
	case t.holds >= t.active && t.saved < 0:
		// The process turned the collector off (debug.SetGCPercent(-1),
		// not GOGC): the hold neither turns it on nor sets a limit.
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(t.savedLimit)
	case t.holds >= t.active:
		if !holding {
			// Entering the hold: a cycle the load started (it marks the
			// whole load's heap) finishes its marking first, on every
			// core; turning the collector off waits for that
			// (runtime.setGCPercent).
			debug.SetGCPercent(-1)
		}
		debug.SetGCPercent(holdGCPercent)
		if t.limiting >= t.holds {
			debug.SetMemoryLimit(min(t.held, t.savedLimit))
		} else {
			debug.SetMemoryLimit(t.savedLimit)
		}
	default:
		p := indexGCPercent
		if t.saved < 0 || t.saved > indexGCPercent {
			p = t.saved // off or already higher: keep it
		}
		debug.SetGCPercent(p)
		debug.SetMemoryLimit(t.savedLimit)
	}
}

// startGCTuning records the settings to restore when the first call
// starts. The caller holds gcTuning's lock.
func startGCTuning() {
	t := &gcTuning
	if t.active == 0 && t.holds == 0 {
		t.saved = debug.SetGCPercent(indexGCPercent)
		debug.SetGCPercent(t.saved)
		t.savedLimit = debug.SetMemoryLimit(-1) // a negative limit only reads it
		t.held = 0
	}
}

// raiseGCPercent sets the GC target to indexGCPercent for an Index call
// unless the environment sets GOGC or the target is already higher or off,
// and returns the function that ends the call's part (safe to call more
// than once). Concurrent Index calls share the setting (gcTuning).
func raiseGCPercent() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	t := &gcTuning
	t.Lock()
	defer t.Unlock()
	startGCTuning()
	t.active++
	applyGCTuning()
	return sync.OnceFunc(func() {
		t.Lock()
		defer t.Unlock()
		t.active--
		applyGCTuning()
	})
}

// holdCollector marks the calling Index as past its load: once every
// running call is (gcTuning), the collector's pacing is off
// (holdGCPercent). It returns collected, to call once the call's own
// collection has run (the runtime.GC after the graph is built), and
// release, which ends the hold; both are safe to call more than once. Once
// every holding call has collected, a memory limit of holdHeadroom times
// the memory the Go runtime held when its hold started applies
// (runtime.MemStats.Sys, bytes; the largest any current hold asked for),
// never above a limit already set (GOMEMLIMIT). A GOGC set in the
// environment is left alone, as raiseGCPercent leaves it.
//
// Why the pacing is off: after the load the heap is mostly the load's
// syntax trees and type information, live until the graph is built. A
// cycle the pacer starts while the graph is built marks all of it and
// frees little, and its assists slow the relation pass; on
// golang.org/x/tools that cost about 0.15 s of CPU time and 0.07 s of wall
// time in the median of ten runs (docs/performance.md). The collection
// Index runs once the graph is built frees the type information, and the
// limit bounds what is allocated after it.
//
// Why the hold waits for a running cycle: a cycle the load's pacing
// started shortly before the load ended (in about half of the runs on
// golang.org/x/tools) marks the load's whole heap; run alongside the
// graph build it took about 0.2 s more CPU time. Entering the hold lets it
// finish its marking first on both cores: the time after the load fell
// from a median of 0.62 to 0.595 s (14 alternated runs), gonum's did not
// move (0.945 and 0.935 s: its last cycle ends before its load does).
//
// Why the limit waits for that collection: under a memory limit the
// pacer starts a cycle at the limit's heap goal less a runway that grows
// with the heap it last had to scan, here the whole load's, and that
// trigger has no floor (runtime/mgcpacer.go). On golang.org/x/tools 14 of
// 20 runs had the CPU time of a cycle during the graph build (gctrace
// showed one in each traced run); with the limit set after the
// collection, when the heap to scan is the graph's, 2 of 20, and the
// median time after the load fell from 0.735 to 0.63 s
// (docs/performance.md, "Sixth session"). The graph build allocates about
// a third of what the load kept, so the peak stays the load's.
func holdCollector() (collected, release func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}, func() {}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	want := int64(math.Min(float64(ms.Sys)*holdHeadroom, math.MaxInt64))

	t := &gcTuning
	t.Lock()
	defer t.Unlock()
	startGCTuning()
	t.holds++
	applyGCTuning()
	limiting, ended := false, false
	collected = func() {
		t.Lock()
		defer t.Unlock()
		if limiting || ended {
			return
		}
		limiting = true
		t.limiting++
		t.held = max(t.held, want)
		applyGCTuning()
	}
	release = func() {
		t.Lock()
		defer t.Unlock()
		if ended {
			return
		}
		ended = true
		t.holds--
		if limiting {
			t.limiting--
		}
		if t.limiting == 0 {
			t.held = 0
		}
		applyGCTuning()
	}
	return collected, release
}
