package indexer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestConcurrentIndexRestoresGCSettings: Index changes process-wide
// collector settings (GC percent while it runs, a memory limit from the
// end of the load to the written database). A process that runs many
// indexes at once — of different modules and of one database, some
// cancelled while loading, while building the graph or while writing —
// must get back exactly the settings it had once the last one returns,
// and every call must return (no deadlock between the shared raise, the
// shared hold and the database lock). Not parallel: it owns the process's
// GC settings.
func TestConcurrentIndexRestoresGCSettings(t *testing.T) {
	t.Setenv("GOGC", "") // empty: the settings are Index's to change
	const percent, limit = 137, int64(3) << 30
	origPercent := debug.SetGCPercent(percent)
	defer debug.SetGCPercent(origPercent)
	origLimit := debug.SetMemoryLimit(limit)
	defer debug.SetMemoryLimit(origLimit)

	tmp := t.TempDir()
	var dirs []string
	for _, src := range []string{"testdata/fixture", "testdata/relations", "testdata/broken"} {
		dst := filepath.Join(tmp, filepath.Base(src))
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dst)
	}
	// Progress stages at which a call cancels its own context; "" never.
	stages := []string{"", "loading", "building the graph", "writing the database"}
	shared := filepath.Join(tmp, "shared", "graph.db")

	const calls = 12
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			db := filepath.Join(tmp, fmt.Sprint("out", i), "graph.db")
			if i%3 == 0 {
				db = shared // these take turns on the database lock
			}
			stage := stages[i%len(stages)]
			_, errs[i] = indexer.Index(ctx, indexer.Options{
				Dir: dirs[i%len(dirs)], DBPath: db, Tests: true,
				Progress: func(s string) {
					if stage != "" && strings.HasPrefix(s, stage) {
						cancel()
					}
				},
			})
		}()
	}
	wg.Wait()

	for i, err := range errs {
		stage := stages[i%len(stages)]
		switch {
		case stage == "" && err != nil:
			t.Errorf("call %d (not cancelled): %v", i, err)
		case stage != "" && !errors.Is(err, context.Canceled):
			t.Errorf("call %d cancelled at %q: err = %v, want context.Canceled", i, stage, err)
		}
	}
	if p := debug.SetGCPercent(percent); p != percent {
		t.Errorf("after the concurrent indexes: GC percent %d, want %d restored", p, percent)
	}
	if l := debug.SetMemoryLimit(-1); l != limit {
		t.Errorf("after the concurrent indexes: memory limit %d, want %d restored", l, limit)
	}
}
