package indexer

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// vcsState is the git state of the directory being indexed. revision is ""
// when it is unknown, and then dirty carries no information.
type vcsState struct {
	revision string
	dirty    bool
}

// readVCS asks git for HEAD and for uncommitted changes in dir. Any failure
// (git absent, not a checkout, no commit yet, status failing) yields the
// unknown state rather than a partial one: a revision is reported only when
// its dirty flag is known too. Dirty covers the whole work tree, tracked and
// untracked files, because a module can use sources outside its directory
// (replace directives), except the files of the graph database at dbPath
// (see ownFile): the index's own output and lock are not changes to what
// it indexes. dbPath "" excludes nothing.
func readVCS(ctx context.Context, dir, dbPath string) vcsState {
	git, err := exec.LookPath("git")
	if err != nil {
		return vcsState{}
	}
	rev, err := exec.CommandContext(ctx, git, "-C", dir, "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		return vcsState{}
	}
	top, err := exec.CommandContext(ctx, git, "-C", dir, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return vcsState{}
	}
	// Every untracked file by name (not collapsed into its directory), so
	// that a directory holding only the database does not count.
	status, err := exec.CommandContext(ctx, git, "-C", dir, "status", "--porcelain=v1", "-z", "--untracked-files=all").Output()
	if err != nil {
		return vcsState{}
	}
	root := strings.TrimSpace(string(top))
	dirty := false
	entries := bytes.Split(status, []byte{0})
	for i := 0; i < len(entries); i++ {
		e := string(entries[i])
		if len(e) < 4 {
			continue
		}
		paths := []string{e[3:]}
		if (e[0] == 'R' || e[0] == 'C') && i+1 < len(entries) {
			i++ // a rename or copy is followed by its source path
			paths = append(paths, string(entries[i]))
		}
		for _, p := range paths {
			if !ownFile(filepath.Join(root, filepath.FromSlash(p)), dbPath) {
				dirty = true
			}
		}
		if dirty {
			break
		}
	}
	return vcsState{revision: strings.TrimSpace(string(rev)), dirty: dirty}
}

// ownFile reports whether path is one of the graph database's own files
// (isDatabaseFile: the database at dbPath, its companions and temporary
// files, compared by exact name). The directories are compared as given
// and with symbolic links resolved.
func ownFile(path, dbPath string) bool {
	if dbPath == "" {
		return false
	}
	fi, err := os.Lstat(path)
	regular := err == nil && fi.Mode().IsRegular()
	if err != nil {
		// A deleted file (git reports it): judge by its name alone.
		regular = true
	}
	name, dbBase := filepath.Base(path), filepath.Base(dbPath)
	if !isDatabaseFile(name, dbBase, regular) {
		return false
	}
	if filepath.Dir(path) == filepath.Dir(dbPath) {
		return true
	}
	realDir, err := filepath.EvalSymlinks(filepath.Dir(dbPath))
	if err != nil {
		return false
	}
	realPathDir, err := filepath.EvalSymlinks(filepath.Dir(path))
	return err == nil && realPathDir == realDir
}

// modFlagWrites reports whether the go flags (GOFLAGS) let the go command
// update go.mod and go.sum while it lists packages (-mod=mod). GOFLAGS is
// split as the go command splits it (cmd/internal/quoted.Split): on
// spaces, an element may be wrapped in single or double quotes.
func modFlagWrites(goflags string) bool {
	for s := goflags; s != ""; {
		s = strings.TrimLeft(s, " \t\n\r")
		if s == "" {
			break
		}
		var f string
		if q := s[0]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return false // the go command refuses such GOFLAGS
			}
			f, s = s[1:1+end], s[2+end:]
		} else {
			end := strings.IndexAny(s, " \t\n\r")
			if end < 0 {
				end = len(s)
			}
			f, s = s[:end], s[end:]
		}
		if f == "-mod=mod" || f == "--mod=mod" {
			return true
		}
	}
	return false
}
