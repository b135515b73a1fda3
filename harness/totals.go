package harness

import (
	"fmt"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// TokenUsage is provider token usage, in tokens. A nil count is unknown — some response's usage
// could not be read or was not reported — never 0 in its place.
type TokenUsage struct {
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	// Unknown says why the counts are nil ("" when they are known).
	Unknown string `json:"unknown,omitempty"`
}

// Known reports whether both counts are known.
func (u TokenUsage) Known() bool { return u.PromptTokens != nil && u.CompletionTokens != nil }

// runTokens sums the usage of run runID's own provider exchanges (a resumed run's earlier runs
// count in theirs) as the harness parsed it from the recorded response bytes (the wire reading
// of the usage check, not the runtime's accumulation). The counts are unknown when the trace could
// not be read or has anomalies, or when any exchange's response is not a complete reading or did
// not report prompt and completion tokens. A run whose readable trace holds no exchange made
// none: 0 and 0.
func runTokens(trace *caseTrace, traceErr error, runID string) TokenUsage {
	switch {
	case traceErr != nil:
		return TokenUsage{Unknown: "trace unavailable: " + traceErr.Error()}
	case trace == nil:
		return TokenUsage{Unknown: "trace unavailable"}
	case len(trace.problems) > 0:
		return TokenUsage{Unknown: "the trace has anomalies: " + trace.problems[0]}
	}
	var prompt, completion int64
	for _, turns := range trace.turns {
		for _, mt := range turns {
			for _, x := range mt.Exchanges {
				if x.Run != runID {
					continue
				}
				if x.ReplyErr != nil {
					return TokenUsage{Unknown: fmt.Sprintf("%s: %v", x.where(), x.ReplyErr)}
				}
				u := x.Reply.Usage
				if u == nil || u.Prompt == nil || u.Completion == nil {
					return TokenUsage{Unknown: x.where() + ": the response reported no prompt and completion tokens"}
				}
				prompt += *u.Prompt
				completion += *u.Completion
			}
		}
	}
	return TokenUsage{PromptTokens: &prompt, CompletionTokens: &completion}
}

// Outcomes a case is counted under in Totals.CasesByOutcome.
const (
	OutcomePaused      = "paused"       // rejected because the run paused; assay resume continues it
	OutcomeNotFinished = "not_finished" // planned, with no verdict: the run was cancelled or stopped
)

// OutcomeCount is how many cases ended in one outcome.
type OutcomeCount struct {
	// Outcome is a verdict (accepted, rejected, non_certifiable), OutcomePaused or
	// OutcomeNotFinished.
	Outcome string `json:"outcome"`
	Cases   int    `json:"cases"`
}

// Totals is a matrix run's (or resume's) account at its end.
type Totals struct {
	// Cases is how many cases were planned.
	Cases int `json:"cases"`
	// CasesByOutcome counts the cases by outcome, in the order accepted, rejected, paused,
	// non_certifiable, not_finished, then any other verdict; outcomes with no case are left out.
	CasesByOutcome []OutcomeCount `json:"cases_by_outcome"`
	// WallSeconds is the run's wall time, seconds: from the start of harness.Run (or ResumeRun)
	// to its return, reports not included.
	WallSeconds float64 `json:"wall_seconds"`
	// Tokens sums the finished cases' CaseResult.Tokens; a count is nil (unknown) when any case's
	// is, and Unknown names the first such run.
	Tokens TokenUsage `json:"tokens"`
	// TokensUnknownRuns are the runs whose token usage is unknown.
	TokensUnknownRuns []string `json:"tokens_unknown_runs,omitempty"`
}

// SummarizeRun is the Totals of a run that planned planned cases, finished cases (in order) and
// took wall.
func SummarizeRun(cases []CaseResult, planned int, wall time.Duration) Totals {
	t := Totals{Cases: planned, WallSeconds: max(wall.Seconds(), 0)}
	counts := map[string]int{}
	var order []string
	count := func(o string) {
		if counts[o] == 0 {
			order = append(order, o)
		}
		counts[o]++
	}
	var prompt, completion int64
	for _, c := range cases {
		switch {
		case c.Paused:
			count(OutcomePaused)
		default:
			count(c.Verdict.Verdict)
		}
		if !c.Tokens.Known() {
			t.TokensUnknownRuns = append(t.TokensUnknownRuns, c.RunID)
			continue
		}
		prompt += *c.Tokens.PromptTokens
		completion += *c.Tokens.CompletionTokens
	}
	if n := planned - len(cases); n > 0 {
		counts[OutcomeNotFinished] = n
		order = append(order, OutcomeNotFinished)
	}
	for _, o := range []string{evidence.VerdictAccepted, evidence.VerdictRejected, OutcomePaused, evidence.VerdictNonCertifiable, OutcomeNotFinished} {
		if counts[o] > 0 {
			t.CasesByOutcome = append(t.CasesByOutcome, OutcomeCount{Outcome: o, Cases: counts[o]})
			delete(counts, o)
		}
	}
	for _, o := range order {
		if counts[o] > 0 {
			t.CasesByOutcome = append(t.CasesByOutcome, OutcomeCount{Outcome: o, Cases: counts[o]})
		}
	}
	switch {
	case len(t.TokensUnknownRuns) > 0:
		t.Tokens = TokenUsage{Unknown: fmt.Sprintf("token usage unknown in %d of %d finished case(s), first run %s",
			len(t.TokensUnknownRuns), len(cases), t.TokensUnknownRuns[0])}
	case len(cases) == 0:
		t.Tokens = TokenUsage{Unknown: "no case finished"}
	default:
		t.Tokens = TokenUsage{PromptTokens: &prompt, CompletionTokens: &completion}
	}
	return t
}
