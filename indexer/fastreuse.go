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
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The file-system check lets an unchanged re-run skip the go command's
// listing, which costs about as much as a tenth of a cold index. The listing
// decides the reuse key from the build context, the options, the VCS state,
// the files it lists and their contents; what the go command reads to make
// that listing is the environment (go env), go.mod, go.sum, go.work, the
// names of the files and directories under the pattern roots and the
// contents of the files it lists. The check hashes exactly those: the same
// options, build context and VCS state, the content of every file the last
// listing hashed, the names of every entry of every directory under the
// roots (and of the directories of hashed files the walk does not reach),
// and the go.mod files above Dir and the roots. When all of
// it is as it was, the listing would be as it was, and so would the key:
// the database is reused. Anything else (a new file anywhere under the
// roots, even one the go command would ignore) falls back to the listing,
// which decides. So the check can only make a re-run slower than needed,
// never reuse a database the listing would not.
//
// It applies when every pattern is relative to Dir (".", "./...", "./x/...",
// "../y"): other patterns (import paths, a workspace's expansion, "std",
// "all") can match packages anywhere. It does not apply while an import
// resolves to no directory (listing.unresolved).

// fsCheck is what a file-system check covers, stored with the database.
type fsCheck struct {
	// Roots are walked recursively (absolute, cleaned, none inside another).
	Roots []string `json:"roots"`
	// Dirs are listed without descending: the directories of hashed files
	// that the walk of Roots does not list (outside Roots, or inside them
	// behind a symbolic link, which the walk does not follow and the go
	// command does for a directory an import path names).
	Dirs []string `json:"dirs"`
	// Paths are the files hashed (absolute), sorted.
	Paths []string `json:"paths"`
	// ModFiles are where the go command looks for the go.mod that decides
	// the module of the directory it runs in and of each root: that
	// directory's and each parent's, up to the first that exists, hashed
	// ("missing" when absent). A go.mod appearing between a root and its
	// module's moves the packages into another module.
	ModFiles []string `json:"mod_files"`
}

// fsKeyInputs is what the file-system key hashes.
type fsKeyInputs struct {
	contextInputs
	Check fsCheck           `json:"check"`
	Files map[string]string `json:"files"`
	Tree  string            `json:"tree"`
}

// fsRoots returns the directories to walk for patterns relative to dir, and
// false when some pattern is not relative.
func fsRoots(dir string, patterns []string) ([]string, bool) {
	var roots []string
	for _, p := range patterns {
		if p != "." && p != ".." && !strings.HasPrefix(p, "./") && !strings.HasPrefix(p, "../") {
			return nil, false
		}
		p = strings.TrimSuffix(p, "/...")
		if strings.Contains(p, "...") {
			return nil, false // a wildcard inside a path element
		}
		roots = append(roots, filepath.Join(dir, filepath.FromSlash(p)))
	}
	slices.Sort(roots)
	var out []string
	for _, r := range roots {
		if len(out) > 0 && isWithin(r, out[len(out)-1]) {
			continue
		}
		out = append(out, r)
	}
	return out, true
}

