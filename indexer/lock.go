package indexer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/assay-audit/assay/internal/filelock"
)

// ErrUnusableLockPath is returned (wrapped, naming the path and what is
// there) when the path beside the database where its lock goes holds
// something a lock cannot safely be taken on: a symbolic link, a FIFO, a
// device or directory, a hard link, or a file that is not a lock file. It
// is also ErrInvalidOptions (errors.Is): the database path given cannot be
// used as it is.
var ErrUnusableLockPath error = lockPathError{}

type lockPathError struct{}

func (lockPathError) Error() string { return "indexer: unusable lock path" }

func (lockPathError) Is(target error) bool { return target == ErrInvalidOptions }

// unusableLockPathError is filelock's refusal of the lock path, read as
// ErrUnusableLockPath.
type unusableLockPathError struct{ err error }

func (e unusableLockPathError) Error() string {
	return "indexer: " + e.err.Error() + " (it is where the database's lock goes)"
}

func (e unusableLockPathError) Is(target error) bool {
	return target == ErrUnusableLockPath || target == ErrInvalidOptions
}

func (e unusableLockPathError) Unwrap() error { return e.err }

// lockPath is the lock file of the database at dbPath. The "-" after the
// database's name (as in SQLite's -journal) puts it among the database's
// own files (isDatabaseFile), which the reuse key leaves out: whether it
// exists never changes a key.
func lockPath(dbPath string) string { return dbPath + "-lock" }

// dbLock is the exclusive lock an Index run holds on its database.
type dbLock struct {
	lock *filelock.Lock
	// created are the directories (deepest first) this run created to
	// hold the lock file; a failed run removes them when they are empty.
	created []string
}

// lockDatabase takes the exclusive lock of the database at dbPath (the
// file lockPath names; internal/filelock), creating its directory when
// missing. When another index holds it, lockDatabase calls progress once
// and waits until it is released or ctx is done (an error wrapping
// ctx.Err()). The directory may vanish meanwhile (a failed run removes the
// one it created): it is created again.
func lockDatabase(ctx context.Context, dbPath string, progress func(string)) (*dbLock, error) {
	path := lockPath(dbPath)
	dir := filepath.Dir(dbPath)
	opts := filelock.Options{Wait: filelock.Forever, RemoveOnRelease: true}
	told := false
	opts.Waiting = func(h *filelock.HeldError) {
		if !told && progress != nil {
			progress(fmt.Sprintf("waiting for another index of %s to finish (%s)", dbPath, holder(h)))
		}
		told = true
	}
	for {
		created := missingDirs(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("indexer: create database directory %s: %w", dir, err)
		}
		l, err := filelock.Acquire(ctx, path, opts)
		switch {
		case err == nil:
			return &dbLock{lock: l, created: created}, nil
		case errors.Is(err, filelock.ErrUnusablePath):
			return nil, unusableLockPathError{err}
		case ctx.Err() != nil && told:
			return nil, fmt.Errorf("indexer: stopped waiting for another index of %s: %w", dbPath, err)
		case errors.Is(err, fs.ErrNotExist):
			continue // the directory was removed while the file was opened
		}
		return nil, fmt.Errorf("indexer: %w", err)
	}
}

// holder says who holds a lock, for the waiting message: "pid N holds
// PATH", or "PATH is locked" when the holder has not recorded itself (yet).
func holder(h *filelock.HeldError) string {
	if h.PID > 0 {
		return fmt.Sprintf("pid %d holds %s", h.PID, h.Path)
	}
	return h.Path + " is locked"
}

// missingDirs returns dir and its ancestors that do not exist, deepest
// first.
func missingDirs(dir string) []string {
	var out []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}

// release removes the lock file and releases the lock, in that order;
// after a failed run it also removes the directories the run created, when
// nothing else is in them, so that a refused index leaves nothing behind.
func (l *dbLock) release(failed bool) {
	_ = l.lock.Release()
	if failed {
		for _, d := range l.created {
			if os.Remove(d) != nil {
				break
			}
		}
	}
}

// readOnly reports whether err says the file system or the directory's
// permissions refuse a new file.
func readOnly(err error) bool {
	return errors.Is(err, filelock.ErrCannotCreate) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// writable reports whether this process may create files in dir.
func writable(dir string) bool {
	return syscall.Access(dir, 2 /* W_OK */) == nil
}

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
