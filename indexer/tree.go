package indexer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// isWithin reports whether path is dir or inside it (both cleaned).
func isWithin(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// isVCSDir reports whether name is a version control metadata directory:
// the go command neither matches packages in one nor embeds its files, and
// git rewrites files in .git on a plain `git status`.
func isVCSDir(name string) bool {
	switch name {
	case ".git", ".hg", ".svn", ".bzr":
		return true
	}
	return false
}

// hashFiles returns the SHA-256 hex of each path (missing for a file that
// does not exist), on GOMAXPROCS goroutines. A path parsed holds (by
// cleaned path) is not read: it takes the hash of the bytes go/packages
// parsed.
func hashFiles(ctx context.Context, paths []string, parsed map[string]*fileContent) (map[string]string, error) {
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
				if c, ok := parsed[filepath.Clean(paths[i])]; ok {
					sums[i] = c.sum
					continue
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

// hashFile returns path's SHA-256 hex, missing when it does not exist.
func hashFile(h interface {
	io.Writer
	Sum([]byte) []byte
	Reset()
}, path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return missing, nil
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

// listTree returns the digest of every directory under scope.Roots
// (recursively, version control metadata left out) and of scope.Dirs: the
// SHA-256 hex of its entries' names and types, or missing. The database
// at dbPath, its companions and temporary files are left out, and so is
// its directory when nothing else is in it, so that writing the database
// (and creating its directory) does not change a digest; a directory
// holding nothing else is nothing to the go command.
func listTree(ctx context.Context, scope keyScope, dbPath string) (map[string]string, error) {
	out := map[string]string{}
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
	h := sha256.New()
	var list func(dir string, recurse bool) error
	list = func(dir string, recurse bool) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("indexer: list %s: %w", dir, err)
		}
		if _, done := out[dir]; done {
			return nil
		}
		entries, err := read(dir)
		if errors.Is(err, fs.ErrNotExist) {
			out[dir] = missing
			return nil
		}
		if err != nil {
			return fmt.Errorf("indexer: list %s: %w", dir, err)
		}
		h.Reset()
		var sub []string
		for _, e := range entries {
			name, t, kind := e.Name(), e.Type(), "f"
			switch {
			case t.IsDir():
				kind = "d"
				path := filepath.Join(dir, name)
				if isVCSDir(name) {
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
		out[dir] = hex.EncodeToString(h.Sum(nil))
		for _, s := range sub {
			if err := list(s, true); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range scope.Roots {
		if err := list(r, true); err != nil {
			return nil, err
		}
	}
	for _, d := range scope.Dirs {
		if err := list(d, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// markModified gives the hash modifiedWhileIndexed to every file and
// directory of k modified between since and now, and returns them, sorted.
// One that cannot be read (removed since it was hashed) counts as modified.
// One hashed as missing is left as it is: where it matters its directory is
// listed too, and was modified when it was removed or created (a missing
// go.mod above the roots is not watched: the directories there, /tmp, are
// modified all the time). A modification time after now (a clock ahead of
// this one) is not taken for a modification.
func (k *contentKey) markModified(since, now time.Time) []string {
	// Links are followed: the go command reads through them.
	modified := func(path string) bool {
		fi, err := os.Stat(path)
		return err != nil || (!fi.ModTime().Before(since) && !fi.ModTime().After(now))
	}
	var marked []string
	for _, m := range []map[string]string{k.Inputs.Files, k.Inputs.Tree} {
		for p, sum := range m {
			if sum != missing && modified(p) {
				m[p] = modifiedWhileIndexed
				marked = append(marked, p)
			}
		}
	}
	slices.Sort(marked)
	return marked
}
