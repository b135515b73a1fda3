package evidence

import (
	"bytes"
	"context"
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// benchEvents is how many events BenchmarkEvidence appends and verifies:
// ASSAY_BENCH_EVENTS, default 1,000,000.
func benchEvents() int {
	if n, err := strconv.Atoi(os.Getenv("ASSAY_BENCH_EVENTS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes, and
// resetPeakRSS starts a new peak from the current RSS (Linux clear_refs 5).
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			var kb int64
			fmt.Sscan(string(rest), &kb)
			return kb << 10
		}
	}
	return -1
}

func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// benchEvent is the i-th small event (1-based) used by every phase.
func benchEvent(i int) Event {
	return Event{Type: "tool_call", MemberID: "exec-1", SessionID: "bench-exec-1", Parent: int64(i - 1),
		Time:    time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Microsecond),
		Payload: []byte(`{"call_id":"c` + strconv.Itoa(i) + `","idempotency_key":"bench:exec-1:c` + strconv.Itoa(i) + `","payload_sha256":"` + ZeroHash + `","tool":"write_file"}`)}
}

// BenchmarkEvidence measures, for benchEvents() small events: the floor (the
// same rows through DuckDB's Appender with no validation or hashing), the
// store's hash-chained AppendEvents (batches of 10,000), and Verify over the
// result, each with its peak RSS. Run it alone, once:
//
//	go test -run '^$' -bench BenchmarkEvidence -benchtime 1x ./evidence/
func BenchmarkEvidence(b *testing.B) {
	n := benchEvents()
	ctx := context.Background()
	for iter := 0; iter < b.N; iter++ {
		dir := b.TempDir()

		// Floor: identical rows, generated the same way, straight into the
		// Appender in one flush: no validation, canonicalization or hashing.
		floorPath := filepath.Join(dir, "floor", "evidence.duckdb")
		fs, err := Open(ctx, floorPath, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := fs.OpenRun(ctx, "bench", testEnvelope(ModeLive), ""); err != nil {
			b.Fatal(err)
		}
		resetPeakRSS()
		start := time.Now()
		err = fs.conn.Raw(func(dc any) error {
			a, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", "events")
			if err != nil {
				return err
			}
			for i := 1; i <= n; i++ {
				e := benchEvent(i)
				if err := a.AppendRow("bench", int64(i), e.Parent, e.Type, e.MemberID, e.SessionID, e.Time, e.Payload, ZeroHash, ZeroHash); err != nil {
					return err
				}
			}
			return a.Close()
		})
		floor := time.Since(start)
		floorRSS := peakRSS()
		if err != nil {
			b.Fatal(err)
		}
		fs.Close()

		// Chained: the store's API, validation and hashing included.
		path := filepath.Join(dir, "chain", "evidence.duckdb")
		s, err := Open(ctx, path, OpenOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.OpenRun(ctx, "bench", testEnvelope(ModeLive), ""); err != nil {
			b.Fatal(err)
		}
		resetPeakRSS()
		start = time.Now()
		batch := benchBatch()
		evs := make([]Event, 0, batch)
		for i := 1; i <= n; i++ {
			evs = append(evs, benchEvent(i))
			if len(evs) == batch || i == n {
				if _, err := s.AppendEvents(ctx, "bench", evs); err != nil {
					b.Fatal(err)
				}
				evs = evs[:0]
			}
		}
		chain := time.Since(start)
		chainRSS := peakRSS()
		if err := s.RecordCheck(ctx, "bench", Check{Name: "bench", Required: true, Status: CheckPassed}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finalize(ctx, "bench", Verdict{Verdict: VerdictAccepted}); err != nil {
			b.Fatal(err)
		}
		s.Close()

		// Verify, read-only, as `assay verify` does.
		resetPeakRSS()
		start = time.Now()
		ro, err := Open(ctx, path, OpenOptions{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		vs, err := ro.Verify(ctx)
		verify := time.Since(start)
		verifyRSS := peakRSS()
		ro.Close()
		if err != nil || len(vs) != 1 || vs[0].Status != VerifyOK || vs[0].Events != int64(n)+2 { // + check_recorded, run_finalized
			b.Fatalf("verify: %+v %v", vs, err)
		}
		perSec := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
		b.ReportMetric(perSec(floor), "floor_events/s")
		b.ReportMetric(perSec(chain), "chained_events/s")
		b.ReportMetric(chain.Seconds()/floor.Seconds(), "chained/floor")
		b.ReportMetric(perSec(verify), "verify_events/s")
		b.ReportMetric(float64(floorRSS)/(1<<20), "floor_peakRSS_MiB")
		b.ReportMetric(float64(chainRSS)/(1<<20), "chained_peakRSS_MiB")
		b.ReportMetric(float64(verifyRSS)/(1<<20), "verify_peakRSS_MiB")
		b.Logf("%d events: floor (Appender, no hashing) %v = %.0f ev/s; chained AppendEvents %v = %.0f ev/s; ratio %.2fx; verify %v = %.0f ev/s; peak RSS floor %d MiB, chained %d MiB, verify %d MiB",
			n, floor.Round(time.Millisecond), perSec(floor), chain.Round(time.Millisecond), perSec(chain), chain.Seconds()/floor.Seconds(),
			verify.Round(time.Millisecond), perSec(verify), floorRSS>>20, chainRSS>>20, verifyRSS>>20)
	}
}

// benchBatch is the AppendEvents batch size: ASSAY_BENCH_BATCH, default 10,000.
func benchBatch() int {
	if n, err := strconv.Atoi(os.Getenv("ASSAY_BENCH_BATCH")); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// BenchmarkVerifySmallStore measures one Verify of the coverage store (two runs, every column
// filled) on a store opened read-only, as `assay verify`, reports and replays do; the per-call
// cost every one of them pays, whatever the size of the store. cpu-ms/op is the process's CPU
// time (user + system, DuckDB's threads included) per Verify: on a shared machine it is the
// figure to compare, as ns/op grows with the load.
//
//	go test -run '^$' -bench BenchmarkVerifySmallStore ./evidence/
func BenchmarkVerifySmallStore(b *testing.B) {
	ctx := context.Background()
	ro := mustOpen(b, coverageStore(b), OpenOptions{ReadOnly: true})
	start := cpuTime()
	for b.Loop() {
		vs, err := ro.Verify(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(vs) != 2 || vs[0].Status != VerifyInterrupted || vs[1].Status != VerifyOK {
			b.Fatalf("the coverage store does not verify: %+v", vs)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// cpuTime is the CPU time (user + system) the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
