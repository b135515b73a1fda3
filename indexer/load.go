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
	"os/exec"
	"path/filepath"
	"slices"
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
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "unsupported GOOS/GOARCH pair") {
			// The build context asked for (--goos, --goarch) is bad input, not a failure to run go.
			return goEnv{}, fmt.Errorf("%w: %s ('go tool dist list' names the pairs the go command supports)", ErrInvalidOptions, strings.TrimPrefix(msg, "go: "))
		}
		return goEnv{}, fmt.Errorf("indexer: go env in %s: %w: %s", dir, err, msg)
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
	// all is what go/packages returned, in its order.
	all []*packages.Package
	// parsed holds the content of every file go/packages parsed, by its
	// cleaned file name, as it was when parsed.
	parsed map[string]*fileContent
}

// loadSpec is what to load and how.
type loadSpec struct {
	dir        string
	env        []string
	buildFlags []string
	patterns   []string
	tests      bool
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
		mu.Lock()
		res.parsed[filepath.Clean(filename)] = c
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

// workspacePatterns expands the pattern "./..." in a go.work workspace into
// one "<module path>/..." pattern per workspace module, since "./..." alone
// matches only the packages of the module containing dir. Other patterns,
// and any pattern outside a workspace, are returned as given. roots are the
// directories the patterns match packages in, for the content key (a
// workspace's "./..." matches in its modules' directories); nil when some
// pattern is not a directory relative to dir (an import path, "std",
// "all": it can match packages anywhere).
func workspacePatterns(ctx context.Context, dir string, env []string, ge goEnv, patterns []string) (out, roots []string, err error) {
	type module struct{ Path, Dir string }
	var mods []module
	if ge.GOWORK != "" && ge.GOWORK != "off" && slices.Contains(patterns, "./...") {
		cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json")
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("indexer: list workspace modules in %s: %w", dir, ctx.Err())
			}
			return nil, nil, fmt.Errorf("indexer: list workspace modules in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
		}
		dec := json.NewDecoder(bytes.NewReader(stdout))
		for dec.More() {
			var m module
			if err := dec.Decode(&m); err != nil {
				return nil, nil, fmt.Errorf("indexer: decode workspace modules in %s: %w", dir, err)
			}
			mods = append(mods, m)
		}
		slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.Path, b.Path) })
	}
	relative := true
	for _, p := range patterns {
		if p == "./..." && mods != nil {
			for _, m := range mods {
				out = append(out, m.Path+"/...")
				roots = append(roots, filepath.Clean(m.Dir))
			}
			continue
		}
		out = append(out, p)
		if r, ok := patternRoot(dir, p); ok {
			roots = append(roots, r)
		} else {
			relative = false
		}
	}
	if !relative {
		return out, nil, nil
	}
	slices.Sort(roots)
	var outer []string
	for _, r := range roots {
		if len(outer) > 0 && isWithin(r, outer[len(outer)-1]) {
			continue
		}
		outer = append(outer, r)
	}
	return out, outer, nil
}

// patternRoot returns the directory a pattern relative to dir matches
// packages in (".", "./...", "./x/...", "../y"), and false for any other
// pattern.
func patternRoot(dir, p string) (string, bool) {
	if p != "." && p != ".." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") {
		return "", false
	}
	p = strings.TrimSuffix(p, "/...")
	if strings.Contains(p, "...") {
		return "", false // a wildcard inside a path element
	}
	return filepath.Join(dir, filepath.FromSlash(p)), true
}
