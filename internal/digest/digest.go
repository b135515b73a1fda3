// Package digest computes the SHA-256 (FIPS 180-4) of a file's content as
// assay records digests: 64 lowercase hex characters.
//
// Only a regular file has a content to digest. Anything else at the path is
// refused without reading it: a FIFO would block the reader until some
// writer appears, a device such as /dev/zero never ends, and a directory has
// no bytes. The file is opened non-blocking, so that even opening a FIFO
// returns at once.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error File and FileIn return for a path
// that names something other than a regular file (after symbolic links).
var ErrNotRegular = errors.New("not a regular file")

// File returns the SHA-256 hex (64 lowercase chars) of the regular file at
// path, reading it in a stream (the file is not held in memory). A symbolic
// link is followed.
//
// Errors are *fs.PathError naming path: from opening it (fs.ErrNotExist,
// fs.ErrPermission, ...), ErrNotRegular (with what is there: "a directory",
// "a FIFO", ...), or a read error. Safe for concurrent use.
func File(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	return read(f, path)
}

// FileIn is File for name relative to root: os.Root refuses a name that
// leaves root, through ".." or a symbolic link, with an error.
func FileIn(root *os.Root, name string) (string, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	return read(f, name)
}

// read digests the open file f (named path in errors) and closes it.
func read(f *os.File, path string) (string, error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", &fs.PathError{Op: "digest", Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return "", &fs.PathError{Op: "digest", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(fi.Mode()))}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", &fs.PathError{Op: "digest", Path: path, Err: err}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// kind names what a non-regular file is, for an error message.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	default:
		return "file type " + m.Type().String()
	}
}
