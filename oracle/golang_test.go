package oracle

import (
	"strings"
	"testing"
)

func TestCheckGoArtifact(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	tests := []struct {
		name   string
		src    string
		detail string // "" means accepted
	}{
		{name: "generic function in any package", src: "package zz\n\nfunc Double[T ~int | ~float64](x T) T { return x + x }\n"},
		{name: "package main", src: "package main\n\nfunc Double[T ~int](x T) T { return x }\n", detail: "package main"},
		{name: "syntax error", src: "package double\n\nfunc Double[T ~int](x T) T { return x \n", detail: "does not parse"},
		{name: "no such function", src: "package double\n\nfunc Twice[T ~int](x T) T { return x }\n", detail: "declares no function Double"},
		{name: "method of the same name", src: "package double\n\ntype n int\n\nfunc (n) Double(x int) int { return x }\n", detail: "declares no function Double"},
		{name: "not generic", src: "package double\n\nfunc Double(x int) int { return x }\n", detail: "not generic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkGoArtifact(spec, []byte(tt.src))
			if (tt.detail == "") != (got == "") || !strings.Contains(got, tt.detail) {
				t.Fatalf("checkGoArtifact = %q, want %q", got, tt.detail)
			}
		})
	}
}

// The generated driver must be valid, formatted Go for every shape of spec:
// both domain types, and one type alone (no unused import or instantiation).
func TestGoDriverSource(t *testing.T) {
	t.Parallel()
	intOnly := Spec{Name: "square", Function: "Square", Domains: []Domain{{Type: TypeInt, Min: -5, Max: 5, Step: 1}},
		Reference: Reference{Int: func(x int64) int64 { return x * x }, GoExpr: "x * x"}}
	floatOnly := Spec{Name: "half", Function: "Half", Domains: []Domain{{Type: TypeFloat64, Min: -1, Max: 1, Step: 0.5}},
		Reference: Reference{Float64: func(x float64) float64 { return x / 2 }, GoExpr: "x / 2"}}
	tests := []struct {
		name    string
		spec    Spec
		want    []string
		notWant []string
	}{
		{name: "double", spec: DoubleSpec(), want: []string{"Double[int](a0)", "Double[float64](a0)", "a0 := -1024 + (rem)*1",
			"a0 := float64(-1024) + float64(float64(rem)*0.25)", "checkDomain0(&r)", "checkDomain1(&r)", "i < 2049", "i < 8193"},
			notWant: []string{"|| (got == 0 && want == 0)"}},
		{name: "int only", spec: intOnly, want: []string{"Square[int](a0)", "a0 := -5 + (rem)*1", "i < 11"}, notWant: []string{"float64](a0)", `"math"`}},
		{name: "float only", spec: floatOnly, want: []string{"Half[float64](a0)", "a0 := float64(-1) + float64(float64(rem)*0.5)", "i < 5"}, notWant: []string{"[int](a0)"}},
		{name: "two arguments, signed zeros equal", spec: ClampSpec(), want: []string{"Clamp[int](a0, a1)", "Clamp[float64](a0, a1)",
			"a1 := 0 + (rem%49)*1", "rem /= 49", "a0 := -64 + (rem)*1", "func refInt(x, limit int) int { return min(max(x, -limit), limit) }",
			"|| (got == 0 && want == 0)", "tuple(strconv.Itoa(a0), strconv.Itoa(a1))"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := goDriverSource(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(src), w) {
					t.Errorf("driver lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(string(src), w) {
					t.Errorf("driver contains %q", w)
				}
			}
		})
	}
}
