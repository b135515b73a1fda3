package indexer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/packages"
)

// goEnv is the part of `go env` that decides what gets loaded: the
// toolchain, the target and its architecture level (build constraints such
// as amd64.v3 read it), experiments, module mode and flags.
type goEnv struct {
	GoVersion    string `json:"GOVERSION"`
	GOOS         string `json:"GOOS"`
	GOARCH       string `json:"GOARCH"`
	CGOEnabled   string `json:"CGO_ENABLED"`
	GOFLAGS      string `json:"GOFLAGS"`
	GOWORK       string `json:"GOWORK"`
	GOROOT       string `json:"GOROOT"`
	GO111MODULE  string `json:"GO111MODULE"`
	GOEXPERIMENT string `json:"GOEXPERIMENT"`
	GOFIPS140    string `json:"GOFIPS140"`
	GOAMD64      string `json:"GOAMD64"`
	GOARM        string `json:"GOARM"`
	GOARM64      string `json:"GOARM64"`
	GO386        string `json:"GO386"`
	GOMIPS       string `json:"GOMIPS"`
	GOMIPS64     string `json:"GOMIPS64"`
	GOPPC64      string `json:"GOPPC64"`
	GORISCV64    string `json:"GORISCV64"`
	GOWASM       string `json:"GOWASM"`
	// The C toolchain and flags decide what cgo generates (which _Cfunc_
	// functions and C types exist), and so part of the graph of a cgo
	// package. The C headers they read are not hashed.
	CC          string `json:"CC"`
	CXX         string `json:"CXX"`
	CGOCFLAGS   string `json:"CGO_CFLAGS"`
	CGOCPPFLAGS string `json:"CGO_CPPFLAGS"`
	CGOCXXFLAGS string `json:"CGO_CXXFLAGS"`
	CGOFFLAGS   string `json:"CGO_FFLAGS"`
	CGOLDFLAGS  string `json:"CGO_LDFLAGS"`
	PKGCONFIG   string `json:"PKG_CONFIG"`
}

// goEnvNames are the variables goEnv holds, as `go env` names them.
var goEnvNames = []string{"GOVERSION", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOWORK", "GOROOT", "GO111MODULE",
	"GOEXPERIMENT", "GOFIPS140", "GOAMD64", "GOARM", "GOARM64", "GO386", "GOMIPS", "GOMIPS64", "GOPPC64", "GORISCV64", "GOWASM",
	"CC", "CXX", "CGO_CFLAGS", "CGO_CPPFLAGS", "CGO_CXXFLAGS", "CGO_FFLAGS", "CGO_LDFLAGS", "PKG_CONFIG"}

// readGoEnv runs `go env -json` in dir with env, the same way go/packages
// will run the go command, so the recorded toolchain is the one that loads.
func readGoEnv(ctx context.Context, dir string, env []string) (goEnv, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"env", "-json"}, goEnvNames...)...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return goEnv{}, fmt.Errorf("indexer: go env in %s: %w", dir, ctx.Err())
		}
		return goEnv{}, fmt.Errorf("indexer: go env in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var e goEnv
	if err := json.Unmarshal(out, &e); err != nil {
		return goEnv{}, fmt.Errorf("indexer: decode go env output in %s: %w", dir, err)
	}
	if e.GoVersion == "" {
		return goEnv{}, fmt.Errorf("indexer: go env in %s reported no GOVERSION", dir)
	}
	return e, nil
}

// loadMode is what Index asks go/packages for. NeedDeps is deliberately
// absent: dependencies are type-checked from export data, and the graph
// holds only root packages.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
	packages.NeedImports | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo |
	packages.NeedModule | packages.NeedForTest | packages.NeedEmbedFiles

// loadResult partitions the root packages go/packages returned.
type loadResult struct {
	dir string
	// roots are the packages to index, sorted by ID.
	roots []*packages.Package
	// unmatched are go/packages' stand-ins for patterns that resolved to no
	// package: no name, no files, only errors. Sorted by ID.
	unmatched []*packages.Package
	// testMains are the synthesized "p.test" packages, sorted by ID.
	testMains []*packages.Package
	// bodyEnds holds the original end of each function whose body was
	// stripped before type checking (incremental index), so that its span
	// is the same as in a full index.
	bodyEnds map[*ast.FuncDecl]token.Pos
	// all is what go/packages returned, in its order.
	all []*packages.Package
	// parsed holds the content of every file go/packages parsed, by its
	// cleaned file name, as it was when parsed.
	parsed map[string]*fileContent
}

// loadSpec is what to load and how: the same for the reuse key's listing
// and for the typed load.
type loadSpec struct {
	dir        string
	env        []string
	buildFlags []string
	patterns   []string
	tests      bool
	// strip, when not nil, lists files whose function bodies are dropped
	// before type checking (incremental index: their packages are not
	// re-indexed).
	strip *bodyStrip
}

// bodyStrip is what load needs to type-check files without their function
// bodies: which files, and the name of every package they import, so that
// an import only the bodies used can be blanked (stripBodies).
type bodyStrip struct {
	// files holds cleaned file names.
	files map[string]bool
	// names maps an import path, as written in the stripped files, to the
	// name of the package it resolves to, as the listing found it ("" when
	// the listing found different names for the path).
	names map[string]string
}

// LoadMode returns the go/packages mode Index loads with (tests decides
// NeedForTest). Exported so that a benchmark can time a bare packages.Load
// with the same mode, the floor of indexing.
func LoadMode(tests bool) packages.LoadMode {
	if !tests {
		return loadMode &^ packages.NeedForTest
	}
	return loadMode
}

