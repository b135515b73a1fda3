package indexer

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/tools/go/packages"
)

// keyFormat is the version of the stored key's layout (reuse_check's
// check_json). A database whose key has another layout is indexed again.
const keyFormat = 2

// Hashes the content key gives to what it could not hash.
const (
	// missing is the hash of a file or directory that does not exist.
	missing = "missing"
	// modifiedWhileIndexed is the hash of a file or directory modified
	// while the index read it: no content hashes to it.
	modifiedWhileIndexed = "modified while indexed"
)

// keyContext is what the content key hashes besides files: the schema,
// tool and enrichment versions, the directory, the build context (go env),
// the options and the VCS state.
type keyContext struct {
	SchemaVersion int      `json:"schema_version"`
	ToolVersion   string   `json:"tool_version"`
	EnrichID      string   `json:"enrich_id"`
	Dir           string   `json:"dir"`
	Env           goEnv    `json:"env"`
	Tags          []string `json:"tags"`
	Tests         bool     `json:"tests"`
	Patterns      []string `json:"patterns"`
	VCSRevision   string   `json:"vcs_revision"`
	VCSDirty      bool     `json:"vcs_dirty"`
}

// keyScope is where the content key looks, beside the files it hashes.
type keyScope struct {
	// Roots are the directories the patterns name, walked recursively
	// (absolute, cleaned, none inside another).
	Roots []string `json:"roots"`
	// Dirs are listed without descending: the directories of hashed files
	// that the walk of Roots does not list (outside Roots, or behind a
	// symbolic link, which the walk does not follow and the go command
	// does for a directory an import path names), and those where the go
	// command would find an import that resolves to no directory yet.
	Dirs []string `json:"dirs"`
}

// keyInputs is what the content key hashes.
type keyInputs struct {
	Context keyContext `json:"context"`
	// Files maps each hashed file to its SHA-256 hex, missing or
	// modifiedWhileIndexed.
	Files map[string]string `json:"files"`
	// Tree maps each directory listed to the SHA-256 hex of its entries'
	// names and types, missing or modifiedWhileIndexed.
	Tree map[string]string `json:"tree"`
}

// contentKey is the content key of an index and what it is computed from,
// as stored with the database (reuse_check).
type contentKey struct {
	Format int       `json:"format"`
	Scope  keyScope  `json:"scope"`
	Inputs keyInputs `json:"inputs"`
	// None says why the index has no key ("" when it has one): a database
	// without one is never reused.
	None string `json:"none,omitempty"`
}

// hash returns the key: the SHA-256 hex of its inputs' JSON encoding (map
// keys sorted), or "" when there is none.
func (k *contentKey) hash() (string, error) {
	if k.None != "" {
		return "", nil
	}
	return hashJSON(k.Inputs)
}

