//go:build unix && !linux

package oracle

import (
	"errors"
	"fmt"
	"syscall"
)

// groupAlive reports whether any process of process group pgid exists, using
// kill(-pgid, 0) (POSIX kill(2)). Unlike the Linux implementation it counts
// zombies that have not been reaped yet, so it may report a group alive for a
// little longer than it really is (a false cleanup fault, never a false pass).
func groupAlive(pgid int) (bool, error) {
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
