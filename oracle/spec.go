package oracle

import (
	"errors"
	"fmt"
	"math"
)

// Domain input types. Each names the type argument the artifact's generic
// function is instantiated with and how inputs and outputs are compared.
const (
	// TypeInt is Go's int (64-bit on the supported platforms); inputs and
	// outputs are compared with ==.
	TypeInt = "int"
	// TypeFloat64 is IEEE 754 binary64; outputs are compared bit for bit
	// (math.Float64bits), so -0.0 differs from +0.0 and a NaN matches only
	// the identical NaN payload.
	TypeFloat64 = "float64"
)

// MaxDomainSize bounds the inputs of one domain (4,194,304) so that a spec
// cannot ask for a report the oracle cannot hold.
const MaxDomainSize = 1 << 22

// maxExactInt is 2^53: every integer of magnitude up to it is exact in a
// float64, so int domains described with float64 bounds stay exact.
const maxExactInt = 1 << 53

// ErrInvalidSpec is returned (wrapped) by [Spec.Validate] and [Check] when a
// spec cannot be run: no name or function, no domains, an unknown domain type,
// a domain that is empty, too large or not integral for ints, or a missing
// reference.
var ErrInvalidSpec = errors.New("oracle: invalid spec")

// Domain is one finite input domain: every value Min + i*Step for
// i = 0 .. Size()-1, of type Type.
type Domain struct {
	// Type is TypeInt or TypeFloat64.
	Type string
	// Min and Max bound the domain, both inclusive when reachable by Step.
	Min, Max float64
	// Step is the distance between consecutive inputs: 1 for every int,
	// 0.25 for quarter-step floats. It must be positive.
	Step float64
}

// Size returns the number of inputs, floor((Max-Min)/Step)+1, treating a
// quotient within 1e-9 (relative) of an integer as that integer so a decimal
// Step such as 0.1 does not lose the last input to rounding. It returns 0 for
// a domain with a non-positive or non-finite Step, non-finite bounds, or
// Max < Min.
func (d Domain) Size() int {
	if !(d.Step > 0) || math.IsInf(d.Step, 0) || math.IsNaN(d.Min) || math.IsNaN(d.Max) ||
		math.IsInf(d.Min, 0) || math.IsInf(d.Max, 0) || d.Max < d.Min {
		return 0
	}
	q := (d.Max - d.Min) / d.Step
	if math.IsInf(q, 0) || q >= math.MaxInt32 {
		return math.MaxInt32
	}
	n := math.Floor(q)
	if r := math.Round(q); math.Abs(q-r) <= 1e-9*math.Max(1, r) {
		n = r
	}
	return int(n) + 1
}

// IntInput returns the i-th input of an int domain, int64(Min) + i*int64(Step).
// It is meaningful only for a valid TypeInt domain and 0 <= i < Size().
func (d Domain) IntInput(i int) int64 {
	return int64(d.Min) + int64(i)*int64(d.Step)
}

// Float64Input returns the i-th input of a float64 domain,
// Min + float64(float64(i)*Step). The explicit conversion forbids fusing the
// multiply-add (Go spec, "Floating-point operators"), so the oracle and the
// generated driver compute the same inputs bit for bit.
func (d Domain) Float64Input(i int) float64 {
	return d.Min + float64(float64(i)*d.Step)
}

// validate reports why d cannot be enumerated, wrapping ErrInvalidSpec.
func (d Domain) validate() error {
	size := d.Size()
	switch {
	case d.Type != TypeInt && d.Type != TypeFloat64:
		return fmt.Errorf("%w: domain type %q (want %q or %q)", ErrInvalidSpec, d.Type, TypeInt, TypeFloat64)
	case size == 0:
		return fmt.Errorf("%w: %s domain [%v,%v] step %v is empty", ErrInvalidSpec, d.Type, d.Min, d.Max, d.Step)
	case size > MaxDomainSize:
		return fmt.Errorf("%w: %s domain [%v,%v] step %v has more than %d inputs", ErrInvalidSpec, d.Type, d.Min, d.Max, d.Step, MaxDomainSize)
	}
	if d.Type == TypeInt {
		for _, v := range []float64{d.Min, d.Max, d.Step} {
			if v != math.Trunc(v) || math.Abs(v) > maxExactInt {
				return fmt.Errorf("%w: int domain [%v,%v] step %v: bounds and step must be integers of magnitude <= 2^53", ErrInvalidSpec, d.Min, d.Max, d.Step)
			}
		}
	}
	return nil
}

