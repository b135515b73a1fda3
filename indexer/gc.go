package indexer

import (
	"os"
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
