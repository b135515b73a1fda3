package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ExcludedByBuildContext is the load_errors kind of a package directory
// the build context excluded: it holds .go files, but build constraints
// (GOOS/GOARCH, build tags, `import "C"` with CGO_ENABLED=0, //go:build
// ignore) exclude all of them, so the go command's "./..." drops it
// without an error and it is never analysed. It counts against coverage.
const ExcludedByBuildContext = "excluded_by_build_context"

// excludedPackage is one package directory the build context excluded, as
// `go list -e -json DIR` describes it.
type excludedPackage struct {
	importPath string
	dir        string
	// reason is the go command's error ("build constraints exclude all Go
	// files in DIR"), or that sentence when it gave none.
	reason string
	// ignored are the .go files the build context excluded (IgnoredGoFiles).
	ignored []string
}

// message is the load_errors message: the go command's words, the count of
// ignored files and the settings that decide cgo, since cgo-only packages
// are the common case.
func (e excludedPackage) message(env goEnv, tags []string) string {
	return fmt.Sprintf("%s (%d ignored Go %s: %s; build context GOOS=%s GOARCH=%s CGO_ENABLED=%s tags=%q)",
		e.reason, len(e.ignored), pluralWord(len(e.ignored), "file"), strings.Join(e.ignored, ", "),
		env.GOOS, env.GOARCH, env.CGOEnabled, strings.Join(tags, ","))
}

func pluralWord(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}

// findExcluded returns the package directories under the recursive
// patterns ("./...", "./x/...") that hold .go files but that go/packages
// did not return, confirmed one by one by `go list -e -json` under the same
// environment and build flags: those it reports with no Go file to build
// and with IgnoredGoFiles. Directories the go command never matches are
// not walked: testdata, names starting with "." or "_", vendor, and nested
// modules (a directory with its own go.mod). Patterns that are not
// directories relative to dir (import paths, a workspace's "<module>/...")
// are not examined. Sorted by import path.
func findExcluded(ctx context.Context, spec loadSpec, res *loadResult) ([]excludedPackage, error) {
	loaded := map[string]bool{}
	for _, p := range res.all {
		if p.Dir != "" {
			loaded[filepath.Clean(p.Dir)] = true
		}
		for _, f := range p.GoFiles {
			loaded[filepath.Dir(f)] = true
		}
	}
	var candidates []string
	seen := map[string]bool{}
	for _, p := range spec.patterns {
		if !strings.HasSuffix(p, "/...") {
			continue
		}
		root, ok := patternRoot(spec.dir, p)
		if !ok {
			continue
		}
		if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
			continue // the go command reports the pattern as matching nothing
		}
		dirs, err := goFileDirs(root)
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			if !loaded[d] && !seen[d] {
				seen[d] = true
				candidates = append(candidates, d)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	args := []string{"list", "-e", "-json=ImportPath,Dir,GoFiles,CgoFiles,TestGoFiles,XTestGoFiles,IgnoredGoFiles,Error"}
	args = append(args, spec.buildFlags...)
	args = append(args, candidates...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = spec.dir, spec.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("indexer: list excluded package directories in %s: %w", spec.dir, ctx.Err())
		}
		return nil, fmt.Errorf("indexer: list excluded package directories in %s: %w: %s", spec.dir, err, strings.TrimSpace(stderr.String()))
	}
	type listed struct {
		ImportPath, Dir                                              string
		GoFiles, CgoFiles, TestGoFiles, XTestGoFiles, IgnoredGoFiles []string
		Error                                                        *struct{ Err string }
	}
	var found []excludedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("indexer: decode go list output in %s: %w", spec.dir, err)
		}
		if len(l.IgnoredGoFiles) == 0 || len(l.GoFiles)+len(l.CgoFiles)+len(l.TestGoFiles)+len(l.XTestGoFiles) > 0 {
			continue // not excluded: something else made go/packages skip it
		}
		e := excludedPackage{importPath: l.ImportPath, dir: l.Dir, ignored: slices.Sorted(slices.Values(l.IgnoredGoFiles))}
		if l.Error != nil && l.Error.Err != "" {
			e.reason = strings.TrimSpace(l.Error.Err)
		} else {
			e.reason = "build constraints exclude all Go files in " + l.Dir
		}
		found = append(found, e)
	}
	slices.SortFunc(found, func(a, b excludedPackage) int { return strings.Compare(a.importPath, b.importPath) })
	return found, nil
}

// goFileDirs returns the directories under root, root included, that hold
// a .go file, as the go command's "..." walks them (cmd/go/internal/modload
// matchPackages): it skips testdata, vendor, directories whose name starts
// with "." or "_", and nested modules. Sorted.
func goFileDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // an unreadable directory: the go command reports it itself
		}
		name := d.Name()
		if d.IsDir() {
			if path != root {
				if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") && d.Type().IsRegular() {
			dir := filepath.Clean(filepath.Dir(path))
			if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexer: walk %s for package directories: %w", root, err)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), nil
}

// addExcluded records the excluded packages as load errors without a
// package row, and counts them as matched packages that did not load.
func (g *graph) addExcluded(excluded []excludedPackage, env goEnv, tags []string) {
	for _, e := range excluded {
		g.loadErrors = append(g.loadErrors, loadErrorRow{goID: e.importPath, kind: ExcludedByBuildContext, message: e.message(env, tags)})
	}
	g.excluded = len(excluded)
}