// isWithin reports whether path is dir or inside it (both cleaned).
func isWithin(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// newFSCheck returns the check for the files the listing hashed (paths),
// for the go command run in dir.
func newFSCheck(dir string, roots []string, paths []string) fsCheck {
	c := fsCheck{Roots: roots, Paths: slices.Sorted(slices.Values(paths))}
	c.Paths = slices.Compact(c.Paths)
	dirs := map[string]bool{}
	walked := map[string]bool{} // directory -> listed by the walk of Roots
	var isWalked func(d, root string) bool
	isWalked = func(d, root string) bool {
		if d == root {
			return true
		}
		if w, ok := walked[d]; ok {
			return w
		}
		fi, err := os.Lstat(d)
		w := err == nil && fi.IsDir() && !vcsDirNames[filepath.Base(d)] && isWalked(filepath.Dir(d), root)
		walked[d] = w
		return w
	}
	for _, p := range c.Paths {
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
	c.ModFiles = slices.Sorted(maps.Keys(mods))
	c.Dirs = slices.Sorted(func(yield func(string) bool) {
		for d := range dirs {
			if !yield(d) {
				return
			}
		}
	})
	return c
}

// vcsDirNames are version control metadata directories: the go command
// neither matches packages in them nor embeds their files, and git rewrites
// files in .git on a plain `git status`.
var vcsDirNames = map[string]bool{".git": true, ".hg": true, ".svn": true, ".bzr": true}

// fsKey computes the file-system key of check with the given base inputs
// (everything but Check, Files and Tree). dbPath's file and its temporary
// and journal siblings are left out of the directory listings, so that the
// database written after the check does not change it.
func fsKey(ctx context.Context, base fsKeyInputs, check fsCheck, dbPath string) (string, error) {
	key, _, err := fsKeyWithInputs(ctx, base, check, dbPath, nil)
	return key, err
}

// fsKeyWithInputs is fsKey, also returning what it hashed. Files whose
// SHA-256 hex (or "missing") is in known, as the reuse key just hashed
// them, are not read again.
func fsKeyWithInputs(ctx context.Context, base fsKeyInputs, check fsCheck, dbPath string, known map[string]string) (string, fsKeyInputs, error) {
	in := base
	in.Check = check
	paths := slices.Compact(slices.Sorted(slices.Values(slices.Concat(check.Paths, check.ModFiles))))
	var unknown []string
	for _, p := range paths {
		if _, ok := known[p]; !ok {
			unknown = append(unknown, p)
		}
	}
	var err error
	if in.Files, err = hashFiles(ctx, unknown); err != nil {
		return "", fsKeyInputs{}, err
	}
	for _, p := range paths {
		if sum, ok := known[p]; ok {
			in.Files[p] = sum
		}
	}
	if in.Tree, err = treeDigest(ctx, check, dbPath); err != nil {
		return "", fsKeyInputs{}, err
	}
	key, err := hashJSON(in)
	return key, in, err
}

// markTreeModified makes the file-system key fail at the next run when a
// directory it lists was modified between since (taken before the load)
// and now (treeModified): the tree's digest becomes modifiedWhileIndexed,
// and the next run's listing decides. Keys computed after the load (a
// cold index's, while the graph is built) list the tree after the go
// command did; a package added or a file removed in between would be in
// the key and not in the graph.
func (k *keys) markTreeModified(since time.Time) error {
	if k.check == nil || k.fsInputs == nil || !treeModified(*k.check, since, time.Now()) {
		return nil
	}
	k.fsInputs.Tree = modifiedWhileIndexed
	return k.rehash()
}

// treeModified reports whether a directory treeDigest lists for check
// (under Roots, recursively; Dirs; and those of ModFiles) has a
// modification time between since and now: an entry was added, removed
// or renamed in it. A directory that does not exist answers for its
// parent; one that cannot be read counts as modified.
func treeModified(check fsCheck, since, now time.Time) bool {
	changed := func(dir string) bool {
		fi, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			fi, err = os.Lstat(filepath.Dir(dir))
		}
		return err != nil || (!fi.ModTime().Before(since) && !fi.ModTime().After(now))
	}
	var walk func(dir string) bool
	walk = func(dir string) bool {
		if changed(dir) {
			return true
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return false // its parent's time was checked
		}
		if err != nil {
			return true
		}
		for _, e := range entries {
			if e.IsDir() && !vcsDirNames[e.Name()] && walk(filepath.Join(dir, e.Name())) {
				return true
			}
		}
		return false
	}
	for _, r := range check.Roots {
		if walk(r) {
			return true
		}
	}
	for _, d := range check.Dirs {
		if changed(d) {
			return true
		}
	}
	for _, m := range check.ModFiles {
		if changed(filepath.Dir(m)) {
			return true
		}
	}
	return false
}

// hashFiles returns the SHA-256 hex of each path ("missing" for a file
// that does not exist), on GOMAXPROCS goroutines.
func hashFiles(ctx context.Context, paths []string) (map[string]string, error) {
	sums := make([]string, len(paths))
	errs := make([]error, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(paths))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := sha256.New()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) || ctx.Err() != nil {
					return
				}
				sums[i], errs[i] = hashFile(h, paths[i])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("indexer: hash files: %w", err)
	}
	out := make(map[string]string, len(paths))
	for i, p := range paths {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[p] = sums[i]
	}
	return out, nil
}

