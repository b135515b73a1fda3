// Package safefile reads the small files assay keeps beside its databases
// (lock files, SHA-256 records), where anything may have been put: without
// following a symbolic link, without blocking on a FIFO or device, and
// within a size bound.
package safefile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadSmall reads path if it is a regular file of at most max bytes, opened
// without following a symbolic link (syscall.ELOOP) and without blocking.
// Errors: the open's; "not a regular file (MODE)"; "N bytes, more than MAX".
func ReadSmall(path string, max int64) ([]byte, error) {
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
