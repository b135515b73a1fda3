package harness

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/assay-audit/assay/runtime/policy"
)

// ProgressStyle says how a matrix run or resume shows its progress on Options.Progress.
type ProgressStyle string

const (
	// ProgressPlain writes whole lines, one per case step ("case 1/2 sequential/standard/go:
	// running", "...: accepted in 3.3s (run R), eta 4s"): for logs, pipes and CI. The default.
	ProgressPlain ProgressStyle = "plain"
	// ProgressTerminal redraws one progress bar (github.com/schollz/progressbar/v3) naming the
	// phase each running case is in and the ETA, with the plain style's finished-case lines
	// printed above it: for a terminal (Options.Progress is one).
	ProgressTerminal ProgressStyle = "tty"
)

// Case phases, in the order a case goes through them (CaseResult.Timings splits the same time).
const (
	PhaseTeam     = "team"     // the formation run
	PhaseEvidence = "evidence" // reading the recorded trace, journal and gateway window
	PhaseTests    = "tests"    // the independent test runner (the "tests" check)
	PhaseOracle   = "oracle"   // the finite-domain oracle (the "oracle" check)
	PhaseChecks   = "checks"   // the other checks
	PhaseFinalize = "finalize" // binding external evidence, finalizing, signing
)

// checkPhase is the phase a check runs in.
func checkPhase(check string) string {
	switch check {
	case PhaseTests, PhaseOracle:
		return check
	}
	return PhaseChecks
}

// EstimateRemaining is the time until every case of a matrix has finished, estimated from the
// wall times of the cases finished so far (finishedSeconds): with their mean m, each running case
// (runningSeconds: how long each has run) has max(m − its time, 0) left, and the queued cases,
// m each, go one by one to the lane that frees first, concurrency lanes (below 1 counts as 1);
// the estimate is when the last lane frees. ok is false when no case has finished and some remain:
// the remaining time is then unknown, never 0. It is never negative (negative or infinite
// durations and negative counts count as 0), 0 when nothing remains, rounded to the second.
func EstimateRemaining(finishedSeconds, runningSeconds []float64, queued, concurrency int) (eta time.Duration, ok bool) {
	queued = max(queued, 0)
	if len(runningSeconds) == 0 && queued == 0 {
		return 0, true
	}
	if len(finishedSeconds) == 0 {
		return 0, false
	}
	clean := func(s float64) float64 {
		if s > 0 && !math.IsInf(s, 0) && !math.IsNaN(s) {
			return s
		}
		return 0
	}
	var sum float64
	for _, s := range finishedSeconds {
		sum += clean(s)
	}
	mean := sum / float64(len(finishedSeconds))
	lanes := make([]float64, max(concurrency, 1, len(runningSeconds)))
	for i, s := range runningSeconds {
		lanes[i] = max(mean-clean(s), 0)
	}
	for range queued {
		i := 0
		for j := range lanes {
			if lanes[j] < lanes[i] {
				i = j
			}
		}
		lanes[i] += mean
	}
	return time.Duration(slices.Max(lanes) * float64(time.Second)).Round(time.Second), true
}

// etaText is the ETA of p's cases as progress shows it: "eta 1m20s", or "eta unknown (no case
// finished yet)". The caller holds p.mu.
func (p *progress) etaText() string {
	eta, ok := p.estimate()
	if !ok {
		return "eta unknown (no case finished yet)"
	}
	return "eta " + eta.String()
}

// estimate is EstimateRemaining over p's cases now. The caller holds p.mu.
func (p *progress) estimate() (time.Duration, bool) {
	var running []float64
	for _, rc := range p.running {
		running = append(running, time.Since(rc.start).Seconds())
	}
	return EstimateRemaining(p.finished, running, p.total-p.stopped-len(p.finished)-len(p.running), p.concurrency)
}

// progress reports a matrix run's progress: plain lines, or a terminal display. Every text passes
// the run's redactor. Safe for concurrent use; the zero value's methods (and a nil *progress's) do
// nothing.
type progress struct {
	mu          sync.Mutex
	w           io.Writer
	redactor    *policy.Redactor
	total       int
	concurrency int
	finished    []float64 // wall seconds of the finished cases
	stopped     int       // cases that stopped without a verdict
	running     map[int]*runningCase
	tty         *terminalDisplay // nil in the plain style
}

