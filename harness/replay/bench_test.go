package replay

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/testroot"
)

// BenchmarkReplayAll measures replaying every run of a --formations all store without --checks
// against the wall time of the matrix run that recorded it, and reports the ratio
// (replay/matrix; the target is under 0.10 on 2 cores). The matrix runs once, outside the
// timed loop (minutes); each iteration replays a fresh copy of its store. ASSAY_BENCH_LANGUAGE and
// ASSAY_BENCH_PROFILE choose the case grid (default go/standard). Run it alone:
//
//	go test -run '^$' -bench BenchmarkReplayAll -benchtime 3x ./harness/replay/
func BenchmarkReplayAll(b *testing.B) {
	lang, profile := os.Getenv("ASSAY_BENCH_LANGUAGE"), os.Getenv("ASSAY_BENCH_PROFILE")
	f := &fixture{out: filepath.Join(b.TempDir(), "matrix")}
	start := time.Now()
	sum, err := harness.Run(context.Background(), harness.Options{OutDir: f.out, Formations: []string{"all"}, Language: lang, Profile: profile})
	if err != nil {
		b.Fatal(err)
	}
	matrix := time.Since(start)
	if !sum.Accepted() {
		b.Fatalf("the matrix run was not accepted: %+v", sum.Cases)
	}
	var replay time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		out := copyOutB(b, f)
		b.StartTimer()
		t0 := time.Now()
		res, err := Verify(context.Background(), Options{Store: storeOf(out), All: true})
		replay += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Verdict != Exact {
				b.Fatalf("%s: %s %s", r.RunID, r.Verdict, r.Describe())
			}
		}
		if len(res) != len(sum.Cases) {
			b.Fatalf("%d replays of %d runs", len(res), len(sum.Cases))
		}
	}
	per := replay / time.Duration(b.N)
	b.ReportMetric(matrix.Seconds(), "matrix-s")
	b.ReportMetric(per.Seconds(), "replay-s")
	b.ReportMetric(per.Seconds()/matrix.Seconds(), "replay/matrix")
}

// copyOutB is copyOut for a benchmark.
func copyOutB(b *testing.B, f *fixture) string {
	dst := filepath.Join(b.TempDir(), "out")
	if err := testroot.CopyTree(f.out, dst); err != nil {
		b.Fatal(err)
	}
	return dst
}
