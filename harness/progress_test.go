package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestEstimateRemaining(t *testing.T) {
	for _, c := range []struct {
		name              string
		finished, running []float64
		queued            int
		concurrency       int
		want              time.Duration
		ok                bool
	}{
		{"unknown before the first case finished, not 0", nil, []float64{5}, 3, 1, 0, false},
		{"unknown with only queued cases", nil, nil, 2, 2, 0, false},
		{"nothing remains: 0, known", []float64{4}, nil, 0, 1, 0, true},
		{"nothing remains even before a finish", nil, nil, 0, 2, 0, true},
		{"queued cases one at a time: mean each", []float64{10, 20}, nil, 3, 1, 45 * time.Second, true},
		{"a running case has the mean less its time left", []float64{10}, []float64{4}, 0, 1, 6 * time.Second, true},
		{"queued cases wait for the lane that frees first", []float64{10}, []float64{4, 8}, 1, 2, 12 * time.Second, true},
		{"waves of concurrency", []float64{10}, nil, 3, 2, 20 * time.Second, true},
		{"one case left with spare concurrency still takes a mean", []float64{10}, nil, 1, 4, 10 * time.Second, true},
		{"a running case past the mean has 0 left, not less", []float64{10}, []float64{30}, 0, 1, 0, true},
		{"concurrency 0 counts as 1", []float64{10}, nil, 2, 0, 20 * time.Second, true},
		{"negative queued is nothing queued", []float64{10}, nil, -5, 1, 0, true},
		{"negative, NaN and infinite durations never make it negative", []float64{-100, math.Inf(-1), math.NaN(), 3}, []float64{-7}, 2, 1, 2 * time.Second, true},
		{"rounded to seconds", []float64{1.4}, nil, 1, 1, 1 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := EstimateRemaining(c.finished, c.running, c.queued, c.concurrency)
			if got != c.want || ok != c.ok {
				t.Fatalf("EstimateRemaining(%v, %v, %d, %d) = %v, %v; want %v, %v", c.finished, c.running, c.queued, c.concurrency, got, ok, c.want, c.ok)
			}
			if got < 0 {
				t.Fatalf("negative estimate %v", got)
			}
		})
	}
	p := newProgress(nil, ProgressPlain, nil, 2, 1)
	if s := p.etaText(); !strings.Contains(s, "unknown") {
		t.Fatalf("etaText before a finish = %q, want it to say unknown", s)
	}
}

func ptr64(v int64) *int64 { return &v }

func TestSummarizeRunNeverCountsUnknownTokensAsZero(t *testing.T) {
	known := func(run string, p, c int64, verdict string) CaseResult {
		return CaseResult{RunID: run, Verdict: evidence.Verdict{Verdict: verdict}, Tokens: TokenUsage{PromptTokens: ptr64(p), CompletionTokens: ptr64(c)}}
	}
	all := SummarizeRun([]CaseResult{known("r1", 10, 2, "accepted"), known("r2", 5, 1, "rejected")}, 2, 3*time.Second)
	if !all.Tokens.Known() || *all.Tokens.PromptTokens != 15 || *all.Tokens.CompletionTokens != 3 || all.WallSeconds != 3 {
		t.Fatalf("totals %+v", all)
	}
	unknown := CaseResult{RunID: "r3", Verdict: evidence.Verdict{Verdict: "rejected"}, Paused: true, Tokens: TokenUsage{Unknown: "no usage"}}
	mixed := SummarizeRun([]CaseResult{known("r1", 10, 2, "accepted"), unknown}, 4, time.Second)
	if mixed.Tokens.PromptTokens != nil || mixed.Tokens.CompletionTokens != nil || !strings.Contains(mixed.Tokens.Unknown, "r3") {
		t.Fatalf("one unknown case must make the total unknown, naming it: %+v", mixed.Tokens)
	}
	if len(mixed.TokensUnknownRuns) != 1 || mixed.TokensUnknownRuns[0] != "r3" {
		t.Fatalf("unknown runs %v", mixed.TokensUnknownRuns)
	}
	want := []OutcomeCount{{"accepted", 1}, {OutcomePaused, 1}, {OutcomeNotFinished, 2}}
	if len(mixed.CasesByOutcome) != len(want) {
		t.Fatalf("outcomes %+v, want %+v", mixed.CasesByOutcome, want)
	}
	for i := range want {
		if mixed.CasesByOutcome[i] != want[i] {
			t.Fatalf("outcomes %+v, want %+v", mixed.CasesByOutcome, want)
		}
	}
	if none := SummarizeRun(nil, 2, 0); none.Tokens.Known() || none.Tokens.Unknown == "" {
		t.Fatalf("no finished case: tokens %+v, want unknown", none.Tokens)
	}
}