// load runs go/packages and partitions its result.
func load(ctx context.Context, spec loadSpec) (*loadResult, error) {
	cfg := &packages.Config{
		Context:    ctx,
		Mode:       LoadMode(spec.tests),
		Dir:        spec.dir,
		Env:        spec.env,
		BuildFlags: spec.buildFlags,
		Tests:      spec.tests,
	}
	res := &loadResult{dir: spec.dir, parsed: map[string]*fileContent{}}
	if spec.strip != nil && len(spec.strip.files) > 0 {
		res.bodyEnds = map[*ast.FuncDecl]token.Pos{}
	}
	// Every file go/packages parses comes through here (concurrently): its
	// bytes are hashed as they were parsed, so the graph records the
	// content it was built from without reading the file again, and object
	// resolution (ast.Object, which nothing here reads and go/types does not
	// need) is skipped.
	var mu sync.Mutex
	cfg.ParseFile = func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
		f, err := parser.ParseFile(fset, filename, src, parser.AllErrors|parser.ParseComments|parser.SkipObjectResolution)
		sum := sha256.Sum256(src)
		c := &fileContent{data: src, sum: hex.EncodeToString(sum[:]), parsed: true, syntaxErrors: err != nil}
		var ends map[*ast.FuncDecl]token.Pos
		if f != nil && spec.strip != nil && spec.strip.files[filepath.Clean(filename)] {
			ends = stripBodies(f, spec.strip.names)
		}
		mu.Lock()
		res.parsed[filepath.Clean(filename)] = c
		maps.Copy(res.bodyEnds, ends)
		mu.Unlock()
		return f, err
	}
	dir, patterns := spec.dir, spec.patterns
	pkgs, err := packages.Load(cfg, patterns...)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("indexer: load %q in %s: %w", patterns, dir, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("indexer: load %q in %s: %w", patterns, dir, err)
	}
	res.all = pkgs
	for _, p := range pkgs {
		switch {
		case isUnmatchedPattern(p):
			res.unmatched = append(res.unmatched, p)
		case isTestMain(p):
			res.testMains = append(res.testMains, p)
		default:
			res.roots = append(res.roots, p)
		}
	}
	byID := func(a, b *packages.Package) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(res.roots, byID)
	slices.SortFunc(res.unmatched, byID)
	slices.SortFunc(res.testMains, byID)
	return res, nil
}

// isUnmatchedPattern reports whether p is go/packages' stand-in for a
// pattern the go command could not resolve (ID is the pattern itself).
func isUnmatchedPattern(p *packages.Package) bool {
	return p.Name == "" && len(p.GoFiles) == 0 && len(p.CompiledGoFiles) == 0 && len(p.Errors) > 0
}

// isTestMain reports whether p is the test main package the go command
// synthesizes for `go test` ("p.test", package main, whose files all live in
// the build cache rather than the package directory).
func isTestMain(p *packages.Package) bool {
	if p.Name != "main" || p.ForTest != "" || !strings.HasSuffix(p.PkgPath, ".test") || len(p.GoFiles) == 0 {
		return false
	}
	for _, f := range p.GoFiles {
		if filepath.Dir(f) == p.Dir {
			return false
		}
	}
	return true
}

// packageVariant classifies a root package: base, test (p compiled with its
// _test.go files), xtest (the external p_test package) or test_dependency
// (another package recompiled for p's test).
func packageVariant(p *packages.Package) string {
	switch {
	case p.ForTest == "":
		return "base"
	case p.PkgPath == p.ForTest:
		return "test"
	case p.PkgPath == p.ForTest+"_test":
		return "xtest"
	default:
		return "test_dependency"
	}
}

// stripBodies drops the bodies of f's functions and methods, except where
// go/types requires one (init, generic functions), so that type checking
// covers declarations only, and returns each stripped function's original
// end. An import that only the bodies used is renamed to _ so that it does
// not become an unused-import error. Whether the declarations use an import
// depends on its package's name, which names gives (import path -> name);
// for a path it lacks, the name is assumed from the path only where that is
// the convention's plain case (assumedPackageName), and otherwise the import
// is kept. Either mistake (a blanked import the declarations use: undefined;
// a kept one they do not: imported and not used) is a type error of a
// package that is not re-indexed, and Index then indexes in full.
func stripBodies(f *ast.File, names map[string]string) map[*ast.FuncDecl]token.Pos {
	ends := map[*ast.FuncDecl]token.Pos{}
	for _, imp := range f.Imports {
		if imp.Name != nil && imp.Name.Name == "." {
			// What a dot import provides cannot be told from syntax, so
			// whether the bodies alone used it cannot either: keep them.
			return ends
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil || fd.Type.TypeParams.NumFields() > 0 || (fd.Recv == nil && fd.Name.Name == "init") {
			continue
		}
		ends[fd] = fd.End()
		fd.Body = nil
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	for _, imp := range f.Imports {
		name := ""
		if imp.Name != nil {
			name = imp.Name.Name
		} else if path, err := strconv.Unquote(imp.Path.Value); err == nil {
			if n := names[path]; n != "" {
				name = n
			} else if n, ok := assumedPackageName(path); ok {
				name = n
			}
		}
		if name == "_" || name == "" || used[name] {
			continue
		}
		imp.Name = &ast.Ident{NamePos: imp.Path.Pos(), Name: "_"}
	}
	return ends
}

// assumedPackageName returns the name the package at import path has by
// the plain convention, its last path element (example.com/foo/v2 -> foo),
// and false where the convention needs a guess (gopkg.in/yaml.v3,
// github.com/openai/openai-go/v3, example.com/go-foo: the element is not an
// identifier, and package names there vary).
func assumedPackageName(path string) (string, bool) {
	parts := strings.Split(path, "/")
	last := parts[len(parts)-1]
	if len(parts) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = parts[len(parts)-2]
	}
	if !token.IsIdentifier(last) {
		return "", false
	}
	return last, true
}
