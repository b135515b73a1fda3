package oracle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
// distinguishes every float64 value (including "-0" from "0"). The input of
// a function of several arguments is rendered as a tuple, "(3, 5)".
type Failure struct {
	// Type is the domain type, TypeInt or TypeFloat64.
	Type string `json:"type"`
	// Input is the input value (or the tuple of arguments).
	Input string `json:"input"`
	// Expected is the reference's output.
	Expected string `json:"expected"`
	// Actual is the artifact's output; for an output of the wrong type, the
	// driver's repr of it (Python repr, at most 80 characters).
	Actual string `json:"actual"`
	// ActualType is the type of the artifact's output when it was not the
	// domain type, e.g. "bool" or "float" for an int domain (Python); empty
	// when the type was right.
	ActualType string `json:"actual_type,omitempty"`
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
// Mistyped lists, in increasing index order, the outputs that were not of
// the domain type (only a Python driver can see those); their slots in Int or
// Float64Bits hold a placeholder the oracle ignores.
type domainReport struct {
	Type        string           `json:"type"`
	Size        int              `json:"size"`
	Checks      int              `json:"checks"`
	Failures    int              `json:"failures"`
	Int         []int64          `json:"int,omitempty"`
	Float64Bits []uint64         `json:"float64_bits,omitempty"`
	Mistyped    []mistypedOutput `json:"mistyped,omitempty"`
}

// mistypedOutput is one output of the wrong type: its input index, the
// name of its type, and its repr.
type mistypedOutput struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
	Repr  string `json:"repr"`
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
		failures, err := evaluateDomain(spec, d, got, &ev)
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
// adding failures to ev, and returns the domain's failure count. An output
// listed as mistyped is a failure whatever its slot holds.
func evaluateDomain(spec Spec, d Domain, got domainReport, ev *evaluation) (int, error) {
	size := d.Size()
	failures := 0
	record := func(f Failure) {
		failures++
		ev.failures++
		if len(ev.firstFailures) < maxFirstFailures {
			ev.firstFailures = append(ev.firstFailures, f)
		}
	}
	mistyped := make(map[int]mistypedOutput, len(got.Mistyped))
	last := -1
	for _, m := range got.Mistyped {
		if m.Index <= last || m.Index >= size {
			return 0, fmt.Errorf("%w: mistyped output index %d out of order or range (size %d)", errBadReport, m.Index, size)
		}
		last = m.Index
		mistyped[m.Index] = m
	}
	switch d.Type {
	case TypeInt:
		if len(got.Int) != size || len(got.Float64Bits) != 0 {
			return 0, fmt.Errorf("%w: %d int outputs for %d inputs", errBadReport, len(got.Int), size)
		}
		ref := spec.Reference.intFunc()
		for i, actual := range got.Int {
			args := d.IntArgs(i)
			want := ref(args)
			if m, ok := mistyped[i]; ok {
				record(Failure{Type: TypeInt, Input: formatInts(args), Expected: formatInt(want), Actual: truncate(m.Repr, 80), ActualType: m.Type})
				continue
			}
			if actual != want {
				record(Failure{Type: TypeInt, Input: formatInts(args), Expected: formatInt(want), Actual: formatInt(actual)})
			}
		}
	case TypeFloat64:
		if len(got.Float64Bits) != size || len(got.Int) != 0 {
			return 0, fmt.Errorf("%w: %d float64 outputs for %d inputs", errBadReport, len(got.Float64Bits), size)
		}
		ref := spec.Reference.float64Func()
		zeroEqual := spec.zeroEqual()
		for i, bits := range got.Float64Bits {
			args := d.Float64Args(i)
			want := ref(args)
			if m, ok := mistyped[i]; ok {
				record(Failure{Type: TypeFloat64, Input: formatFloats(args), Expected: formatFloat(want), Actual: truncate(m.Repr, 80), ActualType: m.Type})
				continue
			}
			if !float64Matches(bits, want, zeroEqual) {
				record(Failure{Type: TypeFloat64, Input: formatFloats(args), Expected: formatFloat(want), Actual: formatFloat(math.Float64frombits(bits))})
			}
		}
	}
	return failures, nil
}

// float64Matches reports whether the output bits match want: bit for bit,
// or, with zeroEqual, also -0.0 against +0.0.
func float64Matches(bits uint64, want float64, zeroEqual bool) bool {
	if bits == math.Float64bits(want) {
		return true
	}
	return zeroEqual && want == 0 && math.Float64frombits(bits) == 0
}

// formatInts renders int arguments: the value alone for one, a tuple
// "(a, b)" for several.
func formatInts(args []int64) string {
	if len(args) == 1 {
		return formatInt(args[0])
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = formatInt(a)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// formatFloats renders float64 arguments like formatInts.
func formatFloats(args []float64) string {
	if len(args) == 1 {
		return formatFloat(args[0])
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = formatFloat(a)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
