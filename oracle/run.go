package oracle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Default bounds of [Run].
const (
	// DefaultDeadline is the execution deadline used when Command.Deadline
	// (or Options.Deadline) is zero or negative.
	DefaultDeadline = 10 * time.Second
	// DefaultCleanup is the cleanup deadline used when Command.Cleanup (or
	// Options.Cleanup) is zero or negative.
	DefaultCleanup = time.Second
)

// outputPollInterval is how often the runner checks the output file's size
// against Command.OutputLimit.
const outputPollInterval = 20 * time.Millisecond

// groupPollInterval is how often the runner re-kills and re-inspects a process
// group while it waits for the group to disappear.
const groupPollInterval = 5 * time.Millisecond

// ErrInvalidCommand is returned (wrapped) by [Run] when a [Command] cannot be
// started as given: empty Path, or an OutputPath that cannot be created.
var ErrInvalidCommand = errors.New("oracle: invalid command")

// Command is one bounded subprocess execution.
type Command struct {
	// Path is the executable. A name without a slash is looked up in the PATH
	// of Env (never in the caller's PATH); a relative path with a slash is
	// relative to Dir.
	Path string
	// Args are the arguments after argv[0] (argv[0] is Path).
	Args []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Env is the COMPLETE environment of the process, "KEY=value" entries.
	// Nothing is inherited implicitly: nil or empty means an empty
	// environment. Use [MinimalEnv] for member code.
	Env []string
	// OutputPath is the file that receives stdout and stderr (created or
	// truncated, mode 0600). It is a file, never a pipe, so a descendant
	// holding the output open cannot block the runner. Empty discards output
	// to os.DevNull.
	OutputPath string
	// Deadline is the execution deadline, measured from start; zero or
	// negative means DefaultDeadline (10s).
	Deadline time.Duration
	// Cleanup is how long the runner waits, after the main process has ended
	// or been killed, for every process of the group to be gone; zero or
	// negative means DefaultCleanup (1s).
	Cleanup time.Duration
	// OutputLimit bounds the output file, in bytes; zero or negative means
	// no bound. The runner checks the file's size every outputPollInterval
	// while the command runs and once after it ends; past the limit the
	// whole group is killed and RunResult.OutputExceeded is set. A single
	// write may overshoot the limit before the runner sees it; the limit
	// protects the disk from a command that writes without end, it is not
	// a quota.
	OutputLimit int64
}

// RunResult is what [Run] observed. Exactly one of normal exit, TimedOut,
// Cancelled and a kill for OutputExceeded describes how the main process
// ended; Leftover and CleanupFault describe the rest of its process group.
type RunResult struct {
	// ExitCode is the main process's exit status, or -1 when it was killed by
	// a signal, was not started, or could not be reaped within Cleanup.
	ExitCode int
	// TimedOut reports that Deadline passed; the whole process group was
	// killed.
	TimedOut bool
	// Cancelled reports that ctx was done (cancelled or past its own
	// deadline) before the main process ended; the group was killed. It is
	// also set, with nothing started, when ctx was already done.
	Cancelled bool
	// Leftover reports that processes of the group were still alive after the
	// main process exited on its own; they were killed. This is a cleanup
	// fault of the command.
	Leftover bool
	// CleanupFault reports that processes of the group (or the main process)
	// were still alive when the Cleanup deadline passed despite SIGKILL.
	CleanupFault bool
	// OutputExceeded reports that the output file grew past
	// Command.OutputLimit, while the command ran (the group was then killed;
	// ExitCode is -1) or by the time it ended.
	OutputExceeded bool
	// Duration is the wall time from start until the main process ended or
	// was killed.
	Duration time.Duration
}

