package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ShellConfig bounds the shell tool.
type ShellConfig struct {
	// Env is the subprocess's entire environment (KEY=value). Nothing else of the parent's
	// environment is passed, so credentials in it never reach a command (SAFETY.md rule 13).
	Env []string
	// MaxOutputBytes caps stdout and stderr each (bytes); the rest is dropped and marked truncated.
	MaxOutputBytes int
	// DefaultTimeout and MaxTimeout bound a command's wall time; the model may ask for less than
	// MaxTimeout with timeout_seconds.
	DefaultTimeout, MaxTimeout time.Duration
}

// shellEnvAllowed are the parent variables DefaultShellConfig passes on: what a toolchain needs to
// run, none of them a credential.
var shellEnvAllowed = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "GOCACHE", "GOMODCACHE", "GOPATH",
	"GOFLAGS", "GOTOOLCHAIN", "GOPROXY", "CGO_ENABLED", "CC", "CXX"}

// DefaultShellConfig passes only a fixed allow-list of the parent's variables (PATH, HOME, locale,
// Go toolchain settings), caps output at 64 KiB per stream, and allows 60 s by default, 600 s at most.
func DefaultShellConfig() ShellConfig {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if slices.Contains(shellEnvAllowed, k) {
			env = append(env, kv)
		}
	}
	return ShellConfig{Env: env, MaxOutputBytes: 64 << 10, DefaultTimeout: 60 * time.Second, MaxTimeout: 600 * time.Second}
}

type shellArgs struct {
	Argv           []string `json:"argv"`
	Dir            string   `json:"dir"`
	TimeoutSeconds int      `json:"timeout_seconds"`
}

// ShellResult is the shell tool's result, as JSON.
type ShellResult struct {
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
}

// Shell returns the shell tool: it runs one command (argv, no shell interpretation) as a bounded
// subprocess whose working directory is rooted in the member's directory. It is declared execute:
// it is never retried, and a command killed at its timeout ends unknown (it may have acted). The
// command runs with the user's operating-system permissions: rooting fixes its working directory,
// it is not a sandbox, which is why policy decides who may call it.
func Shell(cfg ShellConfig) Tool {
	maxSec := int(cfg.MaxTimeout / time.Second)
	return Tool{
		Name: "shell",
		Doc: "Run one command (an argv list, no shell syntax) in your working directory or a subdirectory of it, " +
			"with a time limit. Returns exit_code, stdout and stderr as JSON.",
		Access: Execute,
		Parameters: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"argv":{"type":"array","minItems":1,"maxItems":256,"items":{"type":"string"},"description":"program and arguments, e.g. [\"go\",\"test\",\"./...\"]"},`+
			`"dir":{"type":"string","description":"relative working directory (default: your working directory)"},`+
			`"timeout_seconds":{"type":"integer","minimum":1,"maximum":%d}},`+
			`"required":["argv"],"additionalProperties":false}`, maxSec)),
		Paths: func(raw json.RawMessage) ([]string, error) {
			var a shellArgs
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidArguments, err)
			}
			d, err := cleanDir(a.Dir)
			if err != nil {
				return nil, err
			}
			return []string{d}, nil
		},
		Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
			var a shellArgs
			if err := decodeStrict(raw, &a, "argv"); err != nil {
				return "", err
			}
			if len(a.Argv) == 0 || a.Argv[0] == "" {
				return "", fmt.Errorf("%w: argv is empty", ErrInvalidArguments)
			}
			dir, err := cleanDir(a.Dir)
			if err != nil {
				return "", err
			}
			// os.Root resolves the directory without leaving the member's directory (symlinks too).
			if info, err := root.Stat(dir); err != nil || !info.IsDir() {
				return "", fmt.Errorf("%w: dir %q is not a directory inside your working directory", ErrInvalidArguments, dir)
			}
			timeout := cfg.DefaultTimeout
			if a.TimeoutSeconds > 0 {
				timeout = time.Duration(a.TimeoutSeconds) * time.Second
			}
			timeout = min(timeout, cfg.MaxTimeout)
			runCtx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()

			cmd := exec.CommandContext(runCtx, a.Argv[0], a.Argv[1:]...)
			cmd.Dir = filepath.Join(root.Name(), filepath.FromSlash(dir))
			cmd.Env = slices.Clone(cfg.Env)
			if cmd.Env == nil {
				cmd.Env = []string{}
			}
			cmd.Stdin = nil
			stdout := &capped{max: cfg.MaxOutputBytes}
			stderr := &capped{max: cfg.MaxOutputBytes}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			// Its own process group, killed whole: a command's children do not outlive the limit.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second

			err = cmd.Run()
			res := ShellResult{Stdout: stdout.buf.String(), Stderr: stderr.buf.String(), Truncated: stdout.dropped || stderr.dropped}
			if runCtx.Err() != nil {
				// Killed part-way: whatever it did before is unknown.
				return "", fmt.Errorf("%w: shell %s killed after %s: %w", ErrIndeterminate, a.Argv[0], timeout, runCtx.Err())
			}
			var exit *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &exit):
				res.ExitCode = exit.ExitCode()
			default:
				// The command did not start (not found, not executable): nothing ran.
				return "", fmt.Errorf("shell %s: %w", a.Argv[0], err)
			}
			out, _ := json.Marshal(res)
			return string(out), nil
		},
	}
}

// capped keeps the first max bytes written and counts the rest as dropped.
type capped struct {
	max     int
	buf     bytes.Buffer
	dropped bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if room < len(p) {
		c.dropped = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}
