package indexer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
	"golang.org/x/tools/go/packages"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// ErrSchemaVersion is returned (wrapped in a *SchemaVersionError) when a
// graph database was written with a schema this build does not read.
var ErrSchemaVersion = errors.New("indexer: unsupported graph database schema version")

// SchemaVersionError names the versions of a refused graph database.
type SchemaVersionError struct {
	// Path is the database file.
	Path string
	// Found is the database's PRAGMA user_version.
	Found int
	// Supported is SchemaVersion.
	Supported int
}

func (e *SchemaVersionError) Error() string {
	rel := "older"
	if e.Found > e.Supported {
		rel = "newer"
	}
	return fmt.Sprintf("graph database %s has schema version %d, %s than the version %d this assay reads; re-index it with this assay (or use the assay that wrote it)",
		e.Path, e.Found, rel, e.Supported)
}

// Unwrap makes errors.Is(err, ErrSchemaVersion) hold.
func (e *SchemaVersionError) Unwrap() error { return ErrSchemaVersion }

// OpenDatabase opens a graph database read-only and checks that it is one
// and its schema version. Errors: a wrapped os error when the file is
// missing; ErrNotGraphDatabase (wrapped, naming the path) when the file is
// not SQLite or has no snapshots table (every graph database has one, at
// every schema version); a *SchemaVersionError (errors.Is
// ErrSchemaVersion) when its schema is not SchemaVersion; ErrHotJournal
// (wrapped) when another program's rollback journal lies next to it; a
// wrapped SQLite error when it cannot be read. The caller closes the
// *sql.DB. Safe for concurrent use like any *sql.DB.
func OpenDatabase(ctx context.Context, path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("indexer: no graph database at %s (write one with 'assay index', or name it with --db or --out): %w", path, err)
		}
		return nil, fmt.Errorf("indexer: open graph database: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	// SQLite resolves a symbolic link to the database and looks for the
	// journal beside the file it names.
	resolved := abs
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		resolved = r
	}
	if err := checkNoHotJournal(resolved); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=ro&_query_only=1"))
	if err != nil {
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	not, err := notGraphDatabase(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("indexer: open graph database %s: %w", path, err)
	}
	if not != "" {
		db.Close()
		return nil, fmt.Errorf("%w: %s %s (assay index did not write it)", ErrNotGraphDatabase, path, not)
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("indexer: read schema version of %s: %w", path, err)
	}
	if v != SchemaVersion {
		db.Close()
		return nil, &SchemaVersionError{Path: path, Found: v, Supported: SchemaVersion}
	}
	return db, nil
}

// ReadSnapshot returns the snapshot recorded in the graph database at path
// (DBSHA256 is the file's current SHA-256). Errors as OpenDatabase, and a
// wrapped error when the snapshot row is missing or malformed.
func ReadSnapshot(ctx context.Context, path string) (Snapshot, error) {
	db, err := OpenDatabase(ctx, path)
	if err != nil {
		return Snapshot{}, err
	}
	defer db.Close()
	var (
		s                       Snapshot
		modules, patterns, tags string
		rev, tool               sql.NullString
		dirty                   sql.NullInt64
		tests                   int
		c                       = &s.Counts
		matched, ok             int
	)
	err = db.QueryRowContext(ctx, `SELECT id, root_dir, module_paths, vcs_revision, vcs_dirty, go_version, goos, goarch,
		cgo_enabled, tool_version, tests, patterns, build_tags, input_key, config_key, coverage, nodes, edges, packages, files, types,
		funcs, methods, imports, load_errors, packages_with_errors, packages_ill_typed, unmatched_patterns,
		packages_matched, packages_ok FROM snapshots`).Scan(
		&s.ID, &s.Dir, &modules, &rev, &dirty, &s.GoVersion, &s.GOOS, &s.GOARCH, &s.CGOEnabled, &tool, &tests,
		&patterns, &tags, &s.InputKey, &s.ConfigKey, &s.Coverage, &c.Nodes, &c.Edges, &c.Packages, &c.Files, &c.Types, &c.Funcs,
		&c.Methods, &c.Imports, &c.LoadErrors, &c.PackagesWithErrors, &c.PackagesIllTyped, &c.UnmatchedPatterns,
		&matched, &ok)
	if err != nil {
		return Snapshot{}, fmt.Errorf("indexer: read snapshot of %s: %w", path, err)
	}
	s.VCSRevision, s.VCSDirty = rev.String, dirty.Valid && dirty.Int64 == 1
	s.ToolVersion, s.Tests = tool.String, tests == 1
	for _, f := range []struct {
		raw string
		dst *[]string
	}{{modules, &s.ModulePaths}, {patterns, &s.Patterns}, {tags, &s.Tags}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return Snapshot{}, fmt.Errorf("indexer: decode snapshot of %s: %w", path, err)
		}
	}
	s.DBPath = path
	f, err := os.Open(path)
	if err != nil {
		return Snapshot{}, fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Snapshot{}, fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	s.DBSHA256 = hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// workspacePatterns expands the pattern "./..." in a go.work workspace into
// one "<module path>/..." pattern per workspace module, since "./..." alone
// matches only the packages of the module containing dir. Other patterns,
// and any pattern outside a workspace, are returned as given.
func workspacePatterns(ctx context.Context, dir string, env []string, ge goEnv, patterns []string) ([]string, error) {
	if ge.GOWORK == "" || ge.GOWORK == "off" || !slices.Contains(patterns, "./...") {
		return patterns, nil
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json")
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("indexer: list workspace modules in %s: %w", dir, ctx.Err())
		}
		return nil, fmt.Errorf("indexer: list workspace modules in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var mods []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct{ Path string }
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("indexer: decode workspace modules in %s: %w", dir, err)
		}
		mods = append(mods, m.Path+"/...")
	}
	slices.Sort(mods)
	var outPatterns []string
	for _, p := range patterns {
		if p == "./..." {
			outPatterns = append(outPatterns, mods...)
		} else {
			outPatterns = append(outPatterns, p)
		}
	}
	return outPatterns, nil
}