func TestRunTokensAreThisRunsRecordedResponses(t *testing.T) {
	x := func(run string, p, c *int64, err error) *exchangeRec {
		r := &exchangeRec{Run: run, ReplyErr: err}
		if p != nil || c != nil {
			r.Reply.Usage = &wireUsage{Prompt: p, Completion: c}
		}
		return r
	}
	trace := func(xs ...*exchangeRec) *caseTrace {
		return &caseTrace{turns: map[string][]*memberTurn{"exec-1": {{Member: "exec-1", Exchanges: xs}}}}
	}
	for _, c := range []struct {
		name    string
		trace   *caseTrace
		err     error
		p, comp int64
		known   bool
	}{
		{"sums this run's exchanges, not the earlier run's", trace(x("r", ptr64(3), ptr64(1), nil), x("old", ptr64(100), ptr64(100), nil), x("r", ptr64(4), ptr64(2), nil)), nil, 7, 3, true},
		{"no exchange in a readable trace is none made", trace(), nil, 0, 0, true},
		{"a response without usage is unknown", trace(x("r", ptr64(3), ptr64(1), nil), x("r", nil, nil, nil)), nil, 0, 0, false},
		{"a response without completion tokens is unknown", trace(x("r", ptr64(3), nil, nil)), nil, 0, 0, false},
		{"a response that is not a complete reading is unknown", trace(x("r", ptr64(3), ptr64(1), errWireBroken)), nil, 0, 0, false},
		{"an unreadable trace is unknown", nil, errors.New("boom"), 0, 0, false},
		{"a trace with anomalies is unknown", &caseTrace{problems: []string{"exchange outside any turn"}}, nil, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := runTokens(c.trace, c.err, "r")
			if u.Known() != c.known {
				t.Fatalf("known %v, want %v (%+v)", u.Known(), c.known, u)
			}
			if c.known && (*u.PromptTokens != c.p || *u.CompletionTokens != c.comp) {
				t.Fatalf("tokens %d/%d, want %d/%d", *u.PromptTokens, *u.CompletionTokens, c.p, c.comp)
			}
			if !c.known && (u.PromptTokens != nil || u.CompletionTokens != nil || u.Unknown == "") {
				t.Fatalf("unknown usage must be nil counts with a reason, got %+v", u)
			}
		})
	}
}

// Every text progress writes, in either style, passes the run's redactor.
func TestProgressRedactsEveryText(t *testing.T) {
	const secret = "sk-progress-secret-7f3a9c"
	for _, style := range []ProgressStyle{ProgressPlain, ProgressTerminal} {
		t.Run(string(style), func(t *testing.T) {
			var buf bytes.Buffer
			p := newProgress(&buf, style, policy.NewRedactor(secret), 2, 1)
			phase := p.start(0, "case-"+secret)
			phase(PhaseTeam)
			p.line("note %s", secret)
			p.finish(0, "case-"+secret, CaseResult{Case: "case-" + secret, RunID: "run-" + secret, Verdict: evidence.Verdict{Verdict: "accepted"}, ElapsedSeconds: 1})
			p.start(1, "other")
			p.stop(1, "other", errors.New("provider said "+secret))
			p.close()
			if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "provider said") {
				t.Fatalf("the secret reached progress, or nothing was written:\n%q", buf.String())
			}
		})
	}
}

var phaseShown = regexp.MustCompile(`\| sequential: (\w+) \d+s`)

// planRunning and planEnded match the plain lines of the one sequential/standard case in language.
func planRunning(language string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^case 1/1 sequential/standard/` + language + `: running$`)
}

func planEnded(language string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^case 1/1 sequential/standard/` + language + `: rejected in \d+\.\ds \(run run-[^)]+\), eta 0s$`)
}

// Plain progress keeps its lines — one when the case starts, one when it ends, now with the ETA —
// and nothing per phase; a case whose usage a response did not report has unknown tokens, and so
// has the run.
func TestPlainProgressLinesAndUnknownTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a case; skipped with -short")
	}
	var buf bytes.Buffer
	lang := caseLanguage(t)
	sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: lang, Progress: &buf,
		ReferenceFaults: []reference.Fault{{Member: "exec-2", Turn: 1, Kind: reference.FaultDropUsage}}})
	out := buf.String()
	if !planRunning(lang).MatchString(out) || !planEnded(lang).MatchString(out) || strings.Count(out, "\n") != 2 {
		t.Fatalf("plain progress, want exactly the running and the rejected line:\n%s", out)
	}
	for _, ph := range []string{PhaseEvidence, PhaseOracle, PhaseFinalize, "eta unknown"} {
		if strings.Contains(out, ph) {
			t.Fatalf("plain progress names %q (phases are the terminal's):\n%s", ph, out)
		}
	}
	c := sum.Cases[0]
	if c.Tokens.Known() || !strings.Contains(c.Tokens.Unknown, "no prompt and completion tokens") {
		t.Fatalf("case tokens %+v, want unknown naming the response", c.Tokens)
	}
	tt := sum.Totals
	if tt.Tokens.PromptTokens != nil || tt.Tokens.CompletionTokens != nil || len(tt.TokensUnknownRuns) != 1 || tt.TokensUnknownRuns[0] != c.RunID {
		t.Fatalf("totals tokens %+v (unknown runs %v), want unknown naming %s", tt.Tokens, tt.TokensUnknownRuns, c.RunID)
	}
	if tt.Cases != 1 || len(tt.CasesByOutcome) != 1 || tt.CasesByOutcome[0] != (OutcomeCount{"rejected", 1}) || tt.WallSeconds < c.ElapsedSeconds {
		t.Fatalf("totals %+v", tt)
	}
}