func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("indexer: encode content key: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// keyOfLoad computes the content key of what res was loaded from, after
// the graph is built (every file read). It hashes every file the go
// command's listing named that can change the graph: the Go, other
// (C, assembly, ...), build-excluded and embedded files of every package
// whose module has no version (the matched modules, workspace and
// directory-replaced modules), the vendored files and vendor/modules.txt,
// go.mod and go.sum of those modules, go.work and go.work.sum; the go.mod
// files the go command looks for above kc.Dir and each root; and the
// entries of every directory under roots and of the directories of hashed
// files. A file go/packages parsed is hashed from the bytes it parsed
// (those the graph and the files table describe); the others from disk.
// Standard library packages are covered by the Go version, versioned
// modules by go.mod and go.sum.
//
// Any file or directory the key covers that was modified between since
// (taken before the index read anything) and now gets the hash
// modifiedWhileIndexed, and is returned (sorted): what the graph took from
// it may be another content than the key describes, and the next run must
// not reuse the graph. The key has no hash (None) when roots is nil
// (patterns that are not directories: they can match packages anywhere)
// or an import resolved to no directory outside every module the key
// covers.
func keyOfLoad(ctx context.Context, res *loadResult, kc keyContext, roots []string, dbPath string, since time.Time) (contentKey, []string, error) {
	k := contentKey{Format: keyFormat, Inputs: keyInputs{Context: kc}}
	if roots == nil {
		k.None = fmt.Sprintf("patterns %q are not all directories under %s, and can match packages anywhere", kc.Patterns, kc.Dir)
		return k, nil, nil
	}
	files, candidates, none := listedFiles(res.all, kc.Env)
	if none != "" {
		k.None = none
		return k, nil, nil
	}
	k.Scope = scopeOf(roots, slices.Collect(maps.Keys(files)), candidates)
	// Hashed, but their directories not listed: above the roots they are
	// anything (/tmp), and a go.mod appearing there changes its hash.
	for _, m := range modFiles(kc.Dir, roots) {
		files[m] = true
	}
	var err error
	if k.Inputs.Files, err = hashFiles(ctx, slices.Sorted(maps.Keys(files)), res.parsed); err != nil {
		return contentKey{}, nil, err
	}
	if k.Inputs.Tree, err = listTree(ctx, k.Scope, dbPath); err != nil {
		return contentKey{}, nil, err
	}
	return k, k.markModified(since, time.Now()), nil
}

// current computes the key of the files and directories k covers as they
// are now, for the context kc: what an unchanged tree gives again.
func (k *contentKey) current(ctx context.Context, kc keyContext, dbPath string) (contentKey, error) {
	cur := contentKey{Format: keyFormat, Scope: k.Scope, Inputs: keyInputs{Context: kc}}
	var err error
	if cur.Inputs.Files, err = hashFiles(ctx, slices.Sorted(maps.Keys(k.Inputs.Files)), nil); err != nil {
		return contentKey{}, err
	}
	if cur.Inputs.Tree, err = listTree(ctx, k.Scope, dbPath); err != nil {
		return contentKey{}, err
	}
	return cur, nil
}

// listedFiles returns the files of the packages go/packages returned
// (roots, and their dependencies through Imports) that the key hashes, and
// the directories where the go command would find each import that
// resolved to no directory. none is not "" when such an import is outside
// every module whose files are hashed (GOPATH mode): where it would appear
// cannot be told.
func listedFiles(all []*packages.Package, ge goEnv) (files map[string]bool, candidates []string, none string) {
	files = map[string]bool{}
	if ge.GOWORK != "" && ge.GOWORK != "off" {
		files[ge.GOWORK] = true
		files[ge.GOWORK+".sum"] = true
	}
	isRoot := map[string]bool{}
	var vendorDirs []string
	for _, p := range all {
		isRoot[p.ID] = true
		if p.Module != nil && p.Module.Main && p.Module.Dir != "" {
			vendorDirs = append(vendorDirs, filepath.Join(p.Module.Dir, "vendor"))
		}
	}
	vendored := func(dir string) (string, bool) {
		for _, v := range vendorDirs {
			if isWithin(filepath.Clean(dir), v) {
				return v, true
			}
		}
		return "", false
	}
	addAll := func(p *packages.Package) {
		for _, f := range slices.Concat(p.GoFiles, p.OtherFiles, p.IgnoredFiles, p.EmbedFiles) {
			files[f] = true
		}
	}
	moduleDirs := map[string]string{} // module path -> directory, of modules whose files are hashed
	var unresolved []string
	placeholder := false
	packages.Visit(all, nil, func(p *packages.Package) {
		if p.PkgPath == "" && p.Name == "" && len(p.GoFiles) == 0 && len(p.Errors) == 0 {
			// go/packages documents the dependencies of a load without
			// NeedDeps as placeholders with an ID only (v0.52.0 gives them
			// in full): their files could not be hashed.
			placeholder = true
		}
		if isTestMain(p) {
			return // generated by the go command from test files hashed with their package
		}
		if !isRoot[p.ID] && len(p.Errors) > 0 && len(p.GoFiles)+len(p.OtherFiles)+len(p.IgnoredFiles) == 0 {
			unresolved = append(unresolved, cmp.Or(p.PkgPath, p.ID))
		}
		m := p.Module
		if m == nil {
			if len(p.Errors) > 0 || !isStd(p) {
				addAll(p)
			}
			return
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version != "" && !m.Main {
			// A vendored dependency has a version, but its files are the
			// ones in the vendor directory, which can be edited.
			if v, ok := vendored(p.Dir); ok {
				files[filepath.Join(v, "modules.txt")] = true
				addAll(p)
			}
			return
		}
		if m.GoMod != "" {
			files[m.GoMod] = true
			files[filepath.Join(filepath.Dir(m.GoMod), "go.sum")] = true
		}
		if p.Module.Path != "" && m.Dir != "" {
			moduleDirs[p.Module.Path] = m.Dir
		}
		addAll(p)
	})
	if placeholder {
		return nil, nil, "go/packages gave the dependencies without their files"
	}
	for _, path := range slices.Compact(slices.Sorted(slices.Values(unresolved))) {
		found := false
		for mpath, mdir := range moduleDirs {
			if rest, ok := strings.CutPrefix(path, mpath); ok && (rest == "" || rest[0] == '/') {
				candidates = append(candidates, filepath.Join(mdir, filepath.FromSlash(rest)))
				found = true
			}
		}
		for _, v := range vendorDirs {
			candidates = append(candidates, filepath.Join(v, filepath.FromSlash(path)))
		}
		if !found && len(moduleDirs) == 0 {
			return nil, nil, fmt.Sprintf("import %q resolves to no directory, and where the go command would find it cannot be told", path)
		}
	}
	return files, candidates, ""
}

// isStd reports whether p is a standard library package (no module, no
// dot in its first path element).
func isStd(p *packages.Package) bool {
	first, _, _ := strings.Cut(p.PkgPath, "/")
	return p.Module == nil && !strings.Contains(first, ".") && p.PkgPath != "command-line-arguments"
}

// modFiles returns where the go command looks for the go.mod that decides
// the module of dir and of each root: each one's go.mod and its parents',
// up to the first that exists. A go.mod appearing between a root and its
// module's moves the packages into another module.
func modFiles(dir string, roots []string) []string {
	mods := map[string]bool{}
	for _, start := range append([]string{filepath.Clean(dir)}, roots...) {
		for d := start; ; d = filepath.Dir(d) {
			m := filepath.Join(d, "go.mod")
			mods[m] = true
			if _, err := os.Lstat(m); err == nil || filepath.Dir(d) == d {
				break
			}
		}
	}
	return slices.Sorted(maps.Keys(mods))
}

// scopeOf returns the scope of a key over files, for roots: the
// directories of files the walk of roots does not list, and candidates.
func scopeOf(roots, files, candidates []string) keyScope {
	walked := map[string]bool{} // directory -> listed by the walk of roots
	var isWalked func(d, root string) bool
	isWalked = func(d, root string) bool {
		if d == root {
			return true
		}
		if w, ok := walked[d]; ok {
			return w
		}
		fi, err := os.Lstat(d)
		w := err == nil && fi.IsDir() && !isVCSDir(filepath.Base(d)) && isWalked(filepath.Dir(d), root)
		walked[d] = w
		return w
	}
	dirs := map[string]bool{}
	for _, c := range candidates {
		dirs[filepath.Clean(c)] = true
	}
	for _, p := range files {
		d := filepath.Dir(p)
		inside := false
		for _, r := range roots {
			if isWithin(d, r) {
				inside = isWalked(d, r)
				break
			}
		}
		if !inside {
			dirs[d] = true
		}
	}
	// A directory the walk lists needs no listing of its own.
	for d := range dirs {
		for _, r := range roots {
			if isWithin(d, r) && isWalked(d, r) {
				delete(dirs, d)
				break
			}
		}
	}
	return keyScope{Roots: roots, Dirs: slices.Sorted(maps.Keys(dirs))}
}
