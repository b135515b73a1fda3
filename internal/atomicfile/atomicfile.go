// Package atomicfile replaces the content of a file so that a reader, or a
// process that starts after a crash, finds either the old content or the new
// one, whole, and never a mix or a truncated file.
//
// The method is the POSIX one: write a temporary file in the target's own
// directory (rename(2) is atomic only within one file system), fsync it,
// rename it over the target, then fsync the directory so that the rename
// itself is on disk (without that a power loss can undo it; see fsync(2),
// "Calling fsync() does not necessarily ensure that the entry in the
// directory containing the file has also reached disk").
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Write replaces the file at path with data, permission bits perm.
//
// perm is set exactly (the process umask does not apply) and is fsynced with
// the data. The temporary file is ".<base>.tmp-<random digits>" in path's
// directory; it is removed on every error before the rename. A process
// killed mid-write leaves path as it was and may leave that temporary file
// behind. What is at path is replaced, not written through: a symbolic link
// there is replaced by the file (its target is untouched); a directory there
// makes the rename fail and is left alone.
//
// Errors are *fs.PathError naming path: Op "write" when the temporary file
// cannot be created, written, chmod-ed, synced or closed (path unchanged),
// "rename" when it cannot be renamed over path (path unchanged), "sync
// directory of" when path already holds data but its directory could not be
// synced (the new content is visible, and may not survive a power loss). A
// file system that cannot sync a directory at all (fsync(2) EINVAL, or
// unsupported; and Windows, whose directory handles cannot be flushed) is not
// an error. errors.Is sees the cause (fs.ErrNotExist for a missing directory,
// fs.ErrPermission, ...).
//
// Concurrent Writes to one path are safe: each installs a whole file, the
// last rename wins.
func Write(path string, data []byte, perm fs.FileMode) error {
	tmp, err := stage(path, data, perm)
	if err != nil {
		return err
	}
	return install(tmp, path)
}

// stage writes data to a new temporary file next to path, with perm, synced
// and closed, and returns its name. On error nothing is left behind.
func stage(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the temporary file's name is no one's concern: path is named
		}
		return "", &fs.PathError{Op: "write", Path: path, Err: err}
	}
	name := f.Name()
	fail := func(err error) (string, error) {
		_ = f.Close()
		_ = os.Remove(name)
		return "", &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(name)
		return "", &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return name, nil
}

// install renames the staged file tmp over path and syncs path's directory.
func install(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err // it names the temporary file, which is gone
		}
		return &fs.PathError{Op: "rename", Path: path, Err: err}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return &fs.PathError{Op: "sync directory of", Path: path, Err: err}
	}
	return nil
}

// syncDir fsyncs the directory dir, where the file system can.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}
