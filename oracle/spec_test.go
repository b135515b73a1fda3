package oracle

import (
	"errors"
	"math"
	"testing"
)

func TestDomainSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    Domain
		want int
	}{
		{name: "every int in [-1024,1024]", d: Domain{Type: TypeInt, Min: -1024, Max: 1024, Step: 1}, want: 2049},
		{name: "quarter steps in [-1024,1024]", d: Domain{Type: TypeFloat64, Min: -1024, Max: 1024, Step: 0.25}, want: 8193},
		{name: "single point", d: Domain{Type: TypeInt, Min: 3, Max: 3, Step: 1}, want: 1},
		{name: "decimal step keeps its last input", d: Domain{Type: TypeFloat64, Min: 0, Max: 1, Step: 0.1}, want: 11},
		{name: "step not dividing the range", d: Domain{Type: TypeInt, Min: 0, Max: 10, Step: 3}, want: 4},
		{name: "zero step", d: Domain{Type: TypeInt, Min: 0, Max: 1, Step: 0}, want: 0},
		{name: "negative step", d: Domain{Type: TypeInt, Min: 0, Max: 1, Step: -1}, want: 0},
		{name: "max below min", d: Domain{Type: TypeInt, Min: 1, Max: 0, Step: 1}, want: 0},
		{name: "NaN bound", d: Domain{Type: TypeFloat64, Min: math.NaN(), Max: 1, Step: 1}, want: 0},
		{name: "infinite bound", d: Domain{Type: TypeFloat64, Min: 0, Max: math.Inf(1), Step: 1}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.Size(); got != tt.want {
				t.Fatalf("Size() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDomainInputs(t *testing.T) {
	t.Parallel()
	ints := Domain{Type: TypeInt, Min: -1024, Max: 1024, Step: 1}
	if first, last := ints.IntInput(0), ints.IntInput(ints.Size()-1); first != -1024 || last != 1024 {
		t.Errorf("int inputs run %d..%d, want -1024..1024", first, last)
	}
	floats := Domain{Type: TypeFloat64, Min: -1024, Max: 1024, Step: 0.25}
	if first, last := floats.Float64Input(0), floats.Float64Input(floats.Size()-1); first != -1024 || last != 1024 {
		t.Errorf("float inputs run %v..%v, want -1024..1024", first, last)
	}
	if zero := floats.Float64Input(4096); zero != 0 || math.Signbit(zero) {
		t.Errorf("input 4096 = %v (signbit %v), want +0", zero, math.Signbit(zero))
	}
}

func TestDoubleSpec(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := validateGoSpec(spec); err != nil {
		t.Fatal(err)
	}
	if got := spec.Expected(); got != 10242 {
		t.Fatalf("Expected() = %d, want 10242", got)
	}
	if got := spec.Reference.Float64(math.Copysign(0, -1)); !math.Signbit(got) {
		t.Errorf("reference 2*(-0.0) = %v without the sign, want -0.0", got)
	}
	if got, ok := SpecByName("double"); !ok || got.Name != "double" || got.Function != "Double" {
		t.Errorf("SpecByName(double) = %+v, %v", got, ok)
	}
	if _, ok := SpecByName("triple"); ok {
		t.Error("SpecByName(triple) found a spec")
	}
	names := map[string]bool{}
	for _, s := range Specs() {
		if names[s.Name] {
			t.Errorf("duplicate spec %s", s.Name)
		}
		names[s.Name] = true
		if err := s.Validate(); err != nil {
			t.Errorf("built-in spec %s: %v", s.Name, err)
		}
	}
}

func TestSpecValidateRefuses(t *testing.T) {
	t.Parallel()
	mutate := func(f func(*Spec)) Spec {
		s := DoubleSpec()
		f(&s)
		return s
	}
	tests := []struct {
		name string
		spec Spec
	}{
		{name: "no name", spec: mutate(func(s *Spec) { s.Name = "" })},
		{name: "no function", spec: mutate(func(s *Spec) { s.Function = "" })},
		{name: "no domains", spec: mutate(func(s *Spec) { s.Domains = nil })},
		{name: "unknown type", spec: mutate(func(s *Spec) { s.Domains[0].Type = "complex128" })},
		{name: "empty domain", spec: mutate(func(s *Spec) { s.Domains[0].Step = 0 })},
		{name: "fractional int step", spec: mutate(func(s *Spec) { s.Domains[0].Step = 0.5 })},
		{name: "too large", spec: mutate(func(s *Spec) { s.Domains[1].Step = 1e-9 })},
		{name: "no int reference", spec: mutate(func(s *Spec) { s.Reference.Int = nil })},
		{name: "no float reference", spec: mutate(func(s *Spec) { s.Reference.Float64 = nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Validate() = %v, want ErrInvalidSpec", err)
			}
		})
	}
	goTests := []struct {
		name string
		spec Spec
	}{
		{name: "unexported function", spec: mutate(func(s *Spec) { s.Function = "double" })},
		{name: "bad expression", spec: mutate(func(s *Spec) { s.Reference.GoExpr = "2 *" })},
		{name: "test file", spec: mutate(func(s *Spec) { s.File = "double_test.go" })},
		{name: "file with directory", spec: mutate(func(s *Spec) { s.File = "../double.go" })},
	}
	for _, tt := range goTests {
		t.Run("go/"+tt.name, func(t *testing.T) {
			if err := validateGoSpec(tt.spec); !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("validateGoSpec() = %v, want ErrInvalidSpec", err)
			}
		})
	}
}
