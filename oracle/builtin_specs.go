package oracle

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
)

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
