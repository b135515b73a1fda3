package oracle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// reportFormat identifies the driver report schema. Every language's driver
// writes this one shape, so the oracle's evaluation is language-neutral.
const reportFormat = "assay-oracle-report/1"

// maxFirstFailures bounds Result.FirstFailures.
const maxFirstFailures = 10

// errBadReport marks a report that is missing, partial, malformed, short of
// the spec's checks, or inconsistent with the oracle's own evaluation.
var errBadReport = errors.New("incomplete or inconsistent report")

// Failure is one input on which the artifact's output differed from the
// reference. Values are rendered as Go would parse them back: ints in
// decimal, floats with strconv.FormatFloat(v, 'g', -1, 64), which
// distinguishes every float64 value (including "-0" from "0").
type Failure struct {
	// Type is the domain type, TypeInt or TypeFloat64.
	Type string `json:"type"`
	// Input is the input value.
	Input string `json:"input"`
	// Expected is the reference's output.
	Expected string `json:"expected"`
	// Actual is the artifact's output.
	Actual string `json:"actual"`
}

// driverReport is the one JSON object a driver writes to the report path.
// Outputs are carried in full so that the oracle re-evaluates them against
// its own reference instead of trusting the driver's counts: the driver
// shares a process with the artifact.
type driverReport struct {
	Format        string         `json:"format"`
	Spec          string         `json:"spec"`
	Domains       []domainReport `json:"domains"`
	Checks        int            `json:"checks"`
	Failures      int            `json:"failures"`
	FirstFailures []Failure      `json:"first_failures"`
	DurationNS    int64          `json:"duration_ns"`
	Complete      bool           `json:"complete"`
}

// domainReport is one domain of a driverReport: Int holds the int outputs,
// Float64Bits the float64 outputs as IEEE 754 bit patterns, in input order.
type domainReport struct {
	Type        string   `json:"type"`
	Size        int      `json:"size"`
	Checks      int      `json:"checks"`
	Failures    int      `json:"failures"`
	Int         []int64  `json:"int,omitempty"`
	Float64Bits []uint64 `json:"float64_bits,omitempty"`
}

// evaluation is the oracle's own reading of a complete report.
type evaluation struct {
	// reportedChecks is the driver's claimed check count, set once the
	// report decoded, even when it is then rejected.
	reportedChecks int
	checks         int
	failures       int
	firstFailures  []Failure
}

// evaluateReport decodes one driver report and re-evaluates every output
// against spec.Reference. It returns an error wrapping errBadReport when the
// report is not exactly one complete object for spec, when any domain's check
// count or output count differs from the spec, or when the driver's failure
// counts disagree with the oracle's.
func evaluateReport(spec Spec, data []byte) (evaluation, error) {
	var rep driverReport
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return evaluation{}, fmt.Errorf("%w: decode: %w", errBadReport, err)
	}
	if dec.More() {
		return evaluation{}, fmt.Errorf("%w: more than one JSON value", errBadReport)
	}
	claimed := evaluation{reportedChecks: rep.Checks}
	switch {
	case rep.Format != reportFormat:
		return claimed, fmt.Errorf("%w: format %q, want %q", errBadReport, rep.Format, reportFormat)
	case !rep.Complete:
		return claimed, fmt.Errorf("%w: completion marker missing", errBadReport)
	case rep.Spec != spec.Name:
		return claimed, fmt.Errorf("%w: spec %q, want %q", errBadReport, rep.Spec, spec.Name)
	case rep.Checks != spec.Expected():
		return claimed, fmt.Errorf("%w: %d checks reported, spec demands %d", errBadReport, rep.Checks, spec.Expected())
	case len(rep.Domains) != len(spec.Domains):
		return claimed, fmt.Errorf("%w: %d domains reported, spec has %d", errBadReport, len(rep.Domains), len(spec.Domains))
	}
	ev := evaluation{reportedChecks: rep.Checks, firstFailures: []Failure{}}
	for i, d := range spec.Domains {
		got := rep.Domains[i]
		size := d.Size()
		if got.Type != d.Type || got.Size != size || got.Checks != size {
			return claimed, fmt.Errorf("%w: domain %d reported as %s size %d with %d checks, spec has %s size %d",
				errBadReport, i, got.Type, got.Size, got.Checks, d.Type, size)
		}
		failures, err := evaluateDomain(spec.Reference, d, got, &ev)
		if err != nil {
			return claimed, fmt.Errorf("domain %d (%s): %w", i, d.Type, err)
		}
		if failures != got.Failures {
			return claimed, fmt.Errorf("%w: domain %d (%s): driver reported %d failures, the oracle's reference finds %d",
				errBadReport, i, d.Type, got.Failures, failures)
		}
		ev.checks += size
	}
	if ev.failures != rep.Failures {
		return claimed, fmt.Errorf("%w: driver reported %d failures in total, the oracle's reference finds %d", errBadReport, rep.Failures, ev.failures)
	}
	return ev, nil
}

// evaluateDomain compares one domain's reported outputs with the reference,
// adding failures to ev, and returns the domain's failure count.
func evaluateDomain(ref Reference, d Domain, got domainReport, ev *evaluation) (int, error) {
	size := d.Size()
	failures := 0
	record := func(f Failure) {
		failures++
		ev.failures++
		if len(ev.firstFailures) < maxFirstFailures {
			ev.firstFailures = append(ev.firstFailures, f)
		}
	}
	switch d.Type {
	case TypeInt:
		if len(got.Int) != size || len(got.Float64Bits) != 0 {
			return 0, fmt.Errorf("%w: %d int outputs for %d inputs", errBadReport, len(got.Int), size)
		}
		for i, actual := range got.Int {
			x := d.IntInput(i)
			if want := ref.Int(x); actual != want {
				record(Failure{Type: TypeInt, Input: formatInt(x), Expected: formatInt(want), Actual: formatInt(actual)})
			}
		}
	case TypeFloat64:
		if len(got.Float64Bits) != size || len(got.Int) != 0 {
			return 0, fmt.Errorf("%w: %d float64 outputs for %d inputs", errBadReport, len(got.Float64Bits), size)
		}
		for i, bits := range got.Float64Bits {
			x := d.Float64Input(i)
			want := ref.Float64(x)
			if bits != math.Float64bits(want) {
				record(Failure{Type: TypeFloat64, Input: formatFloat(x), Expected: formatFloat(want), Actual: formatFloat(math.Float64frombits(bits))})
			}
		}
	}
	return failures, nil
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
