package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// BenchmarkMatrix runs the whole catalog matrix (Go, standard profile) on the embedded reference
// provider and reports where the wall time goes:
//
//	wall_s          the matrix's wall time
//	subprocess_s    the independent test runner and the oracle (go test, go build, the driver)
//	provider_s      the reference provider's handlers (the stand-in for the model)
//	assay_s         everything else: orchestration, gateway, evidence store, the other checks
//	assay_share     assay_s / wall_s
//
// The split is exact only with concurrency 1 (phases of different cases do not overlap); the c2
// run reports the wall time only.
//
//	go test ./harness -run '^$' -bench Matrix -benchtime 1x
func BenchmarkMatrix(b *testing.B) {
	for _, conc := range []int{1, 2} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				start := time.Now()
				sum, err := Run(context.Background(), Options{OutDir: b.TempDir(), Formations: []string{"all"}, Concurrency: conc})
				wall := time.Since(start).Seconds()
				if err != nil {
					b.Fatal(err)
				}
				if len(sum.Cases) != len(Catalog()) || !sum.Accepted() {
					b.Fatalf("%d cases, accepted %v", len(sum.Cases), sum.Accepted())
				}
				b.ReportMetric(wall, "wall_s")
				if conc != 1 {
					continue
				}
				var subprocess float64
				for _, c := range sum.Cases {
					subprocess += c.Timings["check:tests"] + c.Timings["check:oracle"]
				}
				assay := wall - subprocess - sum.ReferenceHandlerSeconds
				b.ReportMetric(subprocess, "subprocess_s")
				b.ReportMetric(sum.ReferenceHandlerSeconds, "provider_s")
				b.ReportMetric(assay, "assay_s")
				b.ReportMetric(assay/wall, "assay_share")
			}
		})
	}
}

// BenchmarkGatewayOverhead measures the observing gateway's added latency per chat request in one
// run: the same requests alternate between the reference provider directly and through the
// gateway (which records each one in its SQLite database), and the medians are compared.
//
//	go test ./harness -run '^$' -bench GatewayOverhead -benchtime 400x
func BenchmarkGatewayOverhead(b *testing.B) {
	ctx := context.Background()
	ref, err := reference.Start(ctx, reference.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer ref.Close()
	upstream := strings.TrimSuffix(ref.BaseURL(), "/v1")
	gw, err := gateway.Start(ctx, gateway.Config{Upstream: upstream, DBPath: filepath.Join(b.TempDir(), "gw.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	direct, err := provider.NewClient(provider.ClientConfig{BaseURL: ref.BaseURL(), MaxRetries: -1})
	if err != nil {
		b.Fatal(err)
	}
	viaGateway, err := provider.NewClient(provider.ClientConfig{BaseURL: gw.URL() + "/v1", MaxRetries: -1})
	if err != nil {
		b.Fatal(err)
	}
	a := reference.Assignment{Task: "double", Language: "go", Package: "double", Files: []string{"double.go", "double_test.go"}}
	req := func(session string) provider.Request {
		return provider.Request{SessionID: session, Model: reference.ModelID, Tools: []provider.ToolDef{{Name: "write_file"}},
			Messages: []provider.Message{{Role: "user", Content: reference.FormatAssignment(a)}}}
	}
	var d, g []float64
	measure := func(c *provider.Client, session string) float64 {
		start := time.Now()
		if _, err := c.Complete(ctx, req(session)); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(start).Microseconds()) / 1000
	}
	// Warm both paths (connections, the gateway's prepared statements).
	for i := 0; i < 20; i++ {
		measure(direct, "warm-direct")
		measure(viaGateway, "warm-gateway")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			d = append(d, measure(direct, "bench-direct"))
			g = append(g, measure(viaGateway, "bench-gateway"))
		} else {
			g = append(g, measure(viaGateway, "bench-gateway"))
			d = append(d, measure(direct, "bench-direct"))
		}
	}
	b.StopTimer()
	md, mg := median(d), median(g)
	b.ReportMetric(md, "direct_median_ms")
	b.ReportMetric(mg, "gateway_median_ms")
	b.ReportMetric(mg-md, "overhead_median_ms")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkCaseCPU runs three catalog cases (sequential, parallel, reflection: five implementing
// members) on the embedded reference provider, in Python (single-file profile) and in Go (standard
// profile), and reports the CPU time per case: this process's user+system time plus that of every
// descendant reaped during the run (getrusage(2) RUSAGE_SELF and RUSAGE_CHILDREN: go test, go
// build, compile, link, vet, pytest, the oracle's driver), in seconds. CPU, not wall time, because
// the machines that run the suite are shared; the suite's cost is roughly this figure times its
// cases.
//
//	go test ./harness -run '^$' -bench CaseCPU -benchtime 1x
func BenchmarkCaseCPU(b *testing.B) {
	formations := []string{"sequential", "parallel", "reflection"}
	for _, lp := range []struct{ language, profile string }{{"python", "single-file"}, {"go", "standard"}} {
		b.Run(lp.language+"/"+lp.profile, func(b *testing.B) {
			if lp.language == "python" {
				if _, err := oracle.FindPython(context.Background(), true); err != nil {
					b.Skipf("no python3 with pytest: %v", err)
				}
			}
			opts := Options{Formations: formations, Language: lp.language, Profile: lp.profile}
			// One run outside the measurement warms the go build cache and the Python probe.
			opts.OutDir = b.TempDir()
			if _, err := Run(context.Background(), opts); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var cpu float64
			for i := 0; i < b.N; i++ {
				opts.OutDir = b.TempDir()
				before := cpuSeconds(b)
				sum, err := Run(context.Background(), opts)
				cpu += cpuSeconds(b) - before
				if err != nil {
					b.Fatal(err)
				}
				if len(sum.Cases) != len(formations) || !sum.Accepted() {
					b.Fatalf("%d cases, accepted %v", len(sum.Cases), sum.Accepted())
				}
			}
			b.ReportMetric(cpu/float64(b.N*len(formations)), "cpu_s/case")
		})
	}
}

// cpuSeconds is the user+system CPU time of this process and of its reaped descendants, in seconds.
func cpuSeconds(b *testing.B) float64 {
	var total float64
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return total
}
