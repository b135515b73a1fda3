package oracle

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// honestReport builds the report a driver would write for outputs produced
// by out (in place of the artifact), with failure counts the driver would
// compute.
func honestReport(spec Spec, outInt func(int64) int64, outFloat func(float64) float64) driverReport {
	rep := driverReport{Format: reportFormat, Spec: spec.Name, Complete: true, FirstFailures: []Failure{}}
	for _, d := range spec.Domains {
		dr := domainReport{Type: d.Type, Size: d.Size()}
		for i := 0; i < d.Size(); i++ {
			switch d.Type {
			case TypeInt:
				x := d.IntInput(i)
				got := outInt(x)
				dr.Int = append(dr.Int, got)
				if got != spec.Reference.Int(x) {
					dr.Failures++
				}
			case TypeFloat64:
				x := d.Float64Input(i)
				got := outFloat(x)
				dr.Float64Bits = append(dr.Float64Bits, math.Float64bits(got))
				if math.Float64bits(got) != math.Float64bits(spec.Reference.Float64(x)) {
					dr.Failures++
				}
			}
			dr.Checks++
		}
		rep.Domains = append(rep.Domains, dr)
		rep.Checks += dr.Checks
		rep.Failures += dr.Failures
	}
	return rep
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEvaluateReportAccepts(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name         string
		rep          driverReport
		wantFailures int
		wantFirst    []Failure
	}{
		{
			name:      "correct outputs",
			rep:       honestReport(spec, func(x int64) int64 { return 2 * x }, func(x float64) float64 { return 2 * x }),
			wantFirst: []Failure{},
		},
		{
			name:         "one wrong float",
			rep:          honestReport(spec, func(x int64) int64 { return 2 * x }, func(x float64) float64 { return map[bool]float64{true: 0, false: 2 * x}[x == 0.25] }),
			wantFailures: 1,
			wantFirst:    []Failure{{Type: TypeFloat64, Input: "0.25", Expected: "0.5", Actual: "0"}},
		},
		{
			name: "negative zero where positive zero is due is a failure",
			rep: honestReport(spec, func(x int64) int64 { return 2 * x }, func(x float64) float64 {
				if x == 0 {
					return negZero
				}
				return 2 * x
			}),
			wantFailures: 1,
			wantFirst:    []Failure{{Type: TypeFloat64, Input: "0", Expected: "0", Actual: "-0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := evaluateReport(spec, mustJSON(t, tt.rep))
			if err != nil {
				t.Fatal(err)
			}
			if ev.checks != 10242 || ev.reportedChecks != 10242 || ev.failures != tt.wantFailures {
				t.Fatalf("evaluation checks=%d reported=%d failures=%d; want 10242, 10242, %d", ev.checks, ev.reportedChecks, ev.failures, tt.wantFailures)
			}
			if diff := cmp.Diff(tt.wantFirst, ev.firstFailures); diff != "" {
				t.Errorf("first failures (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvaluateReportRejects(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	good := func() driverReport {
		return honestReport(spec, func(x int64) int64 { return 2 * x }, func(x float64) float64 { return 2 * x })
	}
	mutate := func(f func(*driverReport)) []byte {
		rep := good()
		f(&rep)
		return mustJSON(t, rep)
	}
	full := mustJSON(t, good())
	tests := []struct {
		name string
		data []byte
	}{
		{name: "empty", data: nil},
		{name: "truncated", data: full[:len(full)/2]},
		{name: "two objects", data: append(append([]byte{}, full...), full...)},
		{name: "unknown field", data: append([]byte(`{"verdict":"passed",`), full[1:]...)},
		{name: "no completion marker", data: mutate(func(r *driverReport) { r.Complete = false })},
		{name: "wrong format", data: mutate(func(r *driverReport) { r.Format = "v0" })},
		{name: "other spec", data: mutate(func(r *driverReport) { r.Spec = "triple" })},
		{name: "short of checks", data: mutate(func(r *driverReport) { r.Checks = 10241 })},
		{name: "missing domain", data: mutate(func(r *driverReport) { r.Domains = r.Domains[:1] })},
		{name: "swapped domains", data: mutate(func(r *driverReport) { r.Domains[0], r.Domains[1] = r.Domains[1], r.Domains[0] })},
		{name: "domain short of outputs", data: mutate(func(r *driverReport) { r.Domains[0].Int = r.Domains[0].Int[1:] })},
		{name: "domain check count short", data: mutate(func(r *driverReport) { r.Domains[1].Checks-- })},
		{name: "outputs of the wrong type", data: mutate(func(r *driverReport) { r.Domains[0].Float64Bits = []uint64{1} })},
		{name: "wrong output hidden behind a zero failure count", data: mutate(func(r *driverReport) { r.Domains[0].Int[5]++ })},
		{name: "total failures disagree", data: mutate(func(r *driverReport) { r.Failures = 3 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := evaluateReport(spec, tt.data); !errors.Is(err, errBadReport) {
				t.Fatalf("evaluateReport error = %v, want errBadReport", err)
			}
		})
	}
}

// Outputs of the wrong type (reported by a Python driver) are failures
// whatever their slot holds; a report that hides one is rejected.
func TestEvaluateReportMistyped(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	rep := honestReport(spec, func(x int64) int64 { return 2 * x }, func(x float64) float64 { return 2 * x })
	// The int 0 came back as False: its slot holds the placeholder 0, which
	// would match the reference if the oracle looked at it.
	rep.Domains[0].Mistyped = []mistypedOutput{{Index: 1024, Type: "bool", Repr: "False"}}
	rep.Domains[0].Failures, rep.Failures = 1, 1
	ev, err := evaluateReport(spec, mustJSON(t, rep))
	if err != nil {
		t.Fatal(err)
	}
	want := []Failure{{Type: TypeInt, Input: "0", Expected: "0", Actual: "False", ActualType: "bool"}}
	if diff := cmp.Diff(want, ev.firstFailures); diff != "" || ev.failures != 1 {
		t.Fatalf("failures=%d (-want +got):\n%s", ev.failures, diff)
	}

	hidden := rep
	hidden.Domains = append([]domainReport(nil), rep.Domains...)
	hidden.Domains[0].Failures, hidden.Failures = 0, 0
	if _, err := evaluateReport(spec, mustJSON(t, hidden)); !errors.Is(err, errBadReport) {
		t.Fatalf("a report hiding its mistyped output: err = %v, want errBadReport", err)
	}

	disordered := rep
	disordered.Domains = append([]domainReport(nil), rep.Domains...)
	disordered.Domains[0].Mistyped = []mistypedOutput{{Index: 5, Type: "bool"}, {Index: 5, Type: "bool"}}
	if _, err := evaluateReport(spec, mustJSON(t, disordered)); !errors.Is(err, errBadReport) {
		t.Fatalf("repeated mistyped index: err = %v, want errBadReport", err)
	}
}

// The spec's signed-zero rule decides whether -0.0 matches +0.0; every other
// difference still fails.
func TestEvaluateReportSignedZeroRule(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	clamp := ClampSpec()
	rep := driverReport{Format: reportFormat, Spec: clamp.Name, Complete: true, FirstFailures: []Failure{}}
	for _, d := range clamp.Domains {
		dr := domainReport{Type: d.Type, Size: d.Size(), Checks: d.Size()}
		for i := 0; i < d.Size(); i++ {
			if d.Type == TypeInt {
				a := d.IntArgs(i)
				dr.Int = append(dr.Int, min(max(a[0], -a[1]), a[1]))
				continue
			}
			a := d.Float64Args(i)
			got := min(max(a[0], -a[1]), a[1])
			if got == 0 {
				got = negZero // every zero result as -0.0
			}
			dr.Float64Bits = append(dr.Float64Bits, math.Float64bits(got))
		}
		rep.Domains = append(rep.Domains, dr)
		rep.Checks += dr.Checks
	}
	ev, err := evaluateReport(clamp, mustJSON(t, rep))
	if err != nil || ev.failures != 0 {
		t.Fatalf("clamp with -0.0 results: failures=%d err=%v; want none under SignedZeroEqual", ev.failures, err)
	}
	exact := clamp
	exact.SignedZero = SignedZeroExact
	if _, err := evaluateReport(exact, mustJSON(t, rep)); !errors.Is(err, errBadReport) {
		t.Fatalf("the same report under SignedZeroExact: err = %v, want the driver's zero failure count rejected", err)
	}
	if !float64Matches(math.Float64bits(negZero), 0, true) || float64Matches(math.Float64bits(negZero), 0, false) ||
		float64Matches(math.Float64bits(1), 0, true) {
		t.Fatal("float64Matches does not follow the rule")
	}
}
