//go:build linux

package oracle

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// groupAlive reports whether any process of process group pgid is alive.
// Zombies (state Z) and dead tasks (state X) do not count: they have exited
// and only wait for their parent or init to reap them, which may lag.
//
// It first asks the kernel with kill(-pgid, 0) (kill(2)): ESRCH means no
// process at all, zombie or not, is in the group, so it is not alive and
// /proc is not read; this is the common case once the runner has reaped the
// main process. Only when the group exists (success or EPERM) does it scan
// /proc/<pid>/stat (proc(5): fields 3 state and 5 pgrp) to tell live
// processes from zombies; a process that vanishes during the scan is skipped.
// Any other kill error, or an error listing /proc, is returned so that the
// caller can fail closed.
func groupAlive(pgid int) (bool, error) {
	exists, err := groupExists(pgid)
	if err != nil || !exists {
		return false, err
	}
	return groupScanAlive(pgid)
}

// groupScanAlive scans /proc for a process of group pgid that is neither a
// zombie nor dead.
func groupScanAlive(pgid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("oracle: list /proc: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		state, pgrp, ok := parseProcStat(data)
		if !ok {
			continue
		}
		if pgrp == pgid && state != 'Z' && state != 'X' {
			return true, nil
		}
	}
	return false, nil
}

// parseProcStat extracts the state and process group from the contents of
// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...". comm may contain spaces
// and parentheses, so fields are counted after the last ')'.
func parseProcStat(data []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 > len(data) {
		return 0, 0, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(fields[2]))
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], pgrp, true
}
