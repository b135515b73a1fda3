package metrics

import (
	"context"
	"fmt"
	"math"
)

// martin1994 is the source of the package metrics.
const martin1994 = "R. C. Martin, \"OO Design Quality Metrics: An Analysis of Dependencies\", 1994; " +
	"also \"Agile Software Development: Principles, Patterns, and Practices\", 2002, ch. 20"

// packageChoices are the choices shared by the package coupling metrics.
var packageChoices = []string{
	"A package is one go/packages package; only base variants are measured (a test variant or external test package is not a separate package of the design, and counting it would add import edges that do not exist in a build).",
	"Coupling counts packages, not types: Martin's \"classes outside the category\" become importing or imported packages.",
	"The build context recorded with every value (GOOS, GOARCH, CGO_ENABLED, tags) decides which files, and so which imports, exist.",
}

// packageFacts are the counts the package metrics share.
type packageFacts struct {
	ca, ce      map[string]int
	importersOK float64 // fraction of base packages loaded without errors
	bases       []string
}

func (in *Input) packageFacts() *packageFacts {
	f := &packageFacts{ca: map[string]int{}, ce: map[string]int{}}
	ok := 0
	for _, id := range in.PackageIDs {
		if p := in.Packages[id]; p.Variant == "base" {
			f.bases = append(f.bases, id)
			if p.OK {
				ok++
			}
		}
	}
	if len(f.bases) > 0 {
		f.importersOK = float64(ok) / float64(len(f.bases))
	}
	for _, e := range in.Edges["imports"] {
		src, ok := in.Packages[e.Src]
		if !ok || src.Variant != "base" || e.Src == e.Dst {
			continue
		}
		f.ce[e.Src]++
		if dst, ok := in.Packages[e.Dst]; ok && dst.Variant == "base" {
			f.ca[e.Dst]++
		}
	}
	return f
}

func okCoverage(p *Package) float64 {
	if p.OK {
		return 1
	}
	return 0
}

func afferentCoupling() *Descriptor {
	d := &Descriptor{
		Name: "ca", Title: "Afferent coupling (Ca)", Kind: Measured, Scope: ScopePackage, Integer: true,
		Method: Method{ID: "imports-afferent", Version: 1}, Source: martin1994,
		Doc: "The number of indexed packages (base variants) of the snapshot that import the package. " +
			"Importers outside the snapshot are unknown to it, so Ca is a lower bound for a library imported elsewhere.",
		Choices:  packageChoices,
		Limits:   []string{"Counts importers within the snapshot only: index every module that uses a package to see its full Ca."},
		Coverage: "the snapshot's base packages (any of them may import the package): the fraction that loaded without errors.",
	}
	return perBasePackage(d, func(in *Input, f *packageFacts, id string) (float64, float64) {
		return float64(f.ca[id]), f.importersOK
	})
}

