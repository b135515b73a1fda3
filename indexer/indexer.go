package indexer

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
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
	// Enrich, when not nil, is called inside the database's write
	// transaction after the graph is inserted and before the integrity
	// check, so that what it writes (metric values) is covered by the
	// database's SHA-256. An error from it aborts the index: nothing is
	// written. EnrichID names what Enrich computes and its version; it is
	// part of the reuse key, so a new version is never served a database
	// written by an old one.
	Enrich   func(ctx context.Context, tx *sql.Tx, snap Snapshot) error
	EnrichID string
	// EnrichGraph, when not nil, replaces Enrich in a full index: it is
	// given a copy of the graph and runs on its own goroutine while the
	// graph is inserted, and the function it returns writes its rows in
	// the same transaction, before the checks and the SHA-256. It must
	// compute what Enrich computes from the database (an incremental
	// index, whose graph is partly copied from the previous database,
	// still calls Enrich).
	EnrichGraph EnrichGraphFunc
	// Reuse lets Index return the snapshot already at DBPath, without
	// loading or writing anything, when its reuse key equals the current
	// one: same schema, tool, Go version and build context, same patterns,
	// VCS state, EnrichID, and same content (SHA-256) of every file of the
	// matched packages and of every dependency without a module version
	// (vendored dependencies included). An unchanged tree is usually
	// recognized without the go command's listing, by a file-system check
	// (see the package doc, "Reuse and incremental index"). When only files
	// of the matched packages changed, Index re-indexes incrementally: the
	// changed packages and every package that imports
	// them (transitively) are type-checked in full; the others are
	// type-checked without function bodies, and the relations found in
	// their bodies are kept from the previous database. The result has the
	// same rows as a full index. When more than half of the packages are
	// affected, or the package list changed, the index is full.
	Reuse bool
	// Progress, when not nil, is called with a short description of each
	// stage as it starts ("loading and type-checking packages", ...), from
	// the goroutine that called Index; also, once, when Index waits for
	// another index of the same DBPath to finish.
	Progress func(stage string)
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
	// InputKey is the reuse key (SHA-256 hex, 64 chars; see Options.Reuse).
	InputKey string `json:"input_key"`
	// Reused reports that Index returned the existing database unchanged
	// because its InputKey matched.
	Reused bool `json:"reused"`
	// ReusedBy says how an unchanged input was established when Reused:
	// "files" when the file-system check found every file and directory the
	// go command reads as it was (no listing needed), "listing" when the go
	// command's listing gave the same reuse key. "" when not Reused.
	ReusedBy string `json:"reused_by"`
	// ConfigKey is the configuration key (SHA-256 hex): the reuse key
	// without the contents of the matched packages' Go files, the
	// package list and the VCS state. An existing
	// database with the same ConfigKey can be updated incrementally.
	ConfigKey string `json:"config_key"`
	// Incremental reports that only the packages in Reindexed (import
	// paths, with their test variants) were type-checked in full; the rest
	// of the graph was kept from the previous database (see Options.Reuse).
	Incremental bool `json:"incremental"`
	// Reindexed lists the import paths re-indexed by an incremental index,
	// sorted; nil after a full index.
	Reindexed []string `json:"reindexed"`
	// FullReason says why a full index was made although Options.Reuse
	// found a previous database; "" otherwise.
	FullReason string `json:"full_reason"`
	// Counts are the rows written per kind.
	Counts Counts `json:"counts"`
	// Coverage is the fraction (0..1) of matched packages that loaded
	// without errors and are not ill-typed; unmatched patterns count as
	// failed packages.
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
// Index changes no setting of the process (the garbage collector's is the
// caller's to choose: `assay index` sets its own).
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
	// Everything from here on, the reuse check first, sees the database
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
	patterns, err := workspacePatterns(ctx, dir, env, goEnv, opts.Patterns)
	if err != nil {
		return Snapshot{}, err
	}
	vcs := readVCS(ctx, dir, dbPath)
	spec := loadSpec{dir: dir, env: env, buildFlags: buildFlags, patterns: patterns, tests: opts.Tests}

	// The reuse key needs only the go command's listing. When there is a
	// database to reuse, it decides whether to load at all; otherwise it is
	// computed while the packages load.
	type keyResult struct {
		keys keys
		err  error
	}
	keyCh := make(chan keyResult, 1)
	computeKey := func() {
		k, err := reuseKey(ctx, spec, goEnv, vcs, opts, tags, dbPath)
		keyCh <- keyResult{k, err}
	}
	var plan *incrementalPlan
	var fullReason string
	var fromLoad bool
	// Files are read (hashed, listed, loaded) from here on.
	readStart := time.Now()
	_, statErr := os.Stat(dbPath)
	trusted := false
	var recorded string
	if opts.Reuse && statErr == nil {
		// A previous database is reused, or its rows kept, only when it is
		// byte for byte what an index wrote: not damaged, not edited.
		var why string
		if recorded, trusted, why = verifyRecordedSHA256(dbPath); !trusted {
			fullReason = why
		}
	}
	if trusted {
		// The file-system check first: when nothing the go command reads
		// changed, neither did the listing, and it is not needed.
		prev, ok, err := fsReuse(ctx, dbPath, dir, fsBase(goEnv, vcs, opts, tags, spec))
		if err != nil {
			return Snapshot{}, err
		}
		// The file read must still be the one checked (prev.DBSHA256 is
		// the hash of the bytes ReadSnapshot read).
		if ok && prev.DBSHA256 == recorded {
			prev.Reused, prev.ReusedBy = true, "files"
			return prev, nil
		}
		computeKey()
		kr := <-keyCh
		if kr.err != nil {
			return Snapshot{}, kr.err
		}
		if prev, err := ReadSnapshot(ctx, dbPath); err == nil {
			if prev.InputKey == kr.keys.input && prev.DBSHA256 == recorded {
				prev.Reused, prev.ReusedBy = true, "listing"
				return prev, nil
			}
			if prev.ConfigKey == kr.keys.config {
				if plan, fullReason, err = planIncremental(ctx, dbPath, kr.keys.listing); err != nil {
					return Snapshot{}, err
				}
			} else {
				fullReason = configChange(prev, Snapshot{Dir: dir, GoVersion: goEnv.GoVersion, GOOS: goEnv.GOOS, GOARCH: goEnv.GOARCH,
					CGOEnabled: goEnv.CGOEnabled, ToolVersion: opts.ToolVersion, Tests: opts.Tests, Patterns: patterns, Tags: tags})
			}
		}
		keyCh <- kr
	} else {
		// Taken from the load's own listing once it is done (below), so
		// that no second go command competes with the load.
		fromLoad = true
	}
	if lock == nil {
		reason := "it cannot be reused"
		if fullReason != "" {
			reason = fullReason
		}
		return Snapshot{}, fmt.Errorf("%w (the database there could only have been reused, and %s)", lockErr, reason)
	}
	if plan != nil {
		spec.strip = plan.strip
	}

	progress := func(stage string) {
		if opts.Progress != nil {
			opts.Progress(stage)
		}
	}
	if plan != nil {
		progress(fmt.Sprintf("loading packages: %d to re-index, the rest without function bodies", len(plan.affected)))
	} else {
		progress("loading and type-checking packages")
	}
	if h := testHookBeforeLoad.Load(); h != nil {
		(*h)(dir)
	}
	res, err := load(ctx, spec)
	if err != nil {
		return Snapshot{}, err
	}
	if vcs.revision != "" && !vcs.dirty && modFlagWrites(goEnv.GOFLAGS) {
		// With -mod=mod the go command may have rewritten go.mod or go.sum
		// while listing (a missing go line, a missing requirement): the
		// tree indexed is the one after the load.
		vcs = readVCS(ctx, dir, dbPath)
	}
	if len(res.roots) == 0 {
		if len(res.unmatched) > 0 {
			return Snapshot{}, fmt.Errorf("%w in %s: %s", ErrNoPackages, dir, unmatchedReason(res))
		}
		return Snapshot{}, fmt.Errorf("%w in %s (patterns %q)", ErrNoPackages, dir, patterns)
	}
	// The graph records the bytes go/packages parsed; the reuse keys must
	// describe the same bytes (alignWith).
	var kr keyResult
	var changed []string
	var keysFromLoad func() error
	if fromLoad {
		// Hashed from the load's listing, and the tree under the patterns
		// listed, while the graph is built (plan is nil: there was no
		// database to plan from). Only reads: of res, and of the files.
		kctx, cancelKeys := context.WithCancel(ctx)
		go func() {
			var k keys
			var err error
			defer func() {
				// A defect met here is an error of this Index call, not a
				// crash of the process that called it.
				if r := recover(); r != nil {
					k, err = keys{}, fmt.Errorf("indexer: internal error hashing the reuse keys: %v", r)
				}
				keyCh <- keyResult{k, err}
			}()
			if h := testHookKeys.Load(); h != nil {
				(*h)()
			}
			var ok bool
			k, ok, err = reuseKeyFromLoad(kctx, res, spec, goEnv, vcs, opts, tags, dbPath)
			if err == nil && !ok {
				k, err = reuseKey(kctx, spec, goEnv, vcs, opts, tags, dbPath)
			}
			if err == nil {
				err = k.markTreeModified(readStart)
			}
		}()
		received := false
		keysFromLoad = func() error {
			if !received {
				received = true
				kr = <-keyCh
				cancelKeys()
			}
			if kr.err != nil {
				return kr.err
			}
			var err error
			changed, err = kr.keys.alignWith(res.parsed)
			return err
		}
		defer func() {
			// Every return waits for the goroutine (cancelled: an early
			// return's keys are not needed).
			if !received {
				received = true
				cancelKeys()
				<-keyCh
			}
		}()
	} else {
		if kr = <-keyCh; kr.err != nil {
			return Snapshot{}, kr.err
		}
		if changed, err = kr.keys.alignWith(res.parsed); err != nil {
			return Snapshot{}, err
		}
	}
	if plan != nil {
		fullReason = plan.matches(res)
		if fullReason == "" && len(changed) > 0 {
			// The plan kept the bodies' relations of packages the listing
			// found unchanged; one of their files may be among these.
			fullReason = fmt.Sprintf("%d file(s) changed while being indexed", len(changed))
		}
	}
	if plan != nil && fullReason != "" {
		// The typed load disagrees with the listing (a file changed in
		// between): index everything from scratch.
		plan = nil
		spec.strip = nil
		if res, err = load(ctx, spec); err != nil {
			return Snapshot{}, err
		}
		again, err := kr.keys.alignWith(res.parsed)
		if err != nil {
			return Snapshot{}, err
		}
		changed = slices.Compact(slices.Sorted(slices.Values(append(changed, again...))))
	}
	changedWhileIndexed := func() {
		if len(changed) > 0 {
			progress(fmt.Sprintf("%d file(s) changed while being indexed (first %s): the snapshot records the content that was indexed", len(changed), changed[0]))
		}
	}
	if keysFromLoad == nil {
		changedWhileIndexed()
	}
	progress(fmt.Sprintf("building the graph of %d packages", len(res.roots)))
	g, err := buildGraph(ctx, res, plan)
	if err != nil {
		return Snapshot{}, err
	}
	if len(g.files) == 0 {
		// Packages matched, but nothing of them is left to index: a graph
		// of empty packages would read as a complete one (coverage 1).
		hint := ""
		if !opts.Tests {
			hint = " (test files are excluded: --tests=false)"
		}
		return Snapshot{}, fmt.Errorf("%w with files to index in %s: %d matched, none has a Go file to index%s", ErrNoPackages, dir, len(res.roots), hint)
	}
	if keysFromLoad != nil {
		if err := keysFromLoad(); err != nil {
			return Snapshot{}, err
		}
		changedWhileIndexed()
	}
	// Every file is read by now: the keys must not describe content the
	// graph may not have been built from (markModified).
	modified, err := kr.keys.markModified(res.parsed, readStart)
	if err != nil {
		return Snapshot{}, err
	}
	if len(modified) > 0 {
		progress(fmt.Sprintf("%d file(s) modified while being indexed (first %s): the next run indexes in full", len(modified), modified[0]))
	}
	// The loaded packages (type information, most of the heap) are garbage
	// from here on.
	res = nil
	if opts.EnrichGraph == nil || plan != nil {
		g.syntax = nil // only the in-memory enrichment of a full index reads the trees
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
		InputKey:    kr.keys.input,
		ConfigKey:   kr.keys.config,
	}
	snap.Coverage = g.coverage()
	snap.ID, err = snapshotID(snap, goEnv, g)
	if err != nil {
		return Snapshot{}, err
	}
	if plan != nil {
		snap.Incremental = true
		snap.Reindexed = plan.affectedUnits()
	}
	snap.FullReason = fullReason
	progress("writing the database")
	sum, counts, err := writeDatabase(ctx, dbPath, snap, goEnv, g, enrichers{opts.Enrich, opts.EnrichGraph}, plan, progress, kr.keys)
	if err != nil {
		return Snapshot{}, err
	}
	snap.DBSHA256 = sum
	snap.Counts = counts
	return snap, nil
}

