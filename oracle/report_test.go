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
