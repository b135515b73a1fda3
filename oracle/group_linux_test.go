//go:build linux

package oracle

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		stat      string
		wantState byte
		wantPgrp  int
		wantOK    bool
	}{
		{name: "plain", stat: "123 (sleep) S 1 120 120 0 -1", wantState: 'S', wantPgrp: 120, wantOK: true},
		{name: "comm with spaces and parens", stat: "123 (a) (b c) Z 1 77 77 0", wantState: 'Z', wantPgrp: 77, wantOK: true},
		{name: "truncated", stat: "123 (x) R", wantOK: false},
		{name: "no comm", stat: "garbage", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, pgrp, ok := parseProcStat([]byte(tt.stat))
			if ok != tt.wantOK || (ok && (state != tt.wantState || pgrp != tt.wantPgrp)) {
				t.Fatalf("parseProcStat(%q) = %q, %d, %v; want %q, %d, %v", tt.stat, state, pgrp, ok, tt.wantState, tt.wantPgrp, tt.wantOK)
			}
		})
	}
}

// TestGroupAlive covers both paths of groupAlive: a group with no process at all (kill(-pgid, 0)
// is ESRCH, /proc is not read), a group whose only process is a zombie (it exists, and the /proc
// scan must not count it), and a group with a live process.
func TestGroupAlive(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T, name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	check := func(t *testing.T, pgid int, wantExists, wantAlive bool) {
		t.Helper()
		exists, err := groupExists(pgid)
		if err != nil || exists != wantExists {
			t.Fatalf("groupExists(%d) = %v, %v; want %v", pgid, exists, err, wantExists)
		}
		alive, err := groupAlive(pgid)
		if err != nil || alive != wantAlive {
			t.Fatalf("groupAlive(%d) = %v, %v; want %v", pgid, alive, err, wantAlive)
		}
	}

	t.Run("reaped group is gone without a scan", func(t *testing.T) {
		t.Parallel()
		cmd := start(t, "true")
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		check(t, cmd.Process.Pid, false, false)
	})
	t.Run("zombie exists but is not alive", func(t *testing.T) {
		t.Parallel()
		cmd := start(t, "true")
		defer cmd.Wait()
		pid := cmd.Process.Pid
		// Not reaped: the child stays a zombie until Wait. Poll its state with a deadline.
		deadline := time.Now().Add(10 * time.Second)
		for {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				t.Fatal(err)
			}
			if state, _, ok := parseProcStat(data); ok && state == 'Z' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d did not become a zombie: %s", pid, data)
			}
			time.Sleep(time.Millisecond)
		}
		check(t, pid, true, false)
	})
	t.Run("live process is alive", func(t *testing.T) {
		t.Parallel()
		cmd := start(t, "sleep", "30")
		defer func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}()
		check(t, cmd.Process.Pid, true, true)
	})
}