// contextInputs are what both reuse keys hash first: the schema, tool and
// enrichment versions, the build context, the options and the VCS state.
// Embedded, their fields encode at the top level of each key's JSON.
type contextInputs struct {
	SchemaVersion int      `json:"schema_version"`
	ToolVersion   string   `json:"tool_version"`
	EnrichID      string   `json:"enrich_id"`
	Env           goEnv    `json:"env"`
	Tags          []string `json:"tags"`
	Tests         bool     `json:"tests"`
	Patterns      []string `json:"patterns"`
	VCSRevision   string   `json:"vcs_revision"`
	VCSDirty      bool     `json:"vcs_dirty"`
}

// contextOf gathers the contextInputs of one Index call.
func contextOf(ge goEnv, vcs vcsState, opts Options, tags []string, spec loadSpec) contextInputs {
	return contextInputs{
		SchemaVersion: SchemaVersion, ToolVersion: opts.ToolVersion, EnrichID: opts.EnrichID, Env: ge, Tags: tags,
		Tests: spec.tests, Patterns: spec.patterns, VCSRevision: vcs.revision, VCSDirty: vcs.dirty,
	}
}

// keyInputs is what the reuse key hashes.
type keyInputs struct {
	contextInputs
	Packages []string          `json:"packages"`
	Files    map[string]string `json:"files"`
	Modules  []string          `json:"modules"`
	// Modified are the files modified while an index read them (see
	// keys.markModified), sorted; empty otherwise.
	Modified []string `json:"modified,omitempty"`
}

// reuseKey lists the matched packages and their dependencies with the go
// command (no type checking) and hashes what decides the index: the build
// context and options, the VCS state, the SHA-256 of every file of every
// package whose module has no version (the matched modules, workspace and
// replaced modules), the path@version of versioned modules, and go.mod and
// go.sum of the modules involved. Standard library packages are covered by
// the Go version.
//
// When every pattern is relative to spec.dir, it also computes the
// file-system key over the files the listing hashed (see fsCheck), stored
// with the database so that an unchanged re-run can skip the listing.
func reuseKey(ctx context.Context, spec loadSpec, ge goEnv, vcs vcsState, opts Options, tags []string, dbPath string) (keys, error) {
	in, l, err := reuseKeyInputs(ctx, spec, ge, vcs, opts, tags)
	if err != nil {
		return keys{}, err
	}
	return keysOf(ctx, in, l, spec, ge, vcs, opts, tags, dbPath)
}

