//go:build unix

package oracle

import (
	"errors"
	"fmt"
	"syscall"
)

// groupExists reports whether process group pgid has any process, zombies
// included, using kill(-pgid, 0). EPERM means a process exists that we may
// not signal.
func groupExists(pgid int) (bool, error) {
	err := syscall.Kill(-pgid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, nil
	case errors.Is(err, syscall.ESRCH):
		return false, nil
	default:
		return false, fmt.Errorf("oracle: kill(-%d, 0): %w", pgid, err)
	}
}