// runningCase is a case that started and has not finished: where progress shows it.
type runningCase struct {
	name       string
	start      time.Time
	phase      string
	phaseStart time.Time
}

// newProgress returns the progress of a run of total cases, concurrency at a time, written to w
// (nil for none) in style.
func newProgress(w io.Writer, style ProgressStyle, r *policy.Redactor, total, concurrency int) *progress {
	p := &progress{w: w, redactor: r, total: total, concurrency: max(concurrency, 1), running: map[int]*runningCase{}}
	if w != nil && style == ProgressTerminal {
		p.tty = newTerminalDisplay(w, total, p.describe)
		p.tty.startTicker(time.Second, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.tty.refresh(len(p.finished))
		})
	}
	return p
}

// setRedactor makes r the redactor of what p writes from now on (a matrix file's next cell).
func (p *progress) setRedactor(r *policy.Redactor) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.redactor = r
}

// line writes one whole line (above the bar in the terminal style).
func (p *progress) line(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeLine(p.redactor.String(fmt.Sprintf(format, args...)))
}

// writeLine writes s, and redraws the terminal display below it. The caller holds p.mu.
func (p *progress) writeLine(s string) {
	if p.tty != nil {
		p.tty.printAbove(s)
		p.tty.refresh(len(p.finished))
		return
	}
	fmt.Fprintln(p.w, s)
}

// start says case i (0-based) of the run started; the returned function reports its phases.
func (p *progress) start(i int, name string) func(phase string) {
	if p == nil || p.w == nil {
		return func(string) {}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.running[i] = &runningCase{name: name, start: now, phase: "starting", phaseStart: now}
	if p.tty != nil {
		p.tty.refresh(len(p.finished))
	} else {
		fmt.Fprintln(p.w, p.redactor.String(fmt.Sprintf("case %d/%d %s: running", i+1, p.total, name)))
	}
	return func(phase string) { p.phase(i, phase) }
}

// phase says case i entered phase. Only the terminal style shows it: plain lines stay one per
// case step.
func (p *progress) phase(i int, phase string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rc, ok := p.running[i]
	if !ok {
		return
	}
	rc.phase, rc.phaseStart = phase, time.Now()
	if p.tty != nil {
		p.tty.refresh(len(p.finished))
	}
}

// finish says case i, shown as name, finished with cr, and prints its line with the ETA of the
// cases left.
func (p *progress) finish(i int, name string, cr CaseResult) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, i)
	p.finished = append(p.finished, cr.ElapsedSeconds)
	verdict := cr.Verdict.Verdict
	if cr.Paused {
		verdict += " (paused)"
	}
	p.writeLine(p.redactor.String(fmt.Sprintf("case %d/%d %s: %s in %.1fs (run %s), %s", i+1, p.total, name, verdict,
		cr.ElapsedSeconds, cr.RunID, p.etaText())))
}

// stop says case i stopped with err (it has no verdict); it no longer counts for the ETA.
func (p *progress) stop(i int, name string, err error) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, i)
	p.stopped++
	p.writeLine(p.redactor.String(fmt.Sprintf("case %d/%d %s: stopped: %v", i+1, p.total, name, err)))
}

// close takes the terminal display down (the bar is erased); lines written stay.
func (p *progress) close() {
	if p == nil || p.tty == nil {
		return
	}
	p.tty.stopTicker()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tty.close()
}

// describe is the terminal display's text, short enough for one line: the ETA ("eta unknown"
// before a case finished), then each running case in case order — its catalog name (profile and
// language are the run's) — with its phase and how long it has been in it. The caller holds p.mu.
func (p *progress) describe() string {
	eta := "eta unknown"
	if d, ok := p.estimate(); ok {
		eta = "eta " + d.String()
	}
	parts := []string{eta}
	for _, i := range slices.Sorted(maps.Keys(p.running)) {
		rc := p.running[i]
		name, _, _ := strings.Cut(rc.name, "/")
		parts = append(parts, fmt.Sprintf("%s: %s %s", name, rc.phase, time.Since(rc.phaseStart).Round(time.Second)))
	}
	return p.redactor.String(strings.Join(parts, " | "))
}
