package oracle

import (
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Domain input types. Each names the type argument a Go artifact's generic
// function is instantiated with (and the Python type a Python artifact must
// return), and how inputs and outputs are compared.
const (
	// TypeInt is Go's int (64-bit on the supported platforms) and Python's
	// int restricted to the int64 range; outputs are compared with ==. A
	// Python output must be exactly of type int: bool (an int subclass),
	// float and every other type fail.
	TypeInt = "int"
	// TypeFloat64 is IEEE 754 binary64 (Go float64, Python float); outputs
	// are compared bit for bit (math.Float64bits), except that the spec's
	// SignedZero rule may let -0.0 and +0.0 match. A NaN output matches only
	// the identical NaN payload. A Python output must be exactly a float.
	TypeFloat64 = "float64"
)

// Artifact languages: the values of Spec.Language and Target.Language.
const (
	// LanguageGo: a Go source file declaring a generic function in any
	// package but main; the oracle builds it with a generated driver.
	LanguageGo = "go"
	// LanguagePython: a Python 3 source file defining a function at module
	// level; the oracle runs it with a generated driver under `python3 -I -S`
	// (standard library only: no site packages).
	LanguagePython = "python"
)

// Signed-zero rules of Spec.SignedZero.
const (
	// SignedZeroExact compares float64 outputs bit for bit, so -0.0 and
	// +0.0 differ (IEEE 754-2019 §6.3 gives them distinct encodings). It is
	// the rule when Spec.SignedZero is empty.
	SignedZeroExact = "exact"
	// SignedZeroEqual lets -0.0 and +0.0 match each other (they compare
	// equal under IEEE 754); every other float64 output is still compared
	// bit for bit. For specs whose correct implementations legitimately
	// differ in the sign of a zero result, e.g. clamp to [-0.0, 0.0].
	SignedZeroEqual = "equal"
)

// MaxDomainSize bounds the inputs of one domain (4,194,304) so that a spec
// cannot ask for a report the oracle cannot hold.
const MaxDomainSize = 1 << 22

// maxExactInt is 2^53: every integer of magnitude up to it is exact in a
// float64, so int domains described with float64 bounds stay exact.
const maxExactInt = 1 << 53

// ErrInvalidSpec is returned (wrapped) by [Spec.Validate] and [Check] when a
// spec cannot be run: no name or function, no domains, an unknown domain type,
// a domain that is empty, too large or not integral for ints, domains of
// different arities, parameter names that do not fit the arity, a missing
// reference, or an unknown signed-zero rule.
var ErrInvalidSpec = errors.New("oracle: invalid spec")

// ErrUnknownLanguage is returned (wrapped) by [Check] for a spec whose
// Language has no runner, by [LanguageOf] for a file whose extension names no
// supported language, and by [Spec.ForLanguage] for a spec without a target
// in the requested language.
var ErrUnknownLanguage = errors.New("oracle: unknown language")

// ErrNoArtifact is returned (wrapped, naming the path) by [Check] and
// [SpecForFile] when the artifact path names no regular file: nothing there
// (the error also wraps fs.ErrNotExist), or a directory or device. An artifact
// that exists but cannot be read is the read's error alone.
var ErrNoArtifact = errors.New("oracle: no artifact file")

// ErrInvalidOptions is returned (in an *OptionError naming the field) by
// [Check] for Options it cannot honour: a negative duration or limit.
var ErrInvalidOptions = errors.New("oracle: invalid options")

// OptionError names the field of [Options] that was refused and why: its text
// is the field's Go name and the reason ("Deadline -1s is negative"). It
// unwraps to ErrInvalidOptions.
type OptionError struct {
	Field  string // e.g. "Deadline"
	Reason string // e.g. "-1s is negative"
}

func (e *OptionError) Error() string { return e.Field + " " + e.Reason }

// Unwrap returns ErrInvalidOptions.
func (e *OptionError) Unwrap() error { return ErrInvalidOptions }

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

// Reference is the trusted definition of a spec's expected output. The oracle
// evaluates it (Int/IntN, Float64/Float64N) in its own process, where the
// artifact cannot reach it; GoExpr and PyExpr are the same definition as
// source for the generated drivers' own first-pass comparison. The oracle's
// evaluation is authoritative: a driver report whose failure counts disagree
// with it is rejected.
type Reference struct {
	// Int returns the expected output for the input of a one-argument int
	// domain. IntN, when set, is used instead.
	Int func(x int64) int64
	// Float64 returns the expected output for the input of a one-argument
	// float64 domain. Float64N, when set, is used instead.
	Float64 func(x float64) float64
	// IntN returns the expected output for the arguments (in parameter
	// order) of an int domain of any arity; required for two or more.
	IntN func(args []int64) int64
	// Float64N is IntN for float64 domains.
	Float64N func(args []float64) float64
	// GoExpr is a Go expression over the spec's parameter names, valid for
	// every domain type of the spec when the names are variables of that
	// type, e.g. "2 * x" or "min(max(x, -limit), limit)". Required for Go.
	GoExpr string
	// PyExpr is the same definition as a Python 3 expression over the
	// parameter names, e.g. "2 * x". Required for Python. It must give an int
	// for int arguments and a float for float arguments.
	PyExpr string
}

// intFunc returns the int reference over argument slices, or nil.
func (r Reference) intFunc() func([]int64) int64 {
	switch {
	case r.IntN != nil:
		return r.IntN
	case r.Int != nil:
		unary := r.Int
		return func(args []int64) int64 { return unary(args[0]) }
	}
	return nil
}

// float64Func returns the float64 reference over argument slices, or nil.
func (r Reference) float64Func() func([]float64) float64 {
	switch {
	case r.Float64N != nil:
		return r.Float64N
	case r.Float64 != nil:
		unary := r.Float64
		return func(args []float64) float64 { return unary(args[0]) }
	}
	return nil
}

// Target names the artifact file and function for one language.
type Target struct {
	// Language is LanguageGo or LanguagePython.
	Language string `json:"language"`
	// File is the default artifact file name in that language, e.g.
	// "double.go" or "double.py"; the oracle copies the artifact under this
	// name.
	File string `json:"file"`
	// Function is the function under test: a generic exported Go function
	// ("Double", instantiated once per domain type) or a Python module-level
	// function ("double").
	Function string `json:"function"`
}

// Spec describes one finite-domain oracle. It is a descriptor: adding an
// oracle is adding one value to [Specs].
//
// One Spec value is set up for one artifact language (Language, File,
// Function); Targets lists every language the spec supports, and
// [Spec.ForLanguage] returns the value set up for another one. The domains,
// the reference and the comparison rules are shared by all languages, so a Go
// and a Python artifact are judged against the same definition.
type Spec struct {
	// Name identifies the spec in reports, e.g. "double".
	Name string
	// Doc says in one sentence what the artifact must compute.
	Doc string
	// Language is the artifact language this value checks: LanguageGo or
	// LanguagePython.
	Language string
	// File is the default artifact file name in Language, e.g. "double.go";
	// the artifact is copied under this name next to the driver.
	File string
	// Function is the function under test in Language, e.g. "Double". A Go
	// driver instantiates it once per domain with the domain's type.
	Function string
	// Targets lists the file and function for every supported language;
	// empty for a spec of Language only.
	Targets []Target
	// Params names the function's parameters, in order, as GoExpr and PyExpr
	// use them; empty means the single parameter "x". Its length must equal
	// every domain's arity.
	Params []string
	// Domains lists the inputs, one per instantiation / input type.
	Domains []Domain
	// Reference defines the expected output.
	Reference Reference
	// SignedZero is SignedZeroExact (the default when empty) or
	// SignedZeroEqual.
	SignedZero string
	// Imports are the import paths (Go) or module names (Python) the
	// artifact may use; nil means DefaultImports() ("math"). Anything else is
	// refused before the artifact runs, with VerdictForbiddenImport.
	Imports []string
	// AnyImport lifts the static restrictions (imports; Go package-level
	// variables and init; Python attributes, module-level state, globals and
	// non-constant defaults). The built-in specs never set it; it exists to
	// exercise the oracle's run-time defenses (deadline, process group,
	// hashes, report checks) with artifacts that need those to attack them.
	AnyImport bool
}

// ParamNames returns Params, or ["x"] when it is empty. The slice is fresh.
func (s Spec) ParamNames() []string {
	if len(s.Params) == 0 {
		return []string{"x"}
	}
	return append([]string(nil), s.Params...)
}

// zeroEqual reports whether -0.0 and +0.0 match under the spec's rule.
func (s Spec) zeroEqual() bool { return s.SignedZero == SignedZeroEqual }

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
// Go or Python expression) are checked by [Check].
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
	if s.SignedZero != "" && s.SignedZero != SignedZeroExact && s.SignedZero != SignedZeroEqual {
		return fmt.Errorf("%w: spec %s: SignedZero %q (want %q or %q)", ErrInvalidSpec, s.Name, s.SignedZero, SignedZeroExact, SignedZeroEqual)
	}
	params := s.ParamNames()
	seen := map[string]bool{}
	for _, p := range params {
		if !isPortableIdentifier(p) {
			return fmt.Errorf("%w: spec %s: parameter %q is not an identifier valid in both Go and Python", ErrInvalidSpec, s.Name, p)
		}
		if seen[p] {
			return fmt.Errorf("%w: spec %s: parameter %q given twice", ErrInvalidSpec, s.Name, p)
		}
		seen[p] = true
	}
	for _, d := range s.Domains {
		if err := d.validate(); err != nil {
			return fmt.Errorf("spec %s: %w", s.Name, err)
		}
		if d.Arity() != len(params) {
			return fmt.Errorf("%w: spec %s: %s domain has %d arguments, the spec names %d parameters (%s)",
				ErrInvalidSpec, s.Name, d.Type, d.Arity(), len(params), strings.Join(params, ", "))
		}
		if d.Type == TypeInt && (s.Reference.IntN == nil && (s.Reference.Int == nil || d.Arity() != 1)) {
			return fmt.Errorf("%w: spec %s: int domain of %d arguments without Reference.Int (one argument) or Reference.IntN", ErrInvalidSpec, s.Name, d.Arity())
		}
		if d.Type == TypeFloat64 && (s.Reference.Float64N == nil && (s.Reference.Float64 == nil || d.Arity() != 1)) {
			return fmt.Errorf("%w: spec %s: float64 domain of %d arguments without Reference.Float64 (one argument) or Reference.Float64N", ErrInvalidSpec, s.Name, d.Arity())
		}
	}
	for _, t := range s.Targets {
		if t.Language == "" || t.File == "" || t.Function == "" {
			return fmt.Errorf("%w: spec %s: target %+v lacks a language, file or function", ErrInvalidSpec, s.Name, t)
		}
	}
	return nil
}