// reuseKeyFromLoad is reuseKey computed from the typed load instead of a
// listing of its own: the same go command listing (-deps, -test) reached
// go/packages, whose dependencies are reachable through the roots'
// Imports with the fields the key reads, and the files it parsed are
// hashed from the bytes it parsed. It returns false when a dependency is a
// placeholder (an ID only), as go/packages documents NeedImports without
// NeedDeps; then the caller lists with reuseKey.
func reuseKeyFromLoad(ctx context.Context, res *loadResult, spec loadSpec, ge goEnv, vcs vcsState, opts Options, tags []string, dbPath string) (keys, bool, error) {
	complete := true
	packages.Visit(res.all, nil, func(p *packages.Package) {
		if p.PkgPath == "" && p.Name == "" && len(p.GoFiles) == 0 && len(p.Errors) == 0 {
			complete = false
		}
	})
	if !complete {
		return keys{}, false, nil
	}
	in, l, err := keyInputsOf(res.all, res.parsed, spec, ge, vcs, opts, tags)
	if err != nil {
		return keys{}, false, err
	}
	k, err := keysOf(ctx, in, l, spec, ge, vcs, opts, tags, dbPath)
	return k, err == nil, err
}

// keysOf hashes the key inputs into keys.
func keysOf(ctx context.Context, in keyInputs, l *listing, spec loadSpec, ge goEnv, vcs vcsState, opts Options, tags []string, dbPath string) (keys, error) {
	var err error
	k := keys{listing: l, inputs: in}
	if k.input, err = hashJSON(in); err != nil {
		return keys{}, err
	}
	if roots, ok := fsRoots(spec.dir, spec.patterns); ok && !l.unresolved {
		check := newFSCheck(spec.dir, roots, slices.Collect(maps.Keys(in.Files)))
		var fsIn fsKeyInputs
		if k.fs, fsIn, err = fsKeyWithInputs(ctx, fsBase(ge, vcs, opts, tags, spec), check, dbPath, in.Files); err != nil {
			return keys{}, err
		}
		k.check = &check
		k.fsInputs = &fsIn
	}
	k.inputs.Files = maps.Clone(in.Files)
	if k.config, err = configKey(in, l); err != nil {
		return keys{}, err
	}
	return k, nil
}

// configKey hashes in without what an incremental index can absorb: the
// contents of the matched packages' Go files (the plan compares them
// package by package), the package list and the VCS state. The contents
// of every other hashed file stay in: a dependency no pattern matches
// (vendored, replaced by a directory, a package of the main module or of
// a workspace module outside the patterns), go.mod, go.sum, go.work, the
// matched packages' C files. The plan cannot tell which kept package's
// body relations such a change invalidates (a dependency's struct that
// became an interface turns a kept call into a dynamic call), so it
// makes the index full.
func configKey(in keyInputs, l *listing) (string, error) {
	matched := map[string]bool{}
	for _, lp := range l.roots {
		for f := range lp.files {
			matched[f] = true
		}
	}
	files := map[string]string{}
	for p, sum := range in.Files {
		if !matched[filepath.Clean(p)] {
			files[p] = sum
		}
	}
	in.Files, in.Packages, in.VCSRevision, in.VCSDirty = files, nil, "", false
	return hashJSON(in)
}

// keys are the reuse key, the configuration key and the listing they were
// computed from, and the file-system key with its check (nil when the
// patterns are not all relative to the directory).
type keys struct {
	input, config string
	listing       *listing
	fs            string
	check         *fsCheck
	// inputs and fsInputs are what input and fs hash.
	inputs   keyInputs
	fsInputs *fsKeyInputs
}

// alignWith makes the keys describe the file contents the graph was built
// from. The keys hash the files while go/packages parses them; a file
// that changed in between has one content in the key and another in the
// graph, and a later run that finds the key's content on disk would reuse
// a graph of other code. Every hashed file that go/packages parsed takes
// the SHA-256 of the bytes it parsed (parsed, by cleaned path), and the
// keys are hashed again when one differed. It returns the paths that
// differed, sorted.
func (k *keys) alignWith(parsed map[string]*fileContent) ([]string, error) {
	changed := map[string]bool{}
	align := func(files map[string]string) {
		for p, sum := range files {
			if c, ok := parsed[filepath.Clean(p)]; ok && c.sum != sum {
				files[p] = c.sum
				changed[p] = true
			}
		}
	}
	align(k.inputs.Files)
	if k.fsInputs != nil {
		align(k.fsInputs.Files)
	}
	if len(changed) == 0 {
		return nil, nil
	}
	if err := k.rehash(); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(changed)), nil
}

