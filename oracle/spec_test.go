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

func TestMultiArgumentDomain(t *testing.T) {
	t.Parallel()
	d := ClampSpec().Domains[0]
	if d.Arity() != 2 || d.Size() != 129*49 {
		t.Fatalf("Arity=%d Size=%d, want 2 and %d", d.Arity(), d.Size(), 129*49)
	}
	// Row-major: the last argument varies fastest.
	for i, want := range map[int][2]int64{0: {-64, 0}, 1: {-64, 1}, 48: {-64, 48}, 49: {-63, 0}, 129*49 - 1: {64, 48}} {
		if got := d.IntArgs(i); got[0] != want[0] || got[1] != want[1] {
			t.Errorf("IntArgs(%d) = %v, want %v", i, got, want)
		}
	}
	f := ClampSpec().Domains[1]
	if got := f.Float64Args(50); got[0] != -15.75 || got[1] != 0.25 {
		t.Errorf("Float64Args(50) = %v, want [-15.75 0.25]", got)
	}
	if got := DoubleSpec().Domains[0].IntArgs(1031); len(got) != 1 || got[0] != 7 {
		t.Errorf("one-argument IntArgs(1031) = %v, want [7]", got)
	}
	if got := ClampSpec().Expected(); got != 12642 {
		t.Errorf("clamp Expected() = %d, want 12642", got)
	}
}

func TestBuiltinSpecsAreGeneral(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, s := range Specs() {
		names[s.Name] = true
		for _, lang := range []string{LanguageGo, LanguagePython} {
			v, err := s.ForLanguage(lang)
			if err != nil {
				t.Fatalf("%s.ForLanguage(%s): %v", s.Name, lang, err)
			}
			if err := v.Validate(); err != nil {
				t.Errorf("%s/%s: %v", s.Name, lang, err)
			}
			validate := validateGoSpec
			if lang == LanguagePython {
				validate = validatePythonSpec
			}
			if err := validate(v); err != nil {
				t.Errorf("%s/%s: %v", s.Name, lang, err)
			}
			if lang := mustLanguageOf(t, v.File); lang != v.Language {
				t.Errorf("%s/%s: file %s is %s", s.Name, v.Language, v.File, lang)
			}
		}
	}
	for _, want := range []string{"double", "abs", "clamp"} {
		if !names[want] {
			t.Errorf("no built-in spec %s", want)
		}
	}
	py, err := DoubleSpec().ForLanguage(LanguagePython)
	if err != nil || py.Function != "double" || py.File != "double.py" || py.Language != LanguagePython || py.Expected() != 10242 {
		t.Errorf("double for python = %+v, %v", py, err)
	}
	goOnly := Spec{Name: "square", Language: LanguageGo, Function: "Square"}
	if _, err := goOnly.ForLanguage(LanguagePython); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("ForLanguage on a Go-only spec = %v, want ErrUnknownLanguage", err)
	}
	if same, err := goOnly.ForLanguage(LanguageGo); err != nil || same.Function != "Square" {
		t.Errorf("ForLanguage(go) on a Go-only spec = %+v, %v", same, err)
	}
}

func mustLanguageOf(t *testing.T, path string) string {
	t.Helper()
	lang, err := LanguageOf(path)
	if err != nil {
		t.Fatal(err)
	}
	return lang
}

func TestLanguageOf(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{"a/double.go": LanguageGo, "double.py": LanguagePython} {
		if got, err := LanguageOf(path); err != nil || got != want {
			t.Errorf("LanguageOf(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	for _, path := range []string{"double.rs", "double", "double.pyc"} {
		if _, err := LanguageOf(path); !errors.Is(err, ErrUnknownLanguage) {
			t.Errorf("LanguageOf(%s) error = %v, want ErrUnknownLanguage", path, err)
		}
	}
}

func TestSpecValidateRefusesArityMistakes(t *testing.T) {
	t.Parallel()
	mutate := func(f func(*Spec)) Spec {
		s := ClampSpec()
		f(&s)
		return s
	}
	tests := []struct {
		name string
		spec Spec
	}{
		{name: "too few parameter names", spec: mutate(func(s *Spec) { s.Params = []string{"x"} })},
		{name: "duplicate parameter", spec: mutate(func(s *Spec) { s.Params = []string{"x", "x"} })},
		{name: "python keyword parameter", spec: mutate(func(s *Spec) { s.Params = []string{"x", "lambda"} })},
		{name: "args and min together", spec: mutate(func(s *Spec) { s.Domains[0].Min = -1 })},
		{name: "empty argument range", spec: mutate(func(s *Spec) { s.Domains[0].Args[1].Step = 0 })},
		{name: "unary reference only", spec: mutate(func(s *Spec) {
			s.Reference.IntN = nil
			s.Reference.Int = func(x int64) int64 { return x }
		})},
		{name: "unknown signed-zero rule", spec: mutate(func(s *Spec) { s.SignedZero = "sometimes" })},
		{name: "product too large", spec: mutate(func(s *Spec) {
			s.Domains[1].Args = []Range{{Min: 0, Max: 4096, Step: 1}, {Min: 0, Max: 4096, Step: 1}}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Validate(); !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Validate() = %v, want ErrInvalidSpec", err)
			}
		})
	}
}
