package reports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// benchStore writes a store of n finalized runs shaped like matrix cases (events, checks with
// evidence, usage from every source, a usage verdict), one invocation per 16 runs, every tenth
// rejected. It is built once per benchmark, outside the timer.
func benchStore(b *testing.B, n int) string {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "bench"})
	must(b, err)
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []string{"sequential", "parallel+vote", "parallel+judge", "reflection", "consensus", "sequential+remote"}
	tok := func(v int64) *int64 { return &v }
	start := time.Now()
	for i := 0; i < n; i++ {
		run := fmt.Sprintf("run-%05d", i)
		env := fixtureEnvelope(cases[i%len(cases)], "parallel", fmt.Sprintf("inv-%03d", i/16))
		must(b, s.OpenRun(ctx, run, env, ""))
		at := t0.Add(time.Duration(i) * time.Minute)
		_, err := s.AppendEvents(ctx, run, []evidence.Event{
			ev("team_started", "", at, `{"formation":"parallel"}`),
			ev("member_started", "exec-1", at.Add(time.Second), `{"formation":"parallel"}`),
			ev("member_completed", "exec-1", at.Add(3*time.Second), `{"formation":"parallel"}`),
			ev("team_completed", "", at.Add(4*time.Second), `{"formation":"parallel","success":true}`),
		})
		must(b, err)
		status := evidence.CheckPassed
		if i%10 == 0 {
			status = evidence.CheckFailed
		}
		for _, c := range []string{"files", "tests", "oracle", "members", "sessions", "usage"} {
			evj, _ := json.Marshal(map[string]any{"exec-1": map[string]any{"Duration": 1e9, "Verdict": status}})
			must(b, s.RecordCheck(ctx, run, evidence.Check{Name: c, Required: true, Status: status, Detail: c + " detail", Evidence: evj}))
		}
		for _, src := range []string{"store", "wire", "gateway"} {
			must(b, s.RecordUsage(ctx, run, evidence.UsageRow{MemberID: "exec-1", SessionID: "s-exec-1", Source: src, State: "reported",
				Requests: 2, PromptTokens: tok(700), CompletionTokens: tok(300), TotalTokens: tok(1000)}))
		}
		must(b, s.RecordUsageVerdicts(ctx, run, []evidence.UsageVerdict{{MemberID: "exec-1", SessionID: "s-exec-1", Verdict: "conserved", Detail: "equal"}}))
		_, err = s.Finalize(ctx, run, evidence.Verdict{Verdict: evidence.VerdictAccepted})
		must(b, err)
	}
	b.Logf("built a store of %d runs in %s", n, time.Since(start).Round(time.Millisecond))
	return path
}

// BenchmarkReport1000Runs loads `--all --no-verify` from a store of 1,000 runs and renders it as
// Markdown and JSON (the HTML renderer has its own benchmark), reporting the size of each output.
func BenchmarkReport1000Runs(b *testing.B) {
	path := benchStore(b, 1000)
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	must(b, err)
	defer s.Close()
	for _, f := range []Format{{Name: "md", Render: Markdown}, {Name: "json", Render: JSON}} {
		b.Run(f.Name, func(b *testing.B) {
			var size int
			for b.Loop() {
				r, err := Load(ctx, s, Selection{All: true, NoVerify: true})
				must(b, err)
				if r.Totals.Cases != 1000 {
					b.Fatalf("%d cases, want 1000", r.Totals.Cases)
				}
				var buf bytes.Buffer
				must(b, f.Render(&buf, r))
				size = buf.Len()
			}
			b.ReportMetric(float64(size)/1e6, "MB/report")
		})
	}
}

// BenchmarkReportVerified100Runs is a default `assay report --all --format md` of 100 runs: Load
// recomputes every run's evidence (evidence.Store.VerifyWith, as `assay verify` does), then
// renders. Compare with BenchmarkReport1000Runs (--no-verify) for the verification's share.
func BenchmarkReportVerified100Runs(b *testing.B) {
	path := benchStore(b, 100)
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	must(b, err)
	defer s.Close()
	for b.Loop() {
		r, err := Load(ctx, s, Selection{All: true})
		must(b, err)
		if !r.Verified || r.Totals.Cases != 100 {
			b.Fatalf("verified %v, %d cases", r.Verified, r.Totals.Cases)
		}
		var buf bytes.Buffer
		must(b, Markdown(&buf, r))
	}
}