// Run starts the command in its own process group (Setpgid, pgid = pid),
// waits up to Deadline, and kills the whole group (SIGKILL to -pgid, and to
// the main pid in case it left the group) when the deadline passes or ctx is
// done, or when the output file outgrows OutputLimit. After the main process
// exits on its own, any process of the group still alive is killed and
// reported as Leftover. In every case Run then confirms, re-killing, that the
// group is gone within Cleanup, and sets CleanupFault when it is not.
//
// Run returns an error only when the command cannot be started: empty Path or
// unusable OutputPath (wrapping [ErrInvalidCommand]), an executable not found
// in Env's PATH (wrapping exec.ErrNotFound), or a start failure from the OS.
// Every outcome of a started process is described by the RunResult. When ctx
// is already done, nothing is started and the result has Cancelled set.
//
// Run is safe for concurrent use; each call owns its own process group.
// Processes that leave the group (setsid, setpgid) are not seen or killed.
func Run(ctx context.Context, c Command) (RunResult, error) {
	res := RunResult{ExitCode: -1}
	if c.Path == "" {
		return res, fmt.Errorf("%w: empty Path", ErrInvalidCommand)
	}
	deadline := c.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	cleanup := c.Cleanup
	if cleanup <= 0 {
		cleanup = DefaultCleanup
	}
	path, err := resolveExecutable(c.Path, c.Env)
	if err != nil {
		return res, err
	}
	if ctx.Err() != nil {
		res.Cancelled = true
		return res, nil
	}
	outPath := c.OutputPath
	if outPath == "" {
		outPath = os.DevNull
	}
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return res, fmt.Errorf("%w: output %s: %w", ErrInvalidCommand, outPath, err)
	}
	defer out.Close()

	env := make([]string, len(c.Env))
	copy(env, c.Env)
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{c.Path}, c.Args...),
		Dir:         c.Dir,
		Env:         env, // non-nil: exec.Cmd inherits os.Environ() only for a nil Env
		Stdout:      out,
		Stderr:      out,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("oracle: start %s in %q: %w", c.Path, c.Dir, err)
	}
	pid := cmd.Process.Pid
	pgid := pid
	done := make(chan struct{})
	go func() {
		// The error is read from cmd.ProcessState; with file outputs Wait has
		// no copying goroutines, so it returns as soon as the process is reaped.
		_ = cmd.Wait()
		close(done)
	}()

	timer := time.NewTimer(deadline)
	defer timer.Stop()
	var poll <-chan time.Time
	if c.OutputLimit > 0 {
		ticker := time.NewTicker(outputPollInterval)
		defer ticker.Stop()
		poll = ticker.C
	}
	exited := false
wait:
	for {
		select {
		case <-done:
			exited = true
			break wait
		case <-timer.C:
			res.TimedOut = true
			break wait
		case <-ctx.Done():
			res.Cancelled = true
			break wait
		case <-poll:
			if outputSize(out) > c.OutputLimit {
				res.OutputExceeded = true
				break wait
			}
		}
	}
	if exited {
		res.Duration = time.Since(start)
		alive, err := groupAlive(pgid)
		if err != nil || alive {
			res.Leftover = alive
			killGroup(pgid)
		}
		if !waitGroupGone(pgid, cleanup) {
			res.CleanupFault = true
		}
	} else {
		killGroup(pgid)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		res.Duration = time.Since(start)
		cleanupEnd := time.Now().Add(cleanup)
		cleanupTimer := time.NewTimer(cleanup)
		defer cleanupTimer.Stop()
		select {
		case <-done:
			exited = true
		case <-cleanupTimer.C:
			// The main process survived SIGKILL (e.g. uninterruptible sleep);
			// the Wait goroutine ends when the kernel finally reaps it.
			res.CleanupFault = true
		}
		if !waitGroupGone(pgid, time.Until(cleanupEnd)) {
			res.CleanupFault = true
		}
	}
	if exited && cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if c.OutputLimit > 0 && outputSize(out) > c.OutputLimit {
		res.OutputExceeded = true
	}
	return res, nil
}

// outputSize returns the size of the open output file in bytes, or 0 when
// it cannot be read (os.DevNull, a special file).
func outputSize(f *os.File) int64 {
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return 0
	}
	return info.Size()
}

// killGroup sends SIGKILL to every process of the group. ESRCH (the group is
// already gone) is the expected outcome and is ignored.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitGroupGone re-kills the group and polls until no live process of it
// remains, for at most within. It reports whether the group is gone. An error
// inspecting the group counts as alive (fail closed).
func waitGroupGone(pgid int, within time.Duration) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(groupPollInterval)
	defer tick.Stop()
	for {
		alive, err := groupAlive(pgid)
		if err == nil && !alive {
			return true
		}
		// A member may have forked after the previous kill; kill again.
		killGroup(pgid)
		select {
		case <-deadline.C:
			alive, err = groupAlive(pgid)
			return err == nil && !alive
		case <-tick.C:
		}
	}
}

// resolveExecutable finds the executable for name. A name containing a path
// separator is used as given; a bare name is searched in the PATH entry of env
// (empty and relative PATH entries are skipped so the working directory is
// never searched implicitly).
func resolveExecutable(name string, env []string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		return name, nil
	}
	pathList := envValue(env, "PATH")
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		candidate := filepath.Join(dir, name)
		info, err := os.Stat(candidate)
		if err != nil {
			continue
		}
		if info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("oracle: %q not found in the command environment's PATH %q: %w", name, pathList, exec.ErrNotFound)
}

// envValue returns the value of the last key=value entry for key in env, as
// exec does when an environment holds duplicates.
func envValue(env []string, key string) string {
	value := ""
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == key {
			value = v
		}
	}
	return value
}
