package oracle

import (
	"errors"
	"fmt"
	"go/token"
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
// IsPythonKeyword reports whether name is a Python 3.12 keyword or soft keyword (keyword.kwlist and
// keyword.softkwlist): a name that cannot be, or should not be, a Python function or module name.
func IsPythonKeyword(name string) bool { return pythonKeywords[name] }

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