// removeStaleTemporaries removes the temporary files of the database at
// dbPath (.NAME.tmp-DIGITS, .NAME.tmp-sha256-DIGITS and their journals:
// isDatabaseFile) that a killed run left: only the lock's holder writes
// them, so under the lock none is in use.
func removeStaleTemporaries(dbPath string) {
	dir, base := filepath.Dir(dbPath), filepath.Base(dbPath)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "."+base+".tmp-") && isDatabaseFile(name, base, e.Type().IsRegular()) {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}

// sha256Path is where Index records the SHA-256 of the database at dbPath
// once it is written: beside it, among its own files (dbPath-*).
func sha256Path(dbPath string) string { return dbPath + "-sha256" }

// verifyRecordedSHA256 reports whether the database at dbPath has the
// SHA-256 its index recorded, and returns that record; otherwise it says
// why not (for Snapshot.FullReason). The record is read only if it is a
// small regular file (not through a symbolic link, never blocking on a
// FIFO) holding 64 lowercase hex digits.
func verifyRecordedSHA256(dbPath string) (recorded string, ok bool, why string) {
	rec, err := readSmallRegular(sha256Path(dbPath), 128)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Sprintf("the database has no SHA-256 record (%s) to check it against: it is not reused", filepath.Base(sha256Path(dbPath)))
	}
	if err != nil {
		return "", false, fmt.Sprintf("the database's SHA-256 record %s cannot be used (%v): it is not reused", filepath.Base(sha256Path(dbPath)), err)
	}
	recorded = strings.TrimSpace(string(rec))
	if !sha256Hex.MatchString(recorded) {
		return "", false, fmt.Sprintf("the database's SHA-256 record %s does not hold a SHA-256: it is not reused", filepath.Base(sha256Path(dbPath)))
	}
	f, err := os.Open(dbPath)
	if err != nil {
		return "", false, fmt.Sprintf("the database cannot be read: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", false, fmt.Sprintf("the database cannot be read: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != recorded {
		return "", false, fmt.Sprintf("the database's SHA-256 %s is not the %s its index wrote (damaged or edited since): it is not reused", got, recorded)
	}
	return recorded, true, ""
}

// sha256Hex is a SHA-256 as Index writes it: 64 lowercase hex digits.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// readSmallRegular reads path if it is a regular file of at most max bytes,
// opened without following a symbolic link and without blocking.
func readSmallRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes, more than %d", fi.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// configChange says why a snapshot's configuration key differs from this
// run's: the recorded fields of prev that cur (this run's values of the
// same fields) does not have, "root directory /a -> /b"; when none
// differs, the inputs the snapshot does not record.
func configChange(prev, cur Snapshot) string {
	var diffs []string
	// A value read from the database is shown quoted when it holds a
	// character that is not printable (a terminal escape, a newline).
	shown := func(v any) string {
		s := fmt.Sprint(v)
		if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
			return strconv.Quote(s)
		}
		return s
	}
	diff := func(what string, a, b any) {
		if sa, sb := shown(a), shown(b); sa != sb {
			diffs = append(diffs, fmt.Sprintf("%s %s -> %s", what, sa, sb))
		}
	}
	diff("root directory", prev.Dir, cur.Dir)
	diff("Go version", prev.GoVersion, cur.GoVersion)
	diff("GOOS", prev.GOOS, cur.GOOS)
	diff("GOARCH", prev.GOARCH, cur.GOARCH)
	diff("CGO_ENABLED", prev.CGOEnabled, cur.CGOEnabled)
	diff("tool version", prev.ToolVersion, cur.ToolVersion)
	diff("tests", prev.Tests, cur.Tests)
	diff("patterns", prev.Patterns, cur.Patterns)
	diff("build tags", prev.Tags, cur.Tags)
	if len(diffs) > 0 {
		return "the configuration changed: " + strings.Join(diffs, "; ")
	}
	return "something the snapshot does not record changed: the go environment (GOFLAGS, GOEXPERIMENT, ...), the enrichment's options, the dependencies, go.mod or go.sum, or files outside the matched packages' Go files"
}

