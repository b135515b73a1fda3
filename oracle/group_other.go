//go:build unix && !linux

package oracle

// groupAlive reports whether any process of process group pgid exists, using
// kill(-pgid, 0) (POSIX kill(2), [groupExists]). Unlike the Linux
// implementation it counts zombies that have not been reaped yet, so it may
// report a group alive for a little longer than it really is (a false cleanup
// fault, never a false pass).
func groupAlive(pgid int) (bool, error) {
	return groupExists(pgid)
}
