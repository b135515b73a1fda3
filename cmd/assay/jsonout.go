package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/internal/jsonconv"
)

// The JSON output of matrix run and resume re-presents what the harness recorded in the output
// convention of docs/json.md. The evidence store keeps the recorded bytes (check evidence is hashed
// into the run's trace and re-read by the harness); only the printed copy changes.

// summaryJSON is harness.Summary as printed: its cases as caseJSON.
type summaryJSON struct {
	harness.Summary
	Cases []caseJSON `json:"cases"`
	// GroupBy and Groups are --group-by's axis and its groups ("" and [] without it).
	GroupBy string      `json:"group_by"`
	Groups  []caseGroup `json:"groups"`
}

// caseJSON is harness.CaseResult as printed: timings as a list of phases with their seconds, and
// each check's evidence in the output convention.
type caseJSON struct {
	harness.CaseResult
	Timings []phaseSeconds `json:"timings"`
	Checks  []checkJSON    `json:"checks"`
}

// phaseSeconds is one part of a case's wall time: "team", "evidence", "check:<name>", "finalize".
type phaseSeconds struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
}

// checkJSON is evidence.Check as printed, its evidence re-presented by conventionalEvidence.
type checkJSON struct {
	evidence.Check
	Evidence json.RawMessage `json:"evidence,omitempty"`
}

func presentSummary(sum harness.Summary) (summaryJSON, error) {
	out := summaryJSON{Summary: sum, Cases: []caseJSON{}, Groups: []caseGroup{}}
	for _, c := range sum.Cases {
		pc, err := presentCase(c)
		if err != nil {
			return summaryJSON{}, err
		}
		out.Cases = append(out.Cases, pc)
	}
	return out, nil
}

func presentCase(c harness.CaseResult) (caseJSON, error) {
	out := caseJSON{CaseResult: c, Timings: []phaseSeconds{}, Checks: []checkJSON{}}
	for phase, s := range c.Timings {
		out.Timings = append(out.Timings, phaseSeconds{Phase: phase, Seconds: s})
	}
	sort.Slice(out.Timings, func(i, j int) bool { return out.Timings[i].Phase < out.Timings[j].Phase })
	for _, ch := range c.Checks {
		ev, err := conventionalEvidence(ch.Evidence)
		if err != nil {
			return caseJSON{}, fmt.Errorf("case %s: check %s: %w", c.RunID, ch.Name, err)
		}
		out.Checks = append(out.Checks, checkJSON{Check: ch, Evidence: ev})
	}
	return out, nil
}

// snakeKey matches a key of the output convention (jsonconv.SnakeKey).
var snakeKey = jsonconv.SnakeKey

// conventionalEvidence re-presents recorded check evidence in the output convention (jsonconv.Evidence).
func conventionalEvidence(raw json.RawMessage) (json.RawMessage, error) {
	return jsonconv.Evidence(raw)
}

// snakeCase is jsonconv.SnakeCase.
func snakeCase(name string) string { return jsonconv.SnakeCase(name) }

// writeSummaryJSON prints a matrix run's summary as presentSummary shapes it.
func writeSummaryJSON(w io.Writer, sum harness.Summary, groupBy string) error {
	p, err := presentSummary(sum)
	if err != nil {
		return err
	}
	p.Groups = []caseGroup{}
	if groupBy != "" {
		p.GroupBy, p.Groups = groupBy, groupCases(sum, groupBy)
	}
	return writeJSON(w, p)
}

// writeCaseJSON prints one case (a resumed run) as presentCase shapes it.
func writeCaseJSON(w io.Writer, c harness.CaseResult) error {
	p, err := presentCase(c)
	if err != nil {
		return err
	}
	return writeJSON(w, p)
}
