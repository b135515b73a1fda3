package runid_test

import (
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/runid"
)

func TestNewFormat(t *testing.T) {
	// 10:15:00 in UTC-5 is 15:15:00 UTC: the id carries UTC whatever the caller's zone.
	at := time.Date(2026, 11, 30, 10, 15, 0, 999_000_000, time.FixedZone("UTC-5", -5*3600))
	id := runid.New("run-", at)
	if !regexp.MustCompile(`^run-20261130t151500-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("New = %q, want run-20261130t151500- and 12 lowercase hex digits", id)
	}
	if len(id) != len("run-")+runid.SuffixLen {
		t.Fatalf("len(%q) = %d, want len(prefix)+SuffixLen = %d", id, len(id), len("run-")+runid.SuffixLen)
	}
	corr := runid.New("run-a-reconcile-", at)
	if !regexp.MustCompile(`^run-a-reconcile-20261130t151500-[0-9a-f]{12}$`).MatchString(corr) {
		t.Fatalf("New with another prefix = %q", corr)
	}
}

// Ids made in one second, from many goroutines at once, never repeat: uniqueness rests on the
// random part alone there.
func TestNewUniqueWithinOneSecondAcrossGoroutines(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const goroutines, each = 8, 2000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], runid.New("run-", at))
			}
		})
	}
	wg.Wait()
	all := slices.Concat(ids...)
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != goroutines*each {
		t.Fatalf("%d distinct ids of %d", n, goroutines*each)
	}
	// 48 bits: every random digit position varies (a fixed or zeroed part would not).
	for pos := len(all[0]) - 12; pos < len(all[0]); pos++ {
		seen := map[byte]bool{}
		for _, id := range all {
			seen[id[pos]] = true
		}
		if len(seen) < 16 {
			t.Fatalf("hex digit %d of the random part takes %d values over %d ids", pos, len(seen), len(all))
		}
	}
}

func TestNewSortsByCreationSecond(t *testing.T) {
	t0 := time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)
	var ids []string
	for i := range 5 {
		ids = append(ids, runid.New("run-", t0.Add(time.Duration(i)*time.Second)))
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("ids made one second apart do not sort by creation: %v", ids)
	}
}