// Reference is the trusted definition of a spec's expected output. The oracle
// evaluates Int and Float64 in its own process, where the artifact cannot
// reach them; GoExpr is the same definition as Go source for the generated
// driver's own first-pass comparison. The oracle's evaluation is
// authoritative: a driver report that disagrees with it is rejected.
type Reference struct {
	// Int returns the expected output for an int input.
	Int func(x int64) int64
	// Float64 returns the expected output for a float64 input.
	Float64 func(x float64) float64
	// GoExpr is a Go expression over x, valid for every domain type of the
	// spec, e.g. "2 * x".
	GoExpr string
}

// Spec describes one finite-domain oracle. It is a descriptor: adding an
// oracle is adding one value to [Specs].
type Spec struct {
	// Name identifies the spec in reports, e.g. "double".
	Name string
	// Doc says in one sentence what the artifact must compute.
	Doc string
	// Language is the artifact's language; "go" is supported.
	Language string
	// File is the default artifact file name, e.g. "double.go"; the artifact
	// is copied under this name into the driver module.
	File string
	// Function is the generic function under test, e.g. "Double". The driver
	// instantiates it once per domain with the domain's type.
	Function string
	// Domains lists the inputs, one per instantiation / input type.
	Domains []Domain
	// Reference defines the expected output.
	Reference Reference
}

// Expected returns the number of checks the spec demands: the sum of its
// domains' sizes (10,242 for [DoubleSpec]).
func (s Spec) Expected() int {
	n := 0
	for _, d := range s.Domains {
		n += d.Size()
	}
	return n
}

// Validate reports why the spec cannot be run, wrapping [ErrInvalidSpec]; nil
// when it can. Language-specific requirements (an exported Go identifier, a
// Go expression) are checked by [Check].
func (s Spec) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("%w: empty Name", ErrInvalidSpec)
	}
	if s.Function == "" {
		return fmt.Errorf("%w: spec %s: empty Function", ErrInvalidSpec, s.Name)
	}
	if len(s.Domains) == 0 {
		return fmt.Errorf("%w: spec %s: no domains", ErrInvalidSpec, s.Name)
	}
	for _, d := range s.Domains {
		if err := d.validate(); err != nil {
			return fmt.Errorf("spec %s: %w", s.Name, err)
		}
		if d.Type == TypeInt && s.Reference.Int == nil {
			return fmt.Errorf("%w: spec %s: int domain without Reference.Int", ErrInvalidSpec, s.Name)
		}
		if d.Type == TypeFloat64 && s.Reference.Float64 == nil {
			return fmt.Errorf("%w: spec %s: float64 domain without Reference.Float64", ErrInvalidSpec, s.Name)
		}
	}
	return nil
}

// DoubleSpec returns the "double" oracle: a generic Go function
// Double[T](x T) T that returns 2*x, checked on every int in [-1024,1024]
// (2,049 inputs) as Double[int] and every quarter-step float64 in
// [-1024,1024] (8,193 inputs) as Double[float64]: 10,242 checks. The expected
// value is 2*x in the input's type, compared exactly; floats compare bit for
// bit, so the rule for negative zero is IEEE 754's: 2*(-0.0) is -0.0. (The
// quarter-step domain generates +0.0, not -0.0.)
func DoubleSpec() Spec {
	return Spec{
		Name:     "double",
		Doc:      "Double[T](x T) T returns 2*x for every int in [-1024,1024] and every quarter-step float64 in [-1024,1024], compared exactly",
		Language: "go",
		File:     "double.go",
		Function: "Double",
		Domains: []Domain{
			{Type: TypeInt, Min: -1024, Max: 1024, Step: 1},
			{Type: TypeFloat64, Min: -1024, Max: 1024, Step: 0.25},
		},
		Reference: Reference{
			Int:     func(x int64) int64 { return 2 * x },
			Float64: func(x float64) float64 { return 2 * x },
			GoExpr:  "2 * x",
		},
	}
}

// Specs returns the built-in specs, a fresh slice on every call.
func Specs() []Spec {
	return []Spec{DoubleSpec()}
}

// SpecByName returns the built-in spec with the given name, and false when
// there is none.
func SpecByName(name string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}
