package evidence

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	helperStoreEnv = "ASSAY_EVIDENCE_HELPER_STORE"
	helperModeEnv  = "ASSAY_EVIDENCE_HELPER_MODE"
)

// TestHelperProcess is not a test: re-executed by the lock tests, it opens the
// store named in its environment, prints "ready" and holds the store until its
// stdin closes.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperStoreEnv)
	if path == "" {
		t.Skip("helper process for the lock tests")
	}
	s, err := Open(context.Background(), path, OpenOptions{ReadOnly: os.Getenv(helperModeEnv) == "read", Command: "assay matrix run"})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		fmt.Println("error:", err)
		os.Exit(4)
	}
	os.Exit(0)
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

func startHelper(t *testing.T, path, mode string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperStoreEnv+"="+path, helperModeEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		_ = h.stdin.Close()
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		if l != "ready" {
			t.Fatalf("helper process: %q", l)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("helper process never became ready")
	}
	return h
}

// release lets the helper close the store and exit, and waits for it.
func (h *helper) release(t *testing.T) {
	t.Helper()
	if err := h.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper exit: %v", err)
	}
}

func wantLocked(t *testing.T, err error, pid int, command string) {
	t.Helper()
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) {
		t.Fatalf("error %v, want *LockedError", err)
	}
	if le.PID != pid || le.Command != command {
		t.Fatalf("LockedError names pid %d (%q), want pid %d (%q)", le.PID, le.Command, pid, command)
	}
	if pid > 0 && !strings.HasSuffix(err.Error(), fmt.Sprintf("open for writing by pid %d (%s)", pid, command)) {
		t.Fatalf("message %q does not name the holder", err)
	}
	// A library error names no command-line flag: the command says how to wait.
	if strings.Contains(err.Error(), "--") {
		t.Fatalf("message %q names a flag", err)
	}
}

func TestLockHeldByWriterSubprocess(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	mustClose(t, mustOpen(t, path, OpenOptions{}))
	h := startHelper(t, path, "write")
	pid := h.cmd.Process.Pid

	for _, opts := range []OpenOptions{
		{Command: "second writer"},
		{ReadOnly: true},
		{Wait: 30 * time.Millisecond},
		{ReadOnly: true, Wait: 30 * time.Millisecond},
	} {
		s, err := Open(ctx, path, opts)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%+v) succeeded while pid %d holds the writer lock", opts, pid)
		}
		wantLocked(t, err, pid, "assay matrix run")
	}

	// A waiting writer gets the store once the holder exits.
	type result struct {
		s   *Store
		err error
	}
	started := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		close(started)
		s, err := Open(ctx, path, OpenOptions{Wait: 5 * time.Minute, Command: "waiting writer"})
		done <- result{s, err}
	}()
	<-started
	select {
	case r := <-done:
		t.Fatalf("waiting Open returned while the lock was held: %v", r.err)
	default:
	}
	h.release(t)
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("waiting Open never returned after the holder exited")
	}
	if r.err != nil {
		t.Fatalf("waiting Open: %v", r.err)
	}
	lockInfo, err := os.ReadFile(path + ".lock")
	if err != nil || string(lockInfo) != strconv.Itoa(os.Getpid())+" waiting writer\n" {
		t.Errorf("lock file = %q, %v; want this process's pid and command", lockInfo, err)
	}
	mustClose(t, r.s)
	if info, _ := os.ReadFile(path + ".lock"); len(info) != 0 {
		t.Errorf("lock file still names a holder after Close: %q", info)
	}
}

func TestLockAfterHolderKilled(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	mustClose(t, mustOpen(t, path, OpenOptions{}))
	h := startHelper(t, path, "write")
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	// The kernel released the flock; the stale holder record must not block.
	ro, err := Open(ctx, path, OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("reader after the holder was killed: %v", err)
	}
	mustClose(t, ro)
	s, err := Open(ctx, path, OpenOptions{})
	if err != nil {
		t.Fatalf("writer after the holder was killed: %v", err)
	}
	mustClose(t, s)
}

func TestLockHeldByReaderSubprocess(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	mustClose(t, mustOpen(t, path, OpenOptions{}))
	h := startHelper(t, path, "read")

	_, err := Open(ctx, path, OpenOptions{})
	wantLocked(t, err, 0, "")
	if !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("message %q", err)
	}
	// Readers share the store.
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	if _, err := ro.Runs(ctx); err != nil {
		t.Fatal(err)
	}
	mustClose(t, ro)
	h.release(t)
	mustClose(t, mustOpen(t, path, OpenOptions{}))
}

func TestLockWithinProcess(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "assay index"})
	_, err := Open(ctx, path, OpenOptions{ReadOnly: true})
	wantLocked(t, err, os.Getpid(), "assay index")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Open(cctx, path, OpenOptions{Wait: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context: %v, want context.Canceled", err)
	}
	mustClose(t, s)
	mustClose(t, mustOpen(t, path, OpenOptions{ReadOnly: true}))
}