// perBasePackage sets d.Compute to one measured value per base package: value returns it and its
// coverage.
func perBasePackage(d *Descriptor, value func(in *Input, f *packageFacts, id string) (v, coverage float64)) *Descriptor {
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		f := in.packageFacts()
		var out []Value
		for _, id := range f.bases {
			x, cov := value(in, f, id)
			v := d.measured(in, id, x)
			v.Coverage = cov
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func efferentCoupling() *Descriptor {
	d := &Descriptor{
		Name: "ce", Title: "Efferent coupling (Ce)", Kind: Measured, Scope: ScopePackage, Integer: true,
		Method: Method{ID: "imports-efferent", Version: 1}, Source: martin1994,
		Doc: "The number of distinct packages the package imports (standard library and other modules included), " +
			"as the go command reports them for the base variant after cgo processing: the imports of its compiled Go " +
			"files, i.e. `go list -compiled -json` Imports without the pseudo-package \"C\". For a package without cgo " +
			"files that equals `go list -json` Imports (cross-checked: docs/metrics-crosscheck.md); for a cgo package it " +
			"does not, since cgo's generated files import runtime/cgo, syscall and unsafe, which plain `go list -json` " +
			"does not list (it lists \"C\").",
		Choices: packageChoices,
		Limits: []string{
			"Packages cgo's generated code pulls in (runtime/cgo, syscall, unsafe) are imports of the compiled files, so they count: Ce of a cgo package agrees with `go list -compiled -json`, not with `go list -json`.",
			"Ce is of the build context indexed (GOOS, GOARCH, tags, CGO_ENABLED): a package whose every file the build context excludes (a cgo-only package with CGO_ENABLED=0) is not loaded by the go command's ./... and has no Ce value at all; index with that build context to measure it.",
		},
		Coverage: "the package: 1 when it loaded without errors, else 0. A package the build context excludes entirely is not an input: it has no value rather than a lower coverage.",
	}
	return perBasePackage(d, func(in *Input, f *packageFacts, id string) (float64, float64) {
		return float64(f.ce[id]), okCoverage(in.Packages[id])
	})
}

func instability() *Descriptor {
	d := &Descriptor{
		Name: "instability", Title: "Instability (I)", Kind: Measured, Scope: ScopePackage,
		Method: Method{ID: "martin-instability", Version: 2}, Source: martin1994,
		Doc: "I = Ce / (Ca + Ce): 0 for a package only depended upon, 1 for a package that only depends on others. " +
			"Unavailable when Ca + Ce = 0 (an isolated package has no instability; reporting 0 or 1 would invent one).",
		Choices:  packageChoices,
		Limits:   []string{"Inherits Ca's limit: importers outside the snapshot are unknown, which biases I towards 1 for libraries."},
		Coverage: "the lower of Ca's and Ce's, also when I is unavailable (Ca + Ce = 0 may hide an importer that did not load).",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		f := in.packageFacts()
		var out []Value
		for _, id := range f.bases {
			ca, ce := f.ca[id], f.ce[id]
			coverage := math.Min(f.importersOK, okCoverage(in.Packages[id]))
			if ca+ce == 0 {
				out = append(out, d.unavailable(in, id, "Ca + Ce = 0: the package neither imports nor is imported within the snapshot", coverage))
				continue
			}
			v := d.measured(in, id, float64(ce)/float64(ca+ce))
			v.Coverage = coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

// abstractnessOf returns A for one package, or a reason it is unavailable,
// and its coverage: 1 when the package loaded without errors and every
// named type of it has type information.
func (in *Input) abstractnessOf(pkgID string) (a, coverage float64, reason string) {
	named, ifaces, missing := 0, 0, 0
	for _, t := range in.Types {
		if t.PackageID != pkgID || t.TypeKind == "alias" {
			continue
		}
		if !t.Resolved || t.TypeKind == "unknown" {
			missing++
			continue
		}
		named++
		if t.TypeKind == "interface" {
			ifaces++
		}
	}
	coverage = 1
	if p := in.Packages[pkgID]; p != nil {
		coverage = okCoverage(p)
	}
	if missing > 0 {
		return 0, math.Min(coverage, float64(named)/float64(named+missing)), fmt.Sprintf("type information missing for %d of %d named types", missing, named+missing)
	}
	if named == 0 {
		return 0, coverage, "the package declares no named types"
	}
	return float64(ifaces) / float64(named), coverage, ""
}

func abstractness() *Descriptor {
	d := &Descriptor{
		Name: "abstractness", Title: "Abstractness (A)", Kind: Measured, Scope: ScopePackage,
		Method: Method{ID: "martin-abstractness-gotypes", Version: 2}, Source: martin1994,
		Doc: "A = named interface types / named types declared at package level, classified by the type checker " +
			"(go/types: a type is an interface when its underlying type is *types.Interface), never by names or syntax. " +
			"Unavailable when the package declares no named types or when type information is missing for any of them.",
		Choices: append(packageChoices[:len(packageChoices):len(packageChoices)],
			"Aliases are excluded from both counts (an alias declares no type).",
			"Constraint interfaces (type sets) count as interfaces: they are interface types.",
			"Types declared inside functions are not counted: they are not part of the package's API or design surface."),
		Limits: []string{"Go interfaces are often declared by consumers, so A of a provider package understates the abstraction it offers."},
		Coverage: "the package: 1 when it loaded without errors, else 0; at most the fraction of its named types with type information. " +
			"A package without named types has no A but nothing missing: coverage 1.",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		var out []Value
		for _, id := range in.packageFacts().bases {
			a, coverage, reason := in.abstractnessOf(id)
			if reason != "" {
				out = append(out, d.unavailable(in, id, reason, coverage))
				continue
			}
			v := d.measured(in, id, a)
			v.Coverage = coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func distance() *Descriptor {
	d := &Descriptor{
		Name: "distance", Title: "Distance from the main sequence (D)", Kind: Measured, Scope: ScopePackage,
		Method: Method{ID: "martin-distance", Version: 2}, Source: martin1994,
		Doc:      "D = |A + I - 1|, between 0 (on the main sequence) and 1. Unavailable when A or I is.",
		Choices:  packageChoices,
		Limits:   []string{"Inherits the limits of A and I."},
		Coverage: "the lower of A's and I's, also when D is unavailable.",
	}
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		f := in.packageFacts()
		var out []Value
		for _, id := range f.bases {
			a, aCoverage, reason := in.abstractnessOf(id)
			coverage := math.Min(aCoverage, math.Min(f.importersOK, okCoverage(in.Packages[id])))
			if reason != "" {
				out = append(out, d.unavailable(in, id, "A is unavailable: "+reason, coverage))
				continue
			}
			ca, ce := f.ca[id], f.ce[id]
			if ca+ce == 0 {
				out = append(out, d.unavailable(in, id, "I is unavailable: Ca + Ce = 0", coverage))
				continue
			}
			i := float64(ce) / float64(ca+ce)
			v := d.measured(in, id, math.Abs(a+i-1))
			v.Coverage = coverage
			out = append(out, v)
		}
		return out, nil
	}
	return d
}