// The terminal display names each phase as the case enters it and says the ETA is unknown until
// the case finished; the case's tokens are the wire usage the store recorded for this run.
func TestTerminalProgressShowsPhasesAndETA(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a case; skipped with -short")
	}
	var buf bytes.Buffer
	sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: caseLanguage(t), Progress: &buf, ProgressStyle: ProgressTerminal})
	out := buf.String()
	// The phases as the display showed them, each change once: the files check runs before the
	// tests, the other checks after the oracle.
	var shown []string
	for _, m := range phaseShown.FindAllStringSubmatch(out, -1) {
		if len(shown) == 0 || shown[len(shown)-1] != m[1] {
			shown = append(shown, m[1])
		}
	}
	want := []string{"starting", PhaseTeam, PhaseEvidence, PhaseChecks, PhaseTests, PhaseOracle, PhaseChecks, PhaseFinalize}
	if strings.Join(shown, " ") != strings.Join(want, " ") {
		t.Fatalf("phases shown %v, want %v:\n%q", shown, want, out)
	}
	if !strings.Contains(out, "eta unknown | sequential: team") || !strings.Contains(out, "accepted in") || !strings.Contains(out, ", eta 0s") {
		t.Fatalf("terminal progress lacks the ETA or the finished line:\n%q", out)
	}
	c := sum.Cases[0]
	if c.Verdict.Verdict != "accepted" || !c.Tokens.Known() || *c.Tokens.PromptTokens <= 0 || *c.Tokens.CompletionTokens <= 0 {
		t.Fatalf("case %s tokens %+v", c.Verdict.Verdict, c.Tokens)
	}
	// The same figures, summed by the store over the wire reading the usage check recorded.
	store, err := evidence.Open(context.Background(), sum.StorePath, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	res, err := store.Query(context.Background(), `SELECT sum(prompt_tokens)::BIGINT, sum(completion_tokens)::BIGINT FROM usage_calls
		WHERE run_id = '`+c.RunID+`' AND source = 'wire'`)
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("query: %v %+v", err, res)
	}
	p, _ := res.Rows[0][0].(int64)
	comp, _ := res.Rows[0][1].(int64)
	if p != *c.Tokens.PromptTokens || comp != *c.Tokens.CompletionTokens {
		t.Fatalf("case tokens %d/%d, the store's wire usage %d/%d", *c.Tokens.PromptTokens, *c.Tokens.CompletionTokens, p, comp)
	}
	if !sum.Totals.Tokens.Known() || *sum.Totals.Tokens.PromptTokens != p {
		t.Fatalf("totals tokens %+v", sum.Totals.Tokens)
	}
}

// BenchmarkProgressPhaseChange is the cost of one phase change as each style reports it (the
// terminal style redraws the bar), with 4 cases running.
func BenchmarkProgressPhaseChange(b *testing.B) {
	for _, style := range []ProgressStyle{ProgressPlain, ProgressTerminal} {
		b.Run(string(style), func(b *testing.B) {
			p := newProgress(io.Discard, style, policy.NewRedactor("sk-bench-secret-123456"), 16, 4)
			defer p.close()
			phases := make([]func(string), 4)
			for i := range phases {
				phases[i] = p.start(i, "parallel+vote/standard/go")
			}
			all := []string{PhaseTeam, PhaseEvidence, PhaseTests, PhaseOracle, PhaseChecks, PhaseFinalize}
			b.ResetTimer()
			for i := range b.N {
				phases[i%4](all[i%len(all)])
			}
		})
	}
}

// Cases report concurrently while the terminal display redraws on its own ticker: every finished
// case's line is written whole, once.
func TestProgressIsSafeForConcurrentCases(t *testing.T) {
	for _, style := range []ProgressStyle{ProgressPlain, ProgressTerminal} {
		t.Run(string(style), func(t *testing.T) {
			var buf syncBuffer
			const n = 8
			p := newProgress(&buf, style, nil, n, 4)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					phase := p.start(i, "case")
					for _, ph := range []string{PhaseTeam, PhaseEvidence, PhaseTests, PhaseOracle, PhaseChecks, PhaseFinalize} {
						phase(ph)
					}
					p.finish(i, "case", CaseResult{Case: "case", RunID: "r", Verdict: evidence.Verdict{Verdict: "accepted"}, ElapsedSeconds: float64(i)})
				})
			}
			wg.Wait()
			p.close()
			if got := regexp.MustCompile(`(?m)(^|\r)case \d/8 case: accepted in \d\.\ds \(run r\), eta \S+$`).FindAllString(buf.String(), -1); len(got) != n {
				t.Fatalf("%d whole finished lines, want %d:\n%q", len(got), n, buf.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
