package oracle

import (
	"fmt"
	"math"
)

// Range is the inputs of one argument: every value Min + i*Step for
// i = 0 .. Size()-1.
type Range struct {
	// Min and Max bound the range, both inclusive when reachable by Step.
	Min, Max float64
	// Step is the distance between consecutive inputs: 1 for every int,
	// 0.25 for quarter-step floats. It must be positive.
	Step float64
}

// Size returns the number of inputs, floor((Max-Min)/Step)+1, treating a
// quotient within 1e-9 (relative) of an integer as that integer so a decimal
// Step such as 0.1 does not lose the last input to rounding. It returns 0 for
// a range with a non-positive or non-finite Step, non-finite bounds, or
// Max < Min, and math.MaxInt32 for a range too large to count.
func (r Range) Size() int {
	if !(r.Step > 0) || math.IsInf(r.Step, 0) || math.IsNaN(r.Min) || math.IsNaN(r.Max) ||
		math.IsInf(r.Min, 0) || math.IsInf(r.Max, 0) || r.Max < r.Min {
		return 0
	}
	q := (r.Max - r.Min) / r.Step
	if math.IsInf(q, 0) || q >= math.MaxInt32 {
		return math.MaxInt32
	}
	n := math.Floor(q)
	if rounded := math.Round(q); math.Abs(q-rounded) <= 1e-9*math.Max(1, rounded) {
		n = rounded
	}
	return int(n) + 1
}

// IntInput returns the i-th input of an int range, int64(Min) + i*int64(Step).
// It is meaningful only for integral bounds and 0 <= i < Size().
func (r Range) IntInput(i int) int64 {
	return int64(r.Min) + int64(i)*int64(r.Step)
}

// Float64Input returns the i-th input of a float64 range,
// Min + float64(float64(i)*Step). The explicit conversion forbids fusing the
// multiply-add (Go spec, "Floating-point operators"), so the oracle and the
// generated drivers (Go, and Python, whose float arithmetic is unfused
// binary64) compute the same inputs bit for bit.
func (r Range) Float64Input(i int) float64 {
	return r.Min + float64(float64(i)*r.Step)
}

// Domain is one finite input domain of one type: the function under test
// takes Arity() arguments of type Type, and the domain is the cartesian
// product of the arguments' ranges.
//
// A one-argument domain gives its range in Min, Max and Step and leaves Args
// empty. A domain of two or more arguments gives one Range per argument in
// Args, in parameter order, and leaves Min, Max and Step zero. Inputs are
// enumerated in row-major order: the first argument varies slowest, the last
// fastest.
type Domain struct {
	// Type is TypeInt or TypeFloat64.
	Type string
	// Min and Max bound a one-argument domain, both inclusive when reachable
	// by Step.
	Min, Max float64
	// Step is the distance between consecutive inputs of a one-argument
	// domain: 1 for every int, 0.25 for quarter-step floats.
	Step float64
	// Args holds one range per argument for a domain of two or more
	// arguments; empty for one argument.
	Args []Range `json:",omitempty"`
}

// Arity returns the number of arguments: len(Args), or 1 when Args is empty.
func (d Domain) Arity() int {
	if len(d.Args) == 0 {
		return 1
	}
	return len(d.Args)
}

// Ranges returns the argument ranges in parameter order: Args, or the one
// range {Min, Max, Step}. The slice is fresh.
func (d Domain) Ranges() []Range {
	if len(d.Args) == 0 {
		return []Range{{Min: d.Min, Max: d.Max, Step: d.Step}}
	}
	return append([]Range(nil), d.Args...)
}

// Size returns the number of inputs: the product of the ranges' sizes, 0
// when any range is empty, and math.MaxInt32 when the product would exceed
// it.
func (d Domain) Size() int {
	n := 1
	for _, r := range d.Ranges() {
		s := r.Size()
		if s == 0 {
			return 0
		}
		if n > math.MaxInt32/s {
			return math.MaxInt32
		}
		n *= s
	}
	return n
}

// IntInput returns the i-th input of a one-argument int domain,
// int64(Min) + i*int64(Step). For domains of any arity use [Domain.IntArgs].
func (d Domain) IntInput(i int) int64 {
	return Range{Min: d.Min, Max: d.Max, Step: d.Step}.IntInput(i)
}

// Float64Input returns the i-th input of a one-argument float64 domain (see
// [Range.Float64Input]). For domains of any arity use [Domain.Float64Args].
func (d Domain) Float64Input(i int) float64 {
	return Range{Min: d.Min, Max: d.Max, Step: d.Step}.Float64Input(i)
}

// indexes splits the flat input index i into one index per range, the last
// range varying fastest.
func (d Domain) indexes(i int) []int {
	ranges := d.Ranges()
	idx := make([]int, len(ranges))
	for k := len(ranges) - 1; k >= 0; k-- {
		s := ranges[k].Size()
		idx[k] = i % s
		i /= s
	}
	return idx
}

// IntArgs returns the arguments of the i-th input of an int domain, in
// parameter order. It is meaningful only for a valid TypeInt domain and
// 0 <= i < Size().
func (d Domain) IntArgs(i int) []int64 {
	ranges := d.Ranges()
	args := make([]int64, len(ranges))
	for k, j := range d.indexes(i) {
		args[k] = ranges[k].IntInput(j)
	}
	return args
}

// Float64Args returns the arguments of the i-th input of a float64 domain,
// in parameter order. It is meaningful only for a valid TypeFloat64 domain
// and 0 <= i < Size().
func (d Domain) Float64Args(i int) []float64 {
	ranges := d.Ranges()
	args := make([]float64, len(ranges))
	for k, j := range d.indexes(i) {
		args[k] = ranges[k].Float64Input(j)
	}
	return args
}

// validate reports why d cannot be enumerated, wrapping ErrInvalidSpec.
func (d Domain) validate() error {
	if d.Type != TypeInt && d.Type != TypeFloat64 {
		return fmt.Errorf("%w: domain type %q (want %q or %q)", ErrInvalidSpec, d.Type, TypeInt, TypeFloat64)
	}
	if len(d.Args) > 0 && (d.Min != 0 || d.Max != 0 || d.Step != 0) {
		return fmt.Errorf("%w: %s domain gives both Args and Min/Max/Step; a domain of several arguments uses Args only", ErrInvalidSpec, d.Type)
	}
	for k, r := range d.Ranges() {
		switch size := r.Size(); {
		case size == 0:
			return fmt.Errorf("%w: %s domain argument %d [%v,%v] step %v is empty", ErrInvalidSpec, d.Type, k, r.Min, r.Max, r.Step)
		case size > MaxDomainSize:
			return fmt.Errorf("%w: %s domain argument %d [%v,%v] step %v has more than %d inputs", ErrInvalidSpec, d.Type, k, r.Min, r.Max, r.Step, MaxDomainSize)
		}
		if d.Type == TypeInt {
			for _, v := range []float64{r.Min, r.Max, r.Step} {
				if v != math.Trunc(v) || math.Abs(v) > maxExactInt {
					return fmt.Errorf("%w: int domain argument %d [%v,%v] step %v: bounds and step must be integers of magnitude <= 2^53", ErrInvalidSpec, k, r.Min, r.Max, r.Step)
				}
			}
		}
	}
	if d.Size() > MaxDomainSize {
		return fmt.Errorf("%w: %s domain has more than %d inputs", ErrInvalidSpec, d.Type, MaxDomainSize)
	}
	return nil
}