// rehash computes the input, configuration and file-system keys again
// from their inputs.
func (k *keys) rehash() error {
	var err error
	if k.input, err = hashJSON(k.inputs); err != nil {
		return err
	}
	if k.config, err = configKey(k.inputs, k.listing); err != nil {
		return err
	}
	if k.fsInputs != nil {
		if k.fs, err = hashJSON(*k.fsInputs); err != nil {
			return err
		}
	}
	return nil
}

// modifiedWhileIndexed is the hash in the keys of a file modified while
// the index read it: no content hashes to it.
const modifiedWhileIndexed = "modified while indexed"

// markModified finds the files the keys hashed from disk rather than from
// the bytes go/packages parsed (parsed, by cleaned path) — cgo source
// files, C, embedded and build-excluded files, go.mod, the files of
// dependencies type-checked from export data — that were modified (or
// removed) between since, taken before the load, and now. What the graph
// took from such a file (the types of cgo's output of it, a dependency's
// export data, its declarations read after the load) may be of another
// content than the keys hashed, and nothing tells which. Each takes the
// hash modifiedWhileIndexed and is listed in the inputs, which changes
// the configuration key too: the next run neither reuses the graph nor
// keeps its relations, but indexes in full. A modification time after
// now (a clock ahead of this one) is not taken for a modification. It
// returns the paths marked, sorted.
func (k *keys) markModified(parsed map[string]*fileContent, since time.Time) ([]string, error) {
	now := time.Now()
	modified := map[string]bool{}
	checked := map[string]bool{}
	mark := func(files map[string]string) {
		for p, sum := range files {
			if sum == "missing" || sum == modifiedWhileIndexed {
				continue
			}
			if _, ok := parsed[filepath.Clean(p)]; ok {
				continue
			}
			if !checked[p] {
				checked[p] = true
				fi, err := os.Stat(p)
				modified[p] = err != nil || (!fi.ModTime().Before(since) && !fi.ModTime().After(now))
			}
			if modified[p] {
				files[p] = modifiedWhileIndexed
			}
		}
	}
	mark(k.inputs.Files)
	if k.fsInputs != nil {
		mark(k.fsInputs.Files)
	}
	var paths []string
	for p, m := range modified {
		if m {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	slices.Sort(paths)
	k.inputs.Modified = slices.Compact(slices.Sorted(slices.Values(append(k.inputs.Modified, paths...))))
	if err := k.rehash(); err != nil {
		return nil, err
	}
	return paths, nil
}

// fsBase is the part of the file-system key that is not read from files.
func fsBase(ge goEnv, vcs vcsState, opts Options, tags []string, spec loadSpec) fsKeyInputs {
	return fsKeyInputs{contextInputs: contextOf(ge, vcs, opts, tags, spec)}
}

func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("indexer: encode reuse key: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// listing is the go command's view of the root packages, without types.
type listing struct {
	roots map[string]*listedPackage
	// unresolved reports an import the go command found no directory
	// for. Where it would find one if created cannot be told from the
	// listing, so the file-system check does not apply.
	unresolved bool
	// importers maps a package ID to the IDs of the packages importing
	// it, roots or not.
	importers map[string][]string
	// names maps each import path the roots' files write to the name of
	// the package it resolves to ("" when it resolves to packages of
	// different names, or to one the go command could not name): what
	// stripBodies needs to tell which imports the declarations use.
	names map[string]string
}

// listedPackage is one root package of the listing.
type listedPackage struct {
	id, unit string
	files    map[string]string // GoFiles: path -> SHA-256 hex
	imports  []string          // package IDs
}

// unitOf is the import path a package variant is re-indexed with: an
// external test package belongs to the package it tests.
func unitOf(pkgPath, forTest string) string {
	if forTest != "" && pkgPath == forTest+"_test" {
		return forTest
	}
	return pkgPath
}

// reuseKeyInputs gathers what reuseKey hashes.
func reuseKeyInputs(ctx context.Context, spec loadSpec, ge goEnv, vcs vcsState, opts Options, tags []string) (keyInputs, *listing, error) {
	cfg := &packages.Config{
		Context:    ctx,
		Mode:       packages.NeedName | packages.NeedFiles | packages.NeedModule | packages.NeedImports | packages.NeedDeps | packages.NeedEmbedFiles | packages.NeedForTest,
		Dir:        spec.dir,
		Env:        spec.env,
		BuildFlags: spec.buildFlags,
		Tests:      spec.tests,
	}
	roots, err := packages.Load(cfg, spec.patterns...)
	if err != nil {
		if ctx.Err() != nil {
			return keyInputs{}, nil, fmt.Errorf("indexer: list %q in %s: %w", spec.patterns, spec.dir, ctx.Err())
		}
		return keyInputs{}, nil, fmt.Errorf("indexer: list %q in %s: %w", spec.patterns, spec.dir, err)
	}
	return keyInputsOf(roots, nil, spec, ge, vcs, opts, tags)
}

// keyInputsOf gathers what reuseKey hashes from a load's result: roots as
// go/packages returned them, with their dependencies reachable through
// Imports (with names, files, embedded files and modules). known, when not
// nil, holds SHA-256 hex by cleaned path for files already hashed (the
// bytes go/packages parsed); other files are read.
func keyInputsOf(roots []*packages.Package, known map[string]*fileContent, spec loadSpec, ge goEnv, vcs vcsState, opts Options, tags []string) (keyInputs, *listing, error) {
	in := keyInputs{contextInputs: contextOf(ge, vcs, opts, tags, spec), Files: map[string]string{}}
	in.Env.GOWORK = "" // the workspace file's content is hashed below; its location is not an input
	modules := map[string]bool{}
	isRoot := map[string]bool{}
	for _, p := range roots {
		isRoot[p.ID] = true
	}
	unresolved := false
	importers := map[string][]string{}
	var hashErr error
	hash := func(path string) {
		if _, done := in.Files[path]; done || hashErr != nil {
			return
		}
		if c, ok := known[filepath.Clean(path)]; ok {
			in.Files[path] = c.sum
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				in.Files[path] = "missing"
				return
			}
			hashErr = fmt.Errorf("indexer: hash %s: %w", path, err)
			return
		}
		sum := sha256.Sum256(b)
		in.Files[path] = hex.EncodeToString(sum[:])
	}
	if ge.GOWORK != "" && ge.GOWORK != "off" {
		hash(ge.GOWORK)
		hash(ge.GOWORK + ".sum")
	}
	// A vendored dependency has a module version, but its files are the
	// ones in the vendor directory, which can be edited: they are hashed,
	// with vendor/modules.txt.
	var vendorDirs []string
	for _, p := range roots {
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
	packages.Visit(roots, nil, func(p *packages.Package) {
		for _, imp := range p.Imports {
			importers[imp.ID] = append(importers[imp.ID], p.ID)
		}
		m := p.Module
		if isTestMain(p) {
			// Generated by the go command (in its build cache) from the
			// test files, which are hashed with their package.
			in.Packages = append(in.Packages, p.ID)
			return
		}
		if !isRoot[p.ID] && len(p.Errors) > 0 && len(p.GoFiles)+len(p.OtherFiles)+len(p.IgnoredFiles) == 0 {
			unresolved = true
		}
		if m == nil {
			if len(p.Errors) > 0 || !isStd(p) {
				in.Packages = append(in.Packages, p.ID)
				for _, f := range slices.Concat(p.GoFiles, p.OtherFiles, p.IgnoredFiles, p.EmbedFiles) {
					hash(f)
				}
			}
			return
		}
		if m.Replace != nil {
			m = m.Replace
		}
		if m.Version != "" && !m.Main {
			modules[m.Path+"@"+m.Version] = true
			if v, ok := vendored(p.Dir); ok {
				hash(filepath.Join(v, "modules.txt"))
				for _, f := range slices.Concat(p.GoFiles, p.OtherFiles, p.IgnoredFiles, p.EmbedFiles) {
					hash(f)
				}
			}
			return
		}
		in.Packages = append(in.Packages, p.ID)
		if m.GoMod != "" {
			hash(m.GoMod)
			hash(filepath.Join(filepath.Dir(m.GoMod), "go.sum"))
		}
		for _, f := range slices.Concat(p.GoFiles, p.OtherFiles, p.IgnoredFiles, p.EmbedFiles) {
			hash(f)
		}
	})
	if hashErr != nil {
		return keyInputs{}, nil, hashErr
	}
	for m := range modules {
		in.Modules = append(in.Modules, m)
	}
	slices.Sort(in.Modules)
	slices.Sort(in.Packages)
	l := &listing{roots: map[string]*listedPackage{}, unresolved: unresolved, importers: importers, names: map[string]string{}}
	for _, p := range roots {
		if isUnmatchedPattern(p) || isTestMain(p) {
			continue
		}
		for path, imp := range p.Imports {
			if n, seen := l.names[path]; !seen {
				l.names[path] = imp.Name
			} else if n != imp.Name {
				l.names[path] = ""
			}
		}
		lp := &listedPackage{id: p.ID, unit: unitOf(p.PkgPath, p.ForTest), files: map[string]string{}}
		for _, f := range p.GoFiles {
			lp.files[filepath.Clean(f)] = in.Files[f]
		}
		for _, imp := range p.Imports {
			lp.imports = append(lp.imports, imp.ID)
		}
		slices.Sort(lp.imports)
		l.roots[p.ID] = lp
	}
	return in, l, nil
}

// isStd reports whether p is a standard library package (no module, no
// dot in its first path element).
func isStd(p *packages.Package) bool {
	first, _, _ := strings.Cut(p.PkgPath, "/")
	return p.Module == nil && !strings.Contains(first, ".") && p.PkgPath != "command-line-arguments"
}

// ErrNotGraphDatabase is returned (wrapped, naming the path) when a file that is not a graph
// database is given as one: by OpenDatabase (and so by every reader) for a file that is not SQLite
// or has no snapshots table, and by Index when DBPath names an existing file that is not a graph
// database: indexing replaces the file, and it must never replace an evidence store, a source file
// or anyone else's database.
var ErrNotGraphDatabase = errors.New("indexer: not a graph database")

// ErrHotJournal is returned (wrapped, naming both files) when something lies at DBPath+"-journal"
// other than an empty file: the rollback journal another program left when it stopped while writing
// the database (a "hot journal", sqlite.org/atomiccommit.html section 4.2). SQLite applies such a
// journal to the database at its next read-write open; assay opens graph databases read-only and
// writes new ones beside them, so it would never apply it, and it does not delete it. A reader
// (OpenDatabase) refuses the database, whose content may be half of that program's transaction;
// Index refuses to replace it, since SQLite would later apply the journal to the new file.
var ErrHotJournal = errors.New("indexer: a rollback journal lies next to the graph database")

// checkNoHotJournal returns ErrHotJournal when path+"-journal" exists and is not an empty regular
// file (SQLite ignores an empty journal).
func checkNoHotJournal(path string) error {
	journal := path + "-journal"
	fi, err := os.Lstat(journal)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return nil
	}
	return fmt.Errorf("%w: %s is next to %s (a program was writing the database and did not finish; SQLite would apply the journal at the next write); assay neither applies nor deletes it: find what wrote it, move it away and run again",
		ErrHotJournal, journal, path)
}

// sqliteMagic is the first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html).
const sqliteMagic = "SQLite format 3\x00"

// notGraphDatabase returns why the SQLite file opened as db is not a graph database ("is not an
// SQLite database", "has no snapshots table"), or "" when it has the snapshots table every graph
// database has had since schema version 1. An error is one reading it for another reason.
func notGraphDatabase(ctx context.Context, db *sql.DB) (string, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'").Scan(&n)
	var se sqlite3.Error
	switch {
	case errors.As(err, &se) && se.Code == sqlite3.ErrNotADB:
		return "is not an SQLite database", nil
	case err != nil:
		return "", err
	case n == 0:
		return "has no snapshots table", nil
	}
	return "", nil
}

// checkReplaceable refuses a DBPath that exists and is not a graph database written by this
// package: not a regular file, not SQLite, or SQLite without a snapshots table; and any DBPath
// with another program's rollback journal beside it (ErrHotJournal). An empty file or a missing
// path is fine.
func checkReplaceable(ctx context.Context, path string) error {
	if err := checkNoHotJournal(path); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file; refusing to replace it", ErrNotGraphDatabase, path)
	}
	if fi.Size() == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	head := make([]byte, len(sqliteMagic))
	_, rerr := io.ReadFull(f, head)
	f.Close()
	if rerr != nil || string(head) != sqliteMagic {
		return fmt.Errorf("%w: %s is not an SQLite database; refusing to replace it", ErrNotGraphDatabase, path)
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=ro&_query_only=1"))
	if err != nil {
		return fmt.Errorf("indexer: graph database %s: %w", path, err)
	}
	defer db.Close()
	not, err := notGraphDatabase(ctx, db)
	if err != nil {
		return fmt.Errorf("%w: %s: %v; refusing to replace it", ErrNotGraphDatabase, path, err)
	}
	if not != "" {
		return fmt.Errorf("%w: %s %s; refusing to replace it", ErrNotGraphDatabase, path, not)
	}
	return nil
}