// testHookBeforeLoad, when set (by tests only), is called with the
// directory before the packages are loaded.
var testHookBeforeLoad atomic.Pointer[func(dir string)]

// testHookKeys, when set (by tests only), is called on the goroutine that
// hashes a cold index's reuse keys, before it does.
var testHookKeys atomic.Pointer[func()]

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

// snapshotInputs is what Snapshot.ID hashes. Field order is fixed by the
// struct, slices are sorted, so the JSON encoding is deterministic.
type snapshotInputs struct {
	SchemaVersion int          `json:"schema_version"`
	ToolVersion   string       `json:"tool_version"`
	GoVersion     string       `json:"go_version"`
	GOOS          string       `json:"goos"`
	GOARCH        string       `json:"goarch"`
	CGOEnabled    string       `json:"cgo_enabled"`
	GOFLAGS       string       `json:"goflags"`
	Tests         bool         `json:"tests"`
	Patterns      []string     `json:"patterns"`
	Tags          []string     `json:"tags"`
	ModulePaths   []string     `json:"module_paths"`
	VCSRevision   string       `json:"vcs_revision"`
	VCSDirty      bool         `json:"vcs_dirty"`
	Packages      []string     `json:"packages"`
	Files         []fileDigest `json:"files"`
	// CToolchain is CC, CXX, the CGO_*FLAGS and PKG_CONFIG: they decide
	// what cgo generates, and whether a cgo package loads at all.
	CToolchain []string `json:"c_toolchain"`
	// ModuleFiles are the main modules' go.mod and go.sum (module-qualified
	// paths): they decide the dependencies the packages were checked against.
	ModuleFiles []fileDigest `json:"module_files"`
	// LoadErrors are the recorded load errors (go id, kind, message with
	// the indexed directory written "."), in recorded order: two loads of
	// the same files that failed differently are two snapshots.
	LoadErrors []string `json:"load_errors"`
}

