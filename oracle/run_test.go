package oracle

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shell returns the absolute path of sh, skipping the test without one.
func shell(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	return sh
}

// killOnCleanup makes sure a process the test caused to start does not
// outlive a failing test.
func killOnCleanup(t *testing.T, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

func TestRunExitCodeAndOutputFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out.log")
	res, err := Run(context.Background(), Command{
		Path:       shell(t),
		Args:       []string{"-c", "echo to-stdout; echo to-stderr >&2; pwd; exit 3"},
		Dir:        dir,
		Env:        MinimalEnv(),
		OutputPath: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.TimedOut || res.Cancelled || res.Leftover || res.CleanupFault {
		t.Fatalf("Run = %+v, want exit 3 and no flags", res)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"to-stdout", "to-stderr", dir} {
		if !strings.Contains(string(data), want) {
			t.Errorf("output %q lacks %q", data, want)
		}
	}
}

func TestRunDeadlineKillsWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	res, err := Run(context.Background(), Command{
		Path:       shell(t),
		Args:       []string{"-c", `sleep 300 & echo $! > "$1"; wait`, "sh", pidFile},
		Env:        MinimalEnv(),
		OutputPath: filepath.Join(dir, "out.log"),
		Deadline:   2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, pidFile, time.Second)
	killOnCleanup(t, pid)
	if !res.TimedOut || res.ExitCode != -1 || res.Cancelled || res.CleanupFault {
		t.Fatalf("Run = %+v, want TimedOut, exit -1, no cleanup fault", res)
	}
	assertProcessGone(t, pid)
}

func TestRunCancellationKillsWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := Run(ctx, Command{
			Path:       shell(t),
			Args:       []string{"-c", `sleep 300 & echo $! > "$1"; wait`, "sh", pidFile},
			Env:        MinimalEnv(),
			OutputPath: filepath.Join(dir, "out.log"),
			Deadline:   time.Minute,
		})
		done <- outcome{res, err}
	}()
	pid := readPID(t, pidFile, 30*time.Second)
	killOnCleanup(t, pid)
	cancel()
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if !got.res.Cancelled || got.res.TimedOut || got.res.ExitCode != -1 || got.res.CleanupFault {
		t.Fatalf("Run = %+v, want Cancelled, exit -1", got.res)
	}
	assertProcessGone(t, pid)
}

// A background child that keeps the output file open must neither hang Run
// nor survive it: it is a leftover, killed, and the main exit code is kept.
func TestRunLeftoverIsKilledAndReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	res, err := Run(context.Background(), Command{
		Path:       shell(t),
		Args:       []string{"-c", `sleep 300 & echo $! > "$1"; exit 0`, "sh", pidFile},
		Env:        MinimalEnv(),
		OutputPath: filepath.Join(dir, "out.log"),
		Deadline:   time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, pidFile, time.Second)
	killOnCleanup(t, pid)
	if !res.Leftover || res.ExitCode != 0 || res.TimedOut || res.CleanupFault {
		t.Fatalf("Run = %+v, want Leftover with exit 0 and no cleanup fault", res)
	}
	assertProcessGone(t, pid)
}

func TestRunCleanExitHasNoLeftover(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Command{Path: shell(t), Args: []string{"-c", "sleep 0.01 & wait; exit 0"}, Env: MinimalEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if res != (RunResult{Duration: res.Duration}) {
		t.Fatalf("Run = %+v, want a clean exit 0", res)
	}
}

// The environment is exactly Command.Env: a credential in the caller's
// environment never reaches the process, not even with a nil Env.
func TestRunEnvironmentIsComplete(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "secret")
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env on PATH")
	}
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{name: "nil env is empty", env: nil, want: ""},
		{name: "given entries only", env: []string{"ONLY=1"}, want: "ONLY=1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.log")
			res, err := Run(context.Background(), Command{Path: envBin, Env: tt.env, OutputPath: out})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("env exited %d", res.ExitCode)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.want {
				t.Fatalf("environment = %q, want %q", data, tt.want)
			}
		})
	}
}

func TestRunAlreadyCancelledStartsNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "started")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Command{Path: shell(t), Args: []string{"-c", `: > "$1"`, "sh", marker}, Env: MinimalEnv()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled || res.ExitCode != -1 {
		t.Fatalf("Run = %+v, want Cancelled and exit -1", res)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran: stat %s: %v", marker, err)
	}
}

func TestRunRefusesBadCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cmd  Command
		want error
	}{
		{name: "empty path", cmd: Command{}, want: ErrInvalidCommand},
		{name: "bare name not in the command's PATH", cmd: Command{Path: "sh", Env: []string{"PATH=" + t.TempDir()}}, want: exec.ErrNotFound},
		{name: "bare name with no PATH at all", cmd: Command{Path: "sh"}, want: exec.ErrNotFound},
		{name: "output directory missing", cmd: Command{Path: "/bin/sh", OutputPath: filepath.Join(t.TempDir(), "no", "out.log")}, want: ErrInvalidCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Run(context.Background(), tt.cmd)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run error = %v, want %v", err, tt.want)
			}
			if res.ExitCode != -1 {
				t.Fatalf("ExitCode = %d, want -1 for a command not started", res.ExitCode)
			}
		})
	}
}

func TestResolveExecutableUsesCommandPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool := filepath.Join(dir, "mytool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Command{Path: "mytool", Env: []string{"PATH=relative/dir:" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 {
		t.Fatalf("ExitCode = %d, want 7 from the tool found in the command's PATH", res.ExitCode)
	}
}

func TestMinimalEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "secret")
	t.Setenv("ASSAY_GATEWAY_URL", "http://127.0.0.1:1")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid")
	t.Setenv("GOFLAGS", "-race")
	t.Setenv("GOPROXY", "https://proxy.golang.org")
	t.Setenv("GOCACHE", "/tmp/some-cache")
	env := MinimalEnv()
	seen := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("malformed entry %q", kv)
		}
		if _, dup := seen[k]; dup {
			t.Fatalf("duplicate variable %s in %q", k, env)
		}
		seen[k] = v
	}
	for _, k := range []string{"OPENAI_API_KEY", "ASSAY_GATEWAY_URL", "HTTPS_PROXY"} {
		if _, ok := seen[k]; ok {
			t.Errorf("MinimalEnv passes %s", k)
		}
	}
	for k, want := range map[string]string{
		"PATH": os.Getenv("PATH"), "GOCACHE": "/tmp/some-cache", "GOFLAGS": "-mod=mod", "GOPROXY": "off",
		"GOTOOLCHAIN": "local", "GOWORK": "off", "CGO_ENABLED": "0",
	} {
		if seen[k] != want {
			t.Errorf("%s = %q, want %q", k, seen[k], want)
		}
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "GOCACHE": true, "GOPATH": true, "GOMODCACHE": true, "GOROOT": true,
		"TMPDIR": true, "GOFLAGS": true, "GOPROXY": true, "GOTOOLCHAIN": true, "GOWORK": true, "CGO_ENABLED": true}
	for k := range seen {
		if !allowed[k] {
			t.Errorf("MinimalEnv passes unexpected variable %s", k)
		}
	}
}

// A command that writes without end is killed once its output file passes
// the limit; one that writes past it and exits is flagged too.
func TestRunOutputLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		killed bool
		either bool
	}{
		{name: "endless writer is killed", script: "yes", killed: true},
		// head may exit before the limit is noticed or be killed when it is: either way the output
		// past the limit is flagged (whether it was killed depends on scheduling, not on Run).
		{name: "writer that exits is flagged", script: "head -c 300000 /dev/zero", either: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out.log")
			res, err := Run(context.Background(), Command{
				Path: shell(t), Args: []string{"-c", tt.script}, Env: MinimalEnv(), OutputPath: out,
				Deadline: time.Minute, OutputLimit: 100000,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OutputExceeded || res.TimedOut || res.Cancelled {
				t.Fatalf("Run = %+v, want OutputExceeded", res)
			}
			if !tt.either && tt.killed != (res.ExitCode == -1) {
				t.Fatalf("ExitCode = %d, killed want %v", res.ExitCode, tt.killed)
			}
		})
	}
	res, err := Run(context.Background(), Command{Path: shell(t), Args: []string{"-c", "echo small"}, Env: MinimalEnv(),
		OutputPath: filepath.Join(t.TempDir(), "out.log"), OutputLimit: 100000})
	if err != nil || res.OutputExceeded || res.ExitCode != 0 {
		t.Fatalf("Run = %+v, %v; want a clean exit under the limit", res, err)
	}
}