// ForLanguage returns a copy of s set up to check an artifact in language:
// Language, File and Function are taken from the matching entry of Targets.
// A spec without Targets supports only its own Language. It returns an error
// wrapping [ErrUnknownLanguage] when the spec has no target in language.
func (s Spec) ForLanguage(language string) (Spec, error) {
	if len(s.Targets) == 0 && language == s.Language {
		return s, nil
	}
	for _, t := range s.Targets {
		if t.Language == language {
			s.Language, s.File, s.Function = t.Language, t.File, t.Function
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("%w: spec %s has no %q target (it supports %s)", ErrUnknownLanguage, s.Name, language, strings.Join(s.Languages(), ", "))
}

// Languages returns the languages the spec supports, in Targets order, or
// its own Language when Targets is empty.
func (s Spec) Languages() []string {
	if len(s.Targets) == 0 {
		return []string{s.Language}
	}
	langs := make([]string, len(s.Targets))
	for i, t := range s.Targets {
		langs[i] = t.Language
	}
	return langs
}

// LanguageOf returns the artifact language of a file from its extension:
// ".go" is LanguageGo, ".py" is LanguagePython. Any other extension is an
// error wrapping [ErrUnknownLanguage].
func LanguageOf(path string) (string, error) {
	switch filepath.Ext(path) {
	case ".go":
		return LanguageGo, nil
	case ".py":
		return LanguagePython, nil
	}
	return "", fmt.Errorf("%w: cannot tell the language of %s from its extension (want .go or .py)", ErrUnknownLanguage, path)
}

// pythonKeywords is keyword.kwlist and keyword.softkwlist of Python 3.12
// (https://docs.python.org/3/reference/lexical_analysis.html#keywords),
// plus the driver's own reserved names.
var pythonKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
	"match": true, "case": true, "type": true, "_": true,
}

// isPortableIdentifier reports whether name is an ASCII identifier that is
// neither a Go nor a Python keyword, so it can name a parameter in both
// drivers.
func isPortableIdentifier(name string) bool {
	if name == "" || !token.IsIdentifier(name) || pythonKeywords[name] {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// intDomain and quarterDomain are the double and abs domains: every int in
// [-1024,1024] (2,049 inputs) and every quarter-step float64 in [-1024,1024]
// (8,193 inputs).
var (
	intDomain     = Domain{Type: TypeInt, Min: -1024, Max: 1024, Step: 1}
	quarterDomain = Domain{Type: TypeFloat64, Min: -1024, Max: 1024, Step: 0.25}
)

// DoubleSpec returns the "double" oracle, set up for Go: a generic Go
// function Double[T](x T) T (Python: double(x) in double.py) that returns
// 2*x, checked on every int in [-1024,1024] (2,049 inputs; Go as Double[int])
// and every quarter-step float in [-1024,1024] (8,193 inputs; Go as
// Double[float64]): 10,242 checks. The expected value is 2*x in the input's
// type, compared exactly; floats compare bit for bit, so the rule for
// negative zero is IEEE 754's: 2*(-0.0) is -0.0. (The quarter-step domain
// generates +0.0, not -0.0.) Use ForLanguage(LanguagePython) for Python.
func DoubleSpec() Spec {
	return Spec{
		Name:     "double",
		Doc:      "returns 2*x for every int in [-1024,1024] and every quarter-step float in [-1024,1024], of the input's type, compared exactly",
		Language: LanguageGo,
		File:     "double.go",
		Function: "Double",
		Targets: []Target{
			{Language: LanguageGo, File: "double.go", Function: "Double"},
			{Language: LanguagePython, File: "double.py", Function: "double"},
		},
		Domains: []Domain{intDomain, quarterDomain},
		Reference: Reference{
			Int:     func(x int64) int64 { return 2 * x },
			Float64: func(x float64) float64 { return 2 * x },
			GoExpr:  "2 * x",
			PyExpr:  "2 * x",
		},
	}
}

// AbsSpec returns the "abs" oracle, set up for Go: Abs[T](x T) T (Python:
// abs_value(x) in abs.py, named so that it does not shadow the builtin abs)
// returns |x| over the same 10,242 inputs as double. Signed zeros compare
// exactly: |+0.0| is +0.0.
func AbsSpec() Spec {
	return Spec{
		Name:     "abs",
		Doc:      "returns |x| for every int in [-1024,1024] and every quarter-step float in [-1024,1024], of the input's type, compared exactly",
		Language: LanguageGo,
		File:     "abs.go",
		Function: "Abs",
		Targets: []Target{
			{Language: LanguageGo, File: "abs.go", Function: "Abs"},
			{Language: LanguagePython, File: "abs.py", Function: "abs_value"},
		},
		Domains: []Domain{intDomain, quarterDomain},
		Reference: Reference{
			Int: func(x int64) int64 {
				if x < 0 {
					return -x
				}
				return x
			},
			Float64: math.Abs,
			GoExpr:  "max(x, -x)",
			PyExpr:  "abs(x)",
		},
	}
}

// ClampSpec returns the "clamp" oracle, set up for Go: a two-argument
// Clamp[T](x, limit T) T (Python: clamp(x, limit) in clamp.py) that returns x
// limited to [-limit, limit], checked on every int x in [-64,64] with every
// int limit in [0,48] (129 x 49 = 6,321 inputs) and every quarter-step float
// x in [-16,16] with every quarter-step limit in [0,12] (6,321 inputs):
// 12,642 checks. Because correct implementations may return -0.0 or +0.0 when
// limit is 0 and x < 0 (-limit is -0.0), signed zeros match each other
// (SignedZeroEqual).
func ClampSpec() Spec {
	return Spec{
		Name:     "clamp",
		Doc:      "returns x limited to [-limit, limit] for int x in [-64,64] by limit in [0,48] and quarter-step float x in [-16,16] by limit in [0,12]; -0.0 matches +0.0",
		Language: LanguageGo,
		File:     "clamp.go",
		Function: "Clamp",
		Targets: []Target{
			{Language: LanguageGo, File: "clamp.go", Function: "Clamp"},
			{Language: LanguagePython, File: "clamp.py", Function: "clamp"},
		},
		Params: []string{"x", "limit"},
		Domains: []Domain{
			{Type: TypeInt, Args: []Range{{Min: -64, Max: 64, Step: 1}, {Min: 0, Max: 48, Step: 1}}},
			{Type: TypeFloat64, Args: []Range{{Min: -16, Max: 16, Step: 0.25}, {Min: 0, Max: 12, Step: 0.25}}},
		},
		Reference: Reference{
			IntN:     func(a []int64) int64 { return min(max(a[0], -a[1]), a[1]) },
			Float64N: func(a []float64) float64 { return math.Min(math.Max(a[0], -a[1]), a[1]) },
			GoExpr:   "min(max(x, -limit), limit)",
			PyExpr:   "min(max(x, -limit), limit)",
		},
		SignedZero: SignedZeroEqual,
	}
}

// Specs returns the built-in specs, each set up for Go, a fresh slice on
// every call.
func Specs() []Spec {
	return []Spec{DoubleSpec(), AbsSpec(), ClampSpec()}
}

// SpecForFile returns the built-in spec name set up for the artifact at path
// (Spec.ForLanguage), the language coming from path's extension (LanguageOf).
// Errors: ErrInvalidSpec (wrapped, naming the built-in specs) for a name with
// no built-in spec; ErrNoArtifact when path names no regular file;
// ErrUnknownLanguage for an extension of no supported language or a language
// the spec has no target in; the stat's error when path cannot be looked up.
func SpecForFile(name, path string) (Spec, error) {
	spec, ok := SpecByName(name)
	if !ok {
		var names []string
		for _, s := range Specs() {
			names = append(names, s.Name)
		}
		return Spec{}, fmt.Errorf("%w: no built-in spec %q (built-in: %s)", ErrInvalidSpec, name, strings.Join(names, ", "))
	}
	if err := artifactFile(path); err != nil {
		return Spec{}, err
	}
	lang, err := LanguageOf(path)
	if err != nil {
		return Spec{}, err
	}
	return spec.ForLanguage(lang)
}

// artifactFile returns nil when path names a regular file, ErrNoArtifact when
// it names nothing or something else, and the stat's error otherwise.
func artifactFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist (%w)", ErrNoArtifact, path, err)
	case err != nil:
		return fmt.Errorf("oracle: artifact %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrNoArtifact, path)
	}
	return nil
}

// SpecByName returns the built-in spec with the given name (set up for Go),
// and false when there is none.
func SpecByName(name string) (Spec, bool) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}
