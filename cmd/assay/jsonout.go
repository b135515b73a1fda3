package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
)

// The JSON output of matrix run and resume re-presents what the harness recorded in the output
// convention of docs/json.md. The evidence store keeps the recorded bytes (check evidence is hashed
// into the run's trace and re-read by the harness); only the printed copy changes.

// summaryJSON is harness.Summary as printed: its cases as caseJSON.
type summaryJSON struct {
	harness.Summary
	Cases []caseJSON `json:"cases"`
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
	out := summaryJSON{Summary: sum, Cases: []caseJSON{}}
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

// snakeKey matches a key of the output convention: lower-case words joined by underscores.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// goFieldName matches a key encoding/json took from an untagged Go field ("ExitCode").
var goFieldName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// conventionalEvidence re-presents recorded check evidence in the output convention:
//   - a key that is a Go field name becomes snake_case ("ArtifactSHA256" -> "artifact_sha256");
//   - a Go duration ("Duration", an integer of nanoseconds) becomes "<name>_seconds", in seconds;
//   - an object keyed by data rather than names (member ids, file paths, session ids: any key that
//     is not snake_case) becomes a list of {"key", "value"} pairs in key order.
//
// Numbers keep their recorded digits. nil stays nil.
func conventionalEvidence(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("recorded evidence is not JSON: %w", err)
	}
	return marshalJSON(conventional(v))
}

// keyValue is one entry of an object keyed by data.
type keyValue struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

func conventional(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = conventional(x)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := make(map[string]any, len(v))
		for _, k := range keys {
			name, val := k, conventional(v[k])
			if goFieldName.MatchString(k) {
				name = snakeCase(k)
				if n, ok := v[k].(json.Number); ok && strings.HasSuffix(k, "Duration") {
					if ns, err := n.Int64(); err == nil {
						name, val = name+"_seconds", float64(ns)/1e9
					}
				}
			}
			if !snakeKey.MatchString(name) {
				list := make([]keyValue, 0, len(keys))
				for _, k := range keys {
					list = append(list, keyValue{Key: k, Value: conventional(v[k])})
				}
				return list
			}
			obj[name] = val
		}
		return obj
	}
	return v
}

// snakeCase turns a Go field name into snake_case: a word starts at an upper-case letter after a
// lower-case letter or a digit, or at the last upper-case letter of an acronym followed by a
// lower-case one ("ArtifactSHA256After" -> "artifact_sha256_after").
func snakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// writeSummaryJSON prints a matrix run's summary as presentSummary shapes it.
func writeSummaryJSON(w io.Writer, sum harness.Summary) error {
	p, err := presentSummary(sum)
	if err != nil {
		return err
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