// fileDigest names one source file by its module-qualified path and content.
type fileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// snapshotID computes Snapshot.ID from the snapshot's inputs.
func snapshotID(s Snapshot, env goEnv, g *graph) (string, error) {
	in := snapshotInputs{
		SchemaVersion: SchemaVersion,
		ToolVersion:   s.ToolVersion,
		GoVersion:     env.GoVersion,
		GOOS:          env.GOOS,
		GOARCH:        env.GOARCH,
		CGOEnabled:    env.CGOEnabled,
		GOFLAGS:       env.GOFLAGS,
		Tests:         s.Tests,
		Patterns:      s.Patterns,
		Tags:          s.Tags,
		ModulePaths:   s.ModulePaths,
		VCSRevision:   s.VCSRevision,
		VCSDirty:      s.VCSDirty && s.VCSRevision != "",
		Files:         g.sourceDigests(),
	}
	for _, p := range g.packages {
		in.Packages = append(in.Packages, p.goID)
	}
	in.CToolchain = []string{env.CC, env.CXX, env.CGOCFLAGS, env.CGOCPPFLAGS, env.CGOCXXFLAGS, env.CGOFFLAGS, env.CGOLDFLAGS, env.PKGCONFIG}
	in.ModuleFiles = g.moduleFileDigests()
	for _, e := range g.loadErrors {
		msg := e.message
		if s.Dir != "" {
			msg = strings.ReplaceAll(msg, s.Dir, ".")
		}
		in.LoadErrors = append(in.LoadErrors, e.goID+"\x00"+e.kind+"\x00"+msg)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("indexer: encode snapshot inputs: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
