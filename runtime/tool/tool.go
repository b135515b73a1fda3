// Package tool holds the tools members act through and the one boundary every tool call passes:
// access-mode declaration, argument validation, path rooting, intent before dispatch and an explicit
// outcome after (../shared/SAFETY.md rules 1, 2, 8 and 9).
//
// This is the first layer of the execution boundary. The policy engine, exact approvals, budgets and
// the durable effect ledger with reconciliation (SAFETY.md rules 4, 5, 7, 10, 11, 14) are built on
// this entry point in runtime/policy and runtime/effect; no formation has a path around it.
package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// AccessMode is what a tool may do to the world. Only an explicitly ReadOnly tool may be retried
// automatically (SAFETY.md rule 8).
type AccessMode string

// The access modes of DESIGN.md's vocabulary.
const (
	ReadOnly AccessMode = "readonly"
	Write    AccessMode = "write"
	Execute  AccessMode = "execute"
	Network  AccessMode = "network"
	Mixed    AccessMode = "mixed"
)

// Tool is a descriptor: adding a tool is adding one value to Builtins, with its test.
type Tool struct {
	// Name is the function name the model calls, e.g. "write_file".
	Name string
	// Doc is the description sent to the model.
	Doc string
	// Access is the declared access mode.
	Access AccessMode
	// Parameters is the JSON Schema (draft 2020-12) of the arguments object, sent to the model. The
	// boundary validates every call against it before anything else (policy, hooks, dispatch).
	Parameters json.RawMessage
	// Paths returns the member-relative, clean, slash-separated paths a call touches, for per-path
	// policy rules. nil means: the "path" argument when the call has one. An error refuses the call.
	Paths func(args json.RawMessage) ([]string, error)
	// Run executes the call with its arguments already validated against Parameters and canonical
	// (RFC 8785). root is the member's directory, opened as an os.Root so no path can escape it
	// (symlinks included). The returned string is the result the model sees. A tool that cannot
	// tell whether its effect happened (a timeout, a lost response) returns an error wrapping
	// ErrIndeterminate.
	Run func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error)
}

// ErrIndeterminate is wrapped by a tool's error when the effect may or may not have happened (the
// tool timed out or lost the response after it acted). For any tool not declared ReadOnly the
// boundary then records the outcome unknown with reconciliation required, and never retries it.
var ErrIndeterminate = errors.New("effect outcome indeterminate")

// ErrTransient is wrapped by a tool's error when trying again may succeed (a busy file, a
// throttled read). The boundary retries only ReadOnly tools; for every other access mode the
// declaration wins and the error is final.
var ErrTransient = errors.New("transient tool failure")

// ErrInvalidArguments is returned (wrapped, naming the field) when a call's arguments do not match
// the tool's contract.
var ErrInvalidArguments = errors.New("invalid tool arguments")

// ErrPathOutsideRoot is returned when a path argument is absolute or escapes the member's directory.
var ErrPathOutsideRoot = errors.New("path outside the member's directory")

// Builtins returns the built-in tools by name: read_file, list_dir and find (readonly), write_file
// and edit_file (write), and shell (execute). The map is new on every call.
func Builtins() map[string]Tool {
	return map[string]Tool{
		writeFile.Name: writeFile,
		readFile.Name:  readFile,
		listDir.Name:   listDir,
		findFiles.Name: findFiles,
		editFile.Name:  editFile,
		"shell":        Shell(DefaultShellConfig()),
	}
}

// maxFileBytes bounds what write_file accepts in one call (bytes): a member that needs more is
// writing something other than source code.
const maxFileBytes = 1 << 20

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

var writeFile = Tool{
	Name:   "write_file",
	Doc:    "Write a UTF-8 text file at a path relative to your working directory, creating parent directories. Replaces an existing file.",
	Access: Write,
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative path inside your working directory"},` +
		`"content":{"type":"string","description":"the complete file content"}},"required":["path","content"],"additionalProperties":false}`),
	Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
		var a writeFileArgs
		if err := decodeStrict(raw, &a, "path", "content"); err != nil {
			return "", err
		}
		if len(a.Content) > maxFileBytes {
			return "", fmt.Errorf("%w: content is %d bytes, limit %d", ErrInvalidArguments, len(a.Content), maxFileBytes)
		}
		rel, err := CleanRelative(a.Path)
		if err != nil {
			return "", err
		}
		if dir := path.Dir(rel); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return "", fmt.Errorf("write_file %s: %w", rel, err)
			}
		}
		if err := root.WriteFile(rel, []byte(a.Content), 0o644); err != nil {
			return "", fmt.Errorf("write_file %s: %w", rel, err)
		}
		return fmt.Sprintf("wrote %s (%d bytes)", rel, len(a.Content)), nil
	},
}

type readFileArgs struct {
	Path string `json:"path"`
}

var readFile = Tool{
	Name:       "read_file",
	Doc:        "Read a text file at a path relative to your working directory.",
	Access:     ReadOnly,
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`),
	Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
		var a readFileArgs
		if err := decodeStrict(raw, &a, "path"); err != nil {
			return "", err
		}
		rel, err := CleanRelative(a.Path)
		if err != nil {
			return "", err
		}
		data, err := root.ReadFile(rel)
		if err != nil {
			return "", fmt.Errorf("read_file %s: %w", rel, err)
		}
		if len(data) > maxFileBytes {
			return "", fmt.Errorf("read_file %s: %d bytes exceeds the %d-byte limit", rel, len(data), maxFileBytes)
		}
		return string(data), nil
	},
}

// CleanRelative returns p as a clean slash-separated path relative to a member's directory, or
// ErrPathOutsideRoot when p is empty, absolute, or escapes with "..". os.Root enforces the same at
// open time (including symlinks); this check gives the clear error first.
func CleanRelative(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%w: field \"path\" is empty", ErrInvalidArguments)
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("%w: %q is absolute", ErrPathOutsideRoot, p)
	}
	c := path.Clean(filepath.ToSlash(p))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: %q escapes with ..", ErrPathOutsideRoot, p)
	}
	if c == "." {
		return "", fmt.Errorf("%w: field \"path\" names the directory itself", ErrInvalidArguments)
	}
	return c, nil
}

// decodeStrict decodes a JSON object into v, refusing unknown fields and missing required ones.
func decodeStrict(raw json.RawMessage, v any, required ...string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("%w: arguments are not a JSON object: %v", ErrInvalidArguments, err)
	}
	for _, r := range required {
		if _, ok := fields[r]; !ok {
			return fmt.Errorf("%w: missing required field %q", ErrInvalidArguments, r)
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	return nil
}
