package indexer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNoPackages is returned (wrapped, with the go command's reason when it
// gave one) when the patterns match no Go package in Dir: the directory has
// no Go files, or it is not inside a module (no go.mod). No database file is
// written in that case.
var ErrNoPackages = errors.New("indexer: patterns match no Go package")

// ErrInvalidOptions is returned (wrapped, naming the field) when Options
// cannot be used, for example an empty DBPath.
var ErrInvalidOptions = errors.New("indexer: invalid options")

// ErrDatabaseCheck is returned (wrapped, with SQLite's report) when the
// written database fails PRAGMA integrity_check or foreign_key_check.
var ErrDatabaseCheck = errors.New("indexer: database check failed")

// Options configures one Index call. The zero value of every field except
// DBPath has a default.
type Options struct {
	// Dir is the directory to load from: a module root or a directory
	// inside a module. Default ".".
	Dir string
	// Patterns are go/packages patterns relative to Dir. Default ["./..."].
	Patterns []string
	// Tests includes test packages: each package's test variant and
	// external test package (the CLI defaults to true).
	Tests bool
	// DBPath is the SQLite file to write (required). Its directory is created
	// if missing. The file is replaced atomically: the database is written to
	// a temporary file in the same directory, checked, synced and renamed
	// over DBPath, so a failed index never leaves a half-written database
	// presented as complete (an existing file at DBPath is left untouched).
	// Index holds an exclusive lock on DBPath+"-lock" for the whole run
	// (see Index).
	DBPath string
	// ToolVersion is assay's version string, recorded in the snapshot.
	// Empty means unknown and is stored as NULL.
	ToolVersion string
	// Env holds extra environment entries ("KEY=value") for the go command,
	// appended to the process environment so they take precedence, e.g.
	// "GOFLAGS=-mod=mod" to load a module from the read-only module cache.
	Env []string
	// Tags are build tags passed to the go command (-tags), recorded in the
	// snapshot: they decide which files exist.
	Tags []string
	// GOOS and GOARCH, when not empty, override the build target (they
	// decide which files exist, and are recorded in the snapshot).
	GOOS, GOARCH string
	// Enrich, when not nil, computes what the index adds to the graph
	// (metric values) from the graph in memory, while the graph rows are
	// inserted, and writes its rows in the database's transaction, so
	// that the database's checks and SHA-256 cover them (see EnrichFunc).
	// An error from it aborts the index: nothing is written. EnrichID
	// names what Enrich computes and its version; it is part of the
	// content key, so a new version is never served a database written by
	// an old one.
	Enrich   EnrichFunc
	EnrichID string
	// Reuse lets Index return the snapshot already at DBPath, without
	// loading or writing anything, when the database is byte for byte what
	// its index wrote and the content key it stores equals the key of the
	// same inputs now: schema, tool and enrichment versions (EnrichID), go
	// env and options, VCS state, the content of every file the go command
	// listed for the packages (and of their unversioned dependencies), and
	// the entries of every directory under the patterns. Any difference,
	// even a file the go command ignores, indexes in full; so does a
	// database whose patterns are not all directories (see the package
	// doc, "Reuse").
	Reuse bool
	// Progress, when not nil, is called with a short description of each
	// stage as it starts ("loading and type-checking packages", ...), from
	// the goroutine that called Index; also, once, when Index waits for
	// another index of the same DBPath to finish.
	Progress func(stage string)

	// beforeLoad, when not nil (set by this package's tests), is called
	// with the directory just before the packages are loaded.
	beforeLoad func(dir string)
	// decideOnly (set by this package's tests) makes Index return right
	// after its reuse decision, loading and writing nothing: the previous
	// snapshot when it is reused, otherwise a Snapshot with only
	// FullReason set.
	decideOnly bool
}

// Counts are the numbers of rows written per kind. A file shared by a package
// and its test variant counts once per variant, as do its declarations.
type Counts struct {
	// Nodes is the number of rows of nodes, of every kind.
	Nodes int `json:"nodes"`
	// Edges is the number of rows of edges, of every kind.
	Edges int `json:"edges"`
	// Packages is the number of indexed packages (rows of packages),
	// test variants included, the synthesized test main package excluded.
	Packages int `json:"packages"`
	// Files is the number of rows of files.
	Files int `json:"files"`
	// Types is the number of package-level named types.
	Types int `json:"types"`
	// Funcs is the number of package-level functions (not methods).
	Funcs int `json:"funcs"`
	// Methods is the number of methods.
	Methods int `json:"methods"`
	// Imports is the number of import edges.
	Imports int `json:"imports"`
	// LoadErrors is the number of rows of load_errors.
	LoadErrors int `json:"load_errors"`
	// PackagesWithErrors is the number of indexed packages with at least one
	// load error.
	PackagesWithErrors int `json:"packages_with_errors"`
	// PackagesIllTyped is the number of indexed packages that go/packages
	// marks IllTyped: the package or one of its dependencies has errors, so
	// its type information may be incomplete even without errors of its own.
	PackagesIllTyped int `json:"packages_ill_typed"`
	// UnmatchedPatterns is the number of patterns the go command could not
	// resolve to a package (recorded in load_errors).
	UnmatchedPatterns int `json:"unmatched_patterns"`
	// PackagesExcluded is the number of package directories under the
	// patterns whose .go files the build context excluded all of (e.g.
	// cgo-only packages with CGO_ENABLED=0), recorded in load_errors with
	// kind excluded_by_build_context; each counts as a matched package
	// that did not load.
	PackagesExcluded int `json:"packages_excluded"`
}

// Snapshot describes one index: what was loaded, by which toolchain, from
// which revision, and the database that holds it.
type Snapshot struct {
	// ID is the stable id of this snapshot: SHA-256 hex (64 chars) of the
	// JSON encoding of its inputs (schema version, tool and Go versions,
	// GOOS/GOARCH/CGO_ENABLED/GOFLAGS, tests flag, patterns, module paths,
	// VCS revision and dirty flag, the indexed package IDs, each source
	// file's module-relative path and SHA-256, the C toolchain settings,
	// the main modules' go.mod and go.sum, and the recorded load errors).
	// Indexing the same sources with the same toolchain gives the same ID on
	// any machine (a load error's message has the indexed directory written
	// "."). Not covered: the content of a local (directory-replaced)
	// dependency when it changes without changing the load errors.
	ID string `json:"id"`
	// Dir is the absolute directory the packages were loaded from.
	Dir string `json:"dir"`
	// ModulePaths are the distinct module paths of the indexed packages,
	// sorted.
	ModulePaths []string `json:"module_paths"`
	// VCSRevision is the git commit (`git rev-parse HEAD` in Dir); "" when
	// Dir is not in a git checkout, git is absent, or git failed.
	VCSRevision string `json:"vcs_revision"`
	// VCSDirty reports uncommitted changes (tracked or untracked, anywhere in
	// the work tree, as `git status --porcelain` shows them). Meaningful only
	// when VCSRevision is not "".
	VCSDirty bool `json:"vcs_dirty"`
	// GoVersion is the go command's GOVERSION, which did the loading (it may
	// differ from the toolchain assay was built with).
	GoVersion string `json:"go_version"`
	// GOOS and GOARCH are the build target the packages were loaded for;
	// build constraints select files by them.
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	// ToolVersion is Options.ToolVersion.
	ToolVersion string `json:"tool_version"`
	// Tests is Options.Tests.
	Tests bool `json:"tests"`
	// Patterns are the patterns used, after defaults and after a go.work
	// workspace's "./..." was expanded to each of its modules.
	Patterns []string `json:"patterns"`
	// Tags are the build tags used (Options.Tags), sorted.
	Tags []string `json:"tags"`
	// CGOEnabled is the go command's CGO_ENABLED ("0" or "1").
	CGOEnabled string `json:"cgo_enabled"`
	// InputKey is the content key (SHA-256 hex, 64 chars; see
	// Options.Reuse); "" when the index has none (patterns that are not
	// directories), and is never reused.
	InputKey string `json:"input_key"`
	// Reused reports that Index returned the existing database unchanged
	// because its content key matched.
	Reused bool `json:"reused"`
	// ConfigKey, Incremental and Reindexed are always "", false and nil:
	// assay no longer indexes incrementally (issue 21; it was not faster
	// than a full index). They are kept so that schema 3 databases and
	// `assay index --format json` stay as they were.
	ConfigKey   string   `json:"config_key"`
	Incremental bool     `json:"incremental"`
	Reindexed   []string `json:"reindexed"`
	// FullReason says why Index indexed although Options.Reuse found a
	// previous database: the database is not the one its index wrote, or
	// what its content key covers changed ("file a/a.go changed since the
	// last index", "the configuration changed: build tags [] -> [x]");
	// "" otherwise.
	FullReason string `json:"full_reason"`
	// Counts are the rows written per kind.
	Counts Counts `json:"counts"`
	// Coverage is the fraction (0..1) of matched packages that loaded
	// without errors and are not ill-typed; unmatched patterns and package
	// directories the build context excluded count as failed packages.
	Coverage float64 `json:"coverage"`
	// DBPath is the absolute path of the database written.
	DBPath string `json:"db_path"`
	// DBSHA256 is the SHA-256 hex (64 chars) of the database file as it
	// stands at DBPath: hashed after the database was closed and synced,
	// then renamed into place (a rename does not change the bytes).
	DBSHA256 string `json:"db_sha256"`
}

// Index loads the packages that opts.Patterns match in opts.Dir, builds the
// code graph, writes it to opts.DBPath (replacing any previous file
// atomically) and returns the snapshot.
//
// Errors: ErrInvalidOptions for unusable options (ErrUnusableLockPath, also
// an ErrInvalidOptions, when the lock's path beside the database holds
// something else); ErrNoPackages when nothing
// matched (no database is written); the go command's failure when it cannot
// run; ctx.Err() (wrapped) when ctx is cancelled; a wrapped SQLite or file
// system error, or a failed PRAGMA integrity_check or foreign_key_check, when
// the database cannot be written. Packages with errors are not an error of
// Index: they are indexed as far as possible and recorded in load_errors.
//
// Index runs the go command and git as subprocesses. Concurrent calls, in
// one process or several, are safe: for the whole run, the reuse check
// included, Index holds an exclusive flock(2) on DBPath+"-lock" (see the
// package doc, "Concurrent indexes of one database"). A second index of
// the same DBPath waits for it, reporting so once through Options.Progress;
// a wait cut short by ctx returns an error wrapping ctx.Err() and leaves
// the database untouched. So the DBSHA256 a run returns is that of the
// file when it returned, and a run that waited reuses what the one before
// wrote when nothing changed. The lock file's presence or absence means
// nothing (it may stay on disk after a crash). A failed run removes the
// database's directory when it created it and nothing else is in it.
//
// Index changes no setting of the process (the garbage collector's target
// and memory limit are the caller's to choose: GOGC, GOMEMLIMIT).
func Index(ctx context.Context, opts Options) (_ Snapshot, err error) {
	if opts.DBPath == "" {
		return Snapshot{}, fmt.Errorf("%w: DBPath is empty", ErrInvalidOptions)
	}
	if opts.Dir == "" {
		opts.Dir = "."
	}
	if len(opts.Patterns) == 0 {
		opts.Patterns = []string{"./..."}
	}
	tags := slices.Clone(opts.Tags)
	slices.Sort(tags)
	for _, t := range tags {
		if t == "" || strings.ContainsAny(t, ", \t\n\"'") {
			return Snapshot{}, fmt.Errorf("%w: build tag %q", ErrInvalidOptions, t)
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return Snapshot{}, fmt.Errorf("indexer: resolve dir %q: %w", opts.Dir, err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return Snapshot{}, fmt.Errorf("%w: dir %q: %w", ErrInvalidOptions, dir, err)
	} else if !fi.IsDir() {
		return Snapshot{}, fmt.Errorf("%w: dir %q is not a directory", ErrInvalidOptions, dir)
	}
	if !utf8.ValidString(dir) {
		return Snapshot{}, fmt.Errorf("%w: dir %q is not valid UTF-8: the go command's JSON cannot name its files", ErrInvalidOptions, dir)
	}
	if strings.HasSuffix(opts.DBPath, string(filepath.Separator)) {
		return Snapshot{}, fmt.Errorf("%w: database path %q ends in a separator: name a file", ErrInvalidOptions, opts.DBPath)
	}
	dbPath, err := filepath.Abs(opts.DBPath)
	if err != nil {
		return Snapshot{}, fmt.Errorf("indexer: resolve db path %q: %w", opts.DBPath, err)
	}
	if err := checkReplaceable(ctx, dbPath); err != nil {
		return Snapshot{}, err
	}
	// Everything from here on, the reuse decision first, sees the database
	// as no other index changes it.
	lock, lockErr := lockDatabase(ctx, dbPath, opts.Progress)
	if lockErr != nil {
		// A directory this run may not write in still lets it reuse the
		// database there (nobody can replace it either); anything that
		// would write fails below with this error.
		if !opts.Reuse || !readOnly(lockErr) || writable(filepath.Dir(dbPath)) || !fileExists(dbPath) {
			return Snapshot{}, lockErr
		}
		lock = nil
	} else {
		defer func() { lock.release(err != nil) }()
		// Checked again: what is at the path may have changed while this
		// run waited for the lock.
		if err := checkReplaceable(ctx, dbPath); err != nil {
			return Snapshot{}, err
		}
		removeStaleTemporaries(dbPath)
	}
	// Files are read from here on: whatever the content key covers that
	// is modified after this is taken for modified while indexed.
	since := time.Now()
	env := append(os.Environ(), opts.Env...)
	if opts.GOOS != "" {
		env = append(env, "GOOS="+opts.GOOS)
	}
	if opts.GOARCH != "" {
		env = append(env, "GOARCH="+opts.GOARCH)
	}
	var buildFlags []string
	if len(tags) > 0 {
		buildFlags = []string{"-tags=" + strings.Join(tags, ",")}
	}
	goEnv, err := readGoEnv(ctx, dir, env)
	if err != nil {
		return Snapshot{}, err
	}
	patterns, roots, err := workspacePatterns(ctx, dir, env, goEnv, opts.Patterns)
	if err != nil {
		return Snapshot{}, err
	}
	vcs := readVCS(ctx, dir, dbPath)
	kc := keyContext{SchemaVersion: SchemaVersion, ToolVersion: opts.ToolVersion, EnrichID: opts.EnrichID, Dir: dir,
		Env: goEnv, Tags: tags, Tests: opts.Tests, Patterns: patterns, VCSRevision: vcs.revision, VCSDirty: vcs.dirty}

	var fullReason string
	if opts.Reuse && fileExists(dbPath) {
		prev, why, err := reusable(ctx, dbPath, kc)
		if err != nil {
			return Snapshot{}, err
		}
		if prev.Reused {
			return prev, nil
		}
		fullReason = why
	}
	if opts.decideOnly {
		return Snapshot{FullReason: fullReason}, nil
	}
	if lock == nil {
		return Snapshot{}, fmt.Errorf("%w (the database there could only have been reused, and %s)", lockErr, fullReason)
	}

	progress := func(stage string) {
		if opts.Progress != nil {
			opts.Progress(stage)
		}
	}
	progress("loading and type-checking packages")
	if opts.beforeLoad != nil {
		opts.beforeLoad(dir)
	}
	spec := loadSpec{dir: dir, env: env, buildFlags: buildFlags, patterns: patterns, tests: opts.Tests}
	res, err := load(ctx, spec)
	if err != nil {
		return Snapshot{}, err
	}
	if vcs.revision != "" && !vcs.dirty && modFlagWrites(goEnv.GOFLAGS) {
		// With -mod=mod the go command may have rewritten go.mod or go.sum
		// while listing (a missing go line, a missing requirement): the
		// tree indexed is the one after the load.
		vcs = readVCS(ctx, dir, dbPath)
		kc.VCSRevision, kc.VCSDirty = vcs.revision, vcs.dirty
	}
	if len(res.roots) == 0 {
		if len(res.unmatched) > 0 {
			return Snapshot{}, fmt.Errorf("%w in %s: %s", ErrNoPackages, dir, unmatchedReason(res))
		}
		return Snapshot{}, fmt.Errorf("%w in %s (patterns %q)", ErrNoPackages, dir, patterns)
	}
	progress(fmt.Sprintf("building the graph of %d packages", len(res.roots)))
	g, err := buildGraph(ctx, res)
	if err != nil {
		return Snapshot{}, err
	}
	excluded, err := findExcluded(ctx, spec, res)
	if err != nil {
		return Snapshot{}, err
	}
	g.addExcluded(excluded, goEnv, tags)
	if len(g.files) == 0 {
		// Packages matched, but nothing of them is left to index: a graph
		// of empty packages would read as a complete one (coverage 1).
		hint := ""
		if !opts.Tests {
			hint = " (test files are excluded: --tests=false)"
		}
		return Snapshot{}, fmt.Errorf("%w with files to index in %s: %d matched, none has a Go file to index%s", ErrNoPackages, dir, len(res.roots), hint)
	}
	// Every file is read by now: the key describes the bytes the graph was
	// built from, and marks what changed meanwhile.
	key, modified, err := keyOfLoad(ctx, res, kc, roots, dbPath, since)
	if err != nil {
		return Snapshot{}, err
	}
	if len(modified) > 0 {
		progress(fmt.Sprintf("%d file(s) or directories modified while being indexed (first %s): the next run indexes again", len(modified), modified[0]))
	}
	res = nil // the loaded packages (most of the heap) are garbage from here on
	if opts.Enrich == nil {
		g.syntax = nil // only the enrichment reads the trees
	}

	snap := Snapshot{
		Dir:         dir,
		ModulePaths: g.modulePaths,
		VCSRevision: vcs.revision,
		VCSDirty:    vcs.dirty,
		GoVersion:   goEnv.GoVersion,
		GOOS:        goEnv.GOOS,
		GOARCH:      goEnv.GOARCH,
		CGOEnabled:  goEnv.CGOEnabled,
		ToolVersion: opts.ToolVersion,
		Tests:       opts.Tests,
		Patterns:    slices.Clone(patterns),
		Tags:        tags,
		Counts:      g.counts(),
		DBPath:      dbPath,
		FullReason:  fullReason,
	}
	if snap.InputKey, err = key.hash(); err != nil {
		return Snapshot{}, err
	}
	snap.Coverage = g.coverage()
	if snap.ID, err = snapshotID(snap, goEnv, g); err != nil {
		return Snapshot{}, err
	}
	progress("writing the database")
	if snap.DBSHA256, err = writeDatabase(ctx, dbPath, snap, goEnv, g, opts.Enrich, key, progress); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// unmatchedReason joins the go command's messages for patterns that
// resolved to no package.
func unmatchedReason(res *loadResult) string {
	var msgs []string
	for _, u := range res.unmatched {
		for _, e := range u.Errors {
			msgs = append(msgs, e.Msg)
		}
	}
	return strings.Join(msgs, "; ")
}
