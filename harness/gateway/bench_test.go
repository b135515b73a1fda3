package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkOverheadStreaming measures the gateway's latency overhead per streaming request: 50
// concurrent clients (and, for the uncontended figure, 1) each alternate a request straight to the upstream and one through the
// gateway (so both see the same load), each timed from sending to the end of the response body.
// It reports the median and 99th percentile of each and their differences, in milliseconds
// (overhead_median_ms, overhead_p99_ms). b.N is the number of requests of each kind.
//
// The upstream answers its 9 SSE events either at once (pace=0: the clients, the upstream and the
// gateway then compete for the CPU, and the overhead includes waiting for it) or one event every
// pace, flushed (pace=2ms: a model streaming about 500 events a second, as a client of a real
// model sees it).
//
//	go test ./harness/gateway -run '^$' -bench OverheadStreaming -benchtime 4000x
func BenchmarkOverheadStreaming(b *testing.B) {
	for _, c := range []struct {
		clients int
		pace    time.Duration
	}{{50, 0}, {50, 2 * time.Millisecond}, {1, 0}} {
		b.Run(fmt.Sprintf("clients=%d/pace=%s", c.clients, c.pace), func(b *testing.B) { benchOverhead(b, c.clients, c.pace) })
	}
}

func benchOverhead(b *testing.B, benchClients int, pace time.Duration) {
	var body strings.Builder
	for i := range 8 {
		fmt.Fprintf(&body, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"tok%d "}}]}`+"\n\n", i)
	}
	body.WriteString(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}` + "\n\ndata: [DONE]\n\n")
	stream := body.String()
	events := strings.SplitAfter(stream, "\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if pace == 0 {
			_, _ = io.WriteString(w, stream)
			return
		}
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
			time.Sleep(pace)
		}
	}))
	defer up.Close()
	g, err := Start(b.Context(), Config{Upstream: up.URL, DBPath: filepath.Join(b.TempDir(), "gw.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * benchClients, MaxIdleConnsPerHost: 2 * benchClients, DisableCompression: true}}
	const reqBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`
	do := func(base, session string) (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(reqBody))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(DefaultSessionHeader, session)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(stream)) {
			return 0, fmt.Errorf("status %d, %d of %d bytes: %v", resp.StatusCode, n, len(stream), err)
		}
		return d, nil
	}
	// Warm both paths' connection pools.
	for range benchClients {
		if _, err := do(up.URL, "warm"); err != nil {
			b.Fatal(err)
		}
		if _, err := do(g.URL(), "warm"); err != nil {
			b.Fatal(err)
		}
	}
	direct := make([]time.Duration, b.N)
	via := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("bench-%d", c)
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				// Alternate which goes first, so neither path always follows the other.
				first, second := up.URL, g.URL()
				if i%2 == 1 {
					first, second = second, first
				}
				d1, err1 := do(first, session)
				d2, err2 := do(second, session)
				if err1 != nil || err2 != nil {
					failed.Store(fmt.Errorf("request %d: %v %v", i, err1, err2))
					return
				}
				if i%2 == 1 {
					d1, d2 = d2, d1
				}
				direct[i], via[i] = d1, d2
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	q := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[int(p*float64(len(s)-1))]
	}
	b.ReportMetric(ms(q(direct, 0.5)), "direct_median_ms")
	b.ReportMetric(ms(q(via, 0.5)), "gateway_median_ms")
	b.ReportMetric(ms(q(via, 0.5)-q(direct, 0.5)), "overhead_median_ms")
	b.ReportMetric(ms(q(direct, 0.99)), "direct_p99_ms")
	b.ReportMetric(ms(q(via, 0.99)), "gateway_p99_ms")
	b.ReportMetric(ms(q(via, 0.99)-q(direct, 0.99)), "overhead_p99_ms")
	// Every request through the gateway was recorded.
	recs, err := g.RecordsIn(b.Context(), 0, g.Mark())
	if err != nil || len(recs) != b.N+benchClients {
		b.Fatalf("%d records for %d requests (%v)", len(recs), b.N+benchClients, err)
	}
}

// BenchmarkStoreWriter measures the usage database writer's cost per row: each iteration hands
// one row to the writer and waits until it is written (as one request at a time does: every row
// its own transaction), or, with batch=50, hands 50 rows over before waiting (as 50 concurrent
// requests can: one transaction for many rows). ns/op is per row.
func BenchmarkStoreWriter(b *testing.B) {
	for _, batch := range []int{1, 50} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, err := openStore(b.Context(), filepath.Join(b.TempDir(), "gw.db"))
			if err != nil {
				b.Fatal(err)
			}
			s.startWriter()
			defer s.close()
			p := int64(9)
			rec := Record{SessionID: "bench-1", Method: "POST", Path: "/v1/chat/completions", Model: "m", Stream: true,
				Status: 200, LatencyMS: 1.5, RequestSHA256: strings.Repeat("a", 64), ResponseSHA256: strings.Repeat("b", 64),
				RequestBytes: 120, ResponseBytes: 1100, UsageState: UsageReported, PromptTokens: &p, CompletionTokens: &p,
				TotalTokens: &p, StartedAt: time.Now(), AnsweredModel: "m", ResponseDecodedSHA256: strings.Repeat("b", 64)}
			errs := make(chan error, batch)
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				n := min(batch, b.N-i)
				for range n {
					r := rec
					r.ID = s.reserveID()
					s.enqueue(&r, func(err error) { errs <- err })
				}
				for range n {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkGatewayCPU measures the CPU time (user + system, of the whole benchmark process:
// getrusage(2)) the gateway adds per streaming request, which wall-clock overhead cannot show on a
// machine shared with other work: 50 clients send b.N requests straight to the upstream, then b.N
// through the gateway (and wait until every row is written); the difference of the two phases'
// CPU time per request is gateway_cpu_us_per_request (its own request and response hops, the
// relay, the row's hashing and parsing, and its SQLite insert). For the floor of any proxy
// written this way, b.N more requests go through a bare httputil.ReverseProxy with the gateway's
// transport and flush settings that records nothing: bare_proxy_cpu_us_per_request is its
// difference from the direct phase. At 50 concurrent requests on C
// cores whose CPU is the bottleneck, each request waits for about 50 x that / C of other
// requests' gateway work. The upstream answers as in BenchmarkOverheadStreaming with pace=0.
//
//	go test ./harness/gateway -run '^$' -bench GatewayCPU -benchtime 3000x
func BenchmarkGatewayCPU(b *testing.B) {
	var body strings.Builder
	for i := range 8 {
		fmt.Fprintf(&body, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"tok%d "}}]}`+"\n\n", i)
	}
	body.WriteString(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":8,"total_tokens":17}}` + "\n\ndata: [DONE]\n\n")
	stream := body.String()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	defer up.Close()
	g, err := Start(b.Context(), Config{Upstream: up.URL, DBPath: filepath.Join(b.TempDir(), "gw.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	const clients = 50
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * clients, MaxIdleConnsPerHost: 2 * clients, DisableCompression: true}}
	const reqBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`
	do := func(base string) error {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(reqBody))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(DefaultSessionHeader, "bench-cpu")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || n != int64(len(stream)) {
			return fmt.Errorf("status %d, %d of %d bytes: %v", resp.StatusCode, n, len(stream), err)
		}
		return nil
	}
	phase := func(base string, n int) error {
		var next atomic.Int64
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					if err := do(base); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	// Warm both paths' connection pools.
	for _, base := range []string{up.URL, g.URL()} {
		if err := phase(base, 2*clients); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := g.RecordsIn(b.Context(), 0, g.Mark()); err != nil {
		b.Fatal(err)
	}
	upURL, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	bare := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(upURL) },
		Transport:     g.transport.Clone(),
		FlushInterval: -1,
		BufferPool:    &copyBuffers{},
	})
	defer bare.Close()
	if err := phase(bare.URL, 2*clients); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := cpu()
	if err := phase(up.URL, b.N); err != nil {
		b.Fatal(err)
	}
	c1 := cpu()
	mark := g.Mark()
	if err := phase(g.URL(), b.N); err != nil {
		b.Fatal(err)
	}
	// The rows are written on other goroutines after the responses end: their CPU counts too
	// (inflight.wait returns once every row is written, without reading them back).
	if err := g.inflight.wait(b.Context(), "", true); err != nil {
		b.Fatal(err)
	}
	c2 := cpu()
	if err := phase(bare.URL, b.N); err != nil {
		b.Fatal(err)
	}
	c3 := cpu()
	b.StopTimer()
	if recs, err := g.RecordsIn(b.Context(), mark, g.Mark()); err != nil || len(recs) != b.N {
		b.Fatalf("%d records for %d requests (%v)", len(recs), b.N, err)
	}
	direct, via := c1-c0, c2-c1
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	b.ReportMetric(us(direct), "direct_cpu_us_per_request")
	b.ReportMetric(us(via), "via_gateway_cpu_us_per_request")
	b.ReportMetric(us(via-direct), "gateway_cpu_us_per_request")
	b.ReportMetric(us(c3-c2-direct), "bare_proxy_cpu_us_per_request")
}