// hashFile returns path's SHA-256 hex, "missing" when it does not exist.
func hashFile(h interface {
	io.Writer
	Sum([]byte) []byte
	Reset()
}, path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	defer f.Close()
	h.Reset()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("indexer: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// treeDigest hashes the entry names and types of every directory under
// check.Roots (recursively, version control metadata left out) and of
// check.Dirs. A root or directory that does not exist is recorded as
// missing. The database at dbPath, its journal and temporary siblings are
// left out, and so is its directory when nothing else is in it, so that
// writing the database (and creating its directory) does not change the
// digest; a directory holding nothing else is nothing to the go command.
func treeDigest(ctx context.Context, check fsCheck, dbPath string) (string, error) {
	h := sha256.New()
	dbDir, dbBase := filepath.Dir(dbPath), filepath.Base(dbPath)
	read := func(dir string) ([]os.DirEntry, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		return slices.DeleteFunc(entries, func(e os.DirEntry) bool {
			return dir == dbDir && isDatabaseFile(e.Name(), dbBase, e.Type().IsRegular())
		}), nil
	}
	var list func(dir string, recurse bool) error
	list = func(dir string, recurse bool) error {
		entries, err := read(dir)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(h, "%s\x00missing\n", dir)
			return nil
		}
		if err != nil {
			return fmt.Errorf("indexer: list %s: %w", dir, err)
		}
		fmt.Fprintf(h, "%s\x00", dir)
		var sub []string
		for _, e := range entries {
			name := e.Name()
			t := e.Type()
			kind := "f"
			switch {
			case t.IsDir():
				kind = "d"
				path := filepath.Join(dir, name)
				if vcsDirNames[name] {
					kind = "v" // present, contents not listed
				} else if path == dbDir {
					if inner, err := read(path); err == nil && len(inner) == 0 {
						continue // only the database: as if absent
					}
				}
				if recurse && kind == "d" {
					sub = append(sub, path)
				}
			case t&fs.ModeSymlink != 0:
				kind = "l"
			case !t.IsRegular():
				kind = "o"
			}
			fmt.Fprintf(h, "%s\x00%s\x00", name, kind)
		}
		h.Write([]byte{'\n'})
		for _, s := range sub {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("indexer: list %s: %w", dir, err)
			}
			if err := list(s, true); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range check.Roots {
		if err := list(r, true); err != nil {
			return "", err
		}
	}
	for _, d := range check.Dirs {
		if err := list(d, false); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fsReuse returns the snapshot at dbPath when its stored file-system key
// equals the current one (see fsCheck); ok is false when the database has
// no stored check (written by an older assay, or for patterns the check
// does not cover) or anything differs, and the caller falls back to the
// listing. Errors are only those that would make the listing fail as well
// (an unreadable file); a database that cannot be read is not an error.
func fsReuse(ctx context.Context, dbPath, dir string, base fsKeyInputs) (Snapshot, bool, error) {
	stored, check, ok := readFSCheck(ctx, dbPath)
	if !ok {
		return Snapshot{}, false, nil
	}
	roots, eligible := fsRoots(dir, base.Patterns)
	if !eligible || !slices.Equal(roots, check.Roots) {
		return Snapshot{}, false, nil
	}
	key, err := fsKey(ctx, base, check, dbPath)
	if err != nil {
		return Snapshot{}, false, err
	}
	if key != stored {
		return Snapshot{}, false, nil
	}
	prev, err := ReadSnapshot(ctx, dbPath)
	if err != nil {
		return Snapshot{}, false, nil
	}
	return prev, true, nil
}

// readFSCheck reads the stored file-system key and check; ok is false when
// there are none.
func readFSCheck(ctx context.Context, dbPath string) (key string, check fsCheck, ok bool) {
	db, err := OpenDatabase(ctx, dbPath)
	if err != nil {
		return "", fsCheck{}, false
	}
	defer db.Close()
	var raw string
	err = db.QueryRowContext(ctx, "SELECT key, check_json FROM reuse_check").Scan(&key, &raw)
	if err != nil {
		return "", fsCheck{}, false
	}
	if err := json.Unmarshal([]byte(raw), &check); err != nil {
		return "", fsCheck{}, false
	}
	return key, check, true
}

// insertFSCheck stores the file-system key and check, when there is one.
func insertFSCheck(ctx context.Context, tx *sql.Tx, key string, check *fsCheck) error {
	if check == nil {
		return nil
	}
	raw, err := json.Marshal(check)
	if err != nil {
		return fmt.Errorf("encode reuse check: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO reuse_check (key, check_json) VALUES (?, ?)", key, string(raw)); err != nil {
		return fmt.Errorf("insert reuse check: %w", err)
	}
	return nil
}
