package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// maxListEntries bounds what list_dir and find return in one call.
const maxListEntries = 1000

type dirArgs struct {
	Path string `json:"path"`
}

// cleanDir is CleanRelative for a directory argument where "" and "." name the member directory.
func cleanDir(p string) (string, error) {
	if p == "" || p == "." || p == "./" {
		return ".", nil
	}
	return CleanRelative(p)
}

// dirPaths is the Paths function of tools whose "path" argument is a directory that defaults to ".".
func dirPaths(raw json.RawMessage) ([]string, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArguments, err)
	}
	d, err := cleanDir(a.Path)
	if err != nil {
		return nil, err
	}
	return []string{d}, nil
}

var listDir = Tool{
	Name:   "list_dir",
	Doc:    "List the entries of a directory relative to your working directory (default: the working directory itself). Directories end with '/'.",
	Access: ReadOnly,
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"relative directory; empty or \".\" for your working directory"}},` +
		`"additionalProperties":false}`),
	Paths: dirPaths,
	Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
		var a dirArgs
		if err := decodeStrict(raw, &a); err != nil {
			return "", err
		}
		rel, err := cleanDir(a.Path)
		if err != nil {
			return "", err
		}
		entries, err := fs.ReadDir(root.FS(), rel)
		if err != nil {
			return "", fmt.Errorf("list_dir %s: %w", rel, err)
		}
		var b strings.Builder
		for i, e := range entries {
			if i == maxListEntries {
				fmt.Fprintf(&b, "... %d more entries not shown\n", len(entries)-i)
				break
			}
			name := e.Name()
			if e.IsDir() {
				name += "/"
			}
			b.WriteString(name + "\n")
		}
		return b.String(), nil
	},
}

type findArgs struct {
	Path       string `json:"path"`
	Pattern    string `json:"pattern"`
	Type       string `json:"type"`
	MaxResults int    `json:"max_results"`
}

var findFiles = Tool{
	Name:   "find",
	Doc:    "Find files or directories under a directory (default: your working directory) whose path relative to that directory matches a glob pattern ('**' matches any number of directories, e.g. \"**/*.go\"). Symlinks are not followed.",
	Access: ReadOnly,
	Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"path":{"type":"string","description":"relative directory to search; empty or \".\" for your working directory"},` +
		`"pattern":{"type":"string","minLength":1,"description":"glob over paths relative to path, e.g. **/*_test.go"},` +
		`"type":{"type":"string","enum":["file","dir","any"],"description":"what to return (default file)"},` +
		`"max_results":{"type":"integer","minimum":1,"maximum":1000,"description":"default 200"}},` +
		`"required":["pattern"],"additionalProperties":false}`),
	Paths: dirPaths,
	Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
		var a findArgs
		if err := decodeStrict(raw, &a, "pattern"); err != nil {
			return "", err
		}
		if !doublestar.ValidatePattern(a.Pattern) {
			return "", fmt.Errorf("%w: pattern %q is not a valid glob", ErrInvalidArguments, a.Pattern)
		}
		if a.Type == "" {
			a.Type = "file"
		}
		if a.MaxResults == 0 {
			a.MaxResults = 200
		}
		base, err := cleanDir(a.Path)
		if err != nil {
			return "", err
		}
		var matches []string
		truncated := false
		errStop := errors.New("stop")
		walkErr := fs.WalkDir(root.FS(), base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			if p == base {
				return nil
			}
			rel := strings.TrimPrefix(p, base+"/")
			if base == "." {
				rel = p
			}
			want := a.Type == "any" || (a.Type == "dir") == d.IsDir()
			if want {
				if ok, _ := doublestar.Match(a.Pattern, rel); ok {
					if len(matches) == a.MaxResults {
						truncated = true
						return errStop
					}
					matches = append(matches, path.Join(base, rel))
				}
			}
			return nil
		})
		if walkErr != nil && !errors.Is(walkErr, errStop) {
			return "", fmt.Errorf("find in %s: %w", base, walkErr)
		}
		slices.Sort(matches)
		out := strings.Join(matches, "\n")
		if len(matches) > 0 {
			out += "\n"
		}
		if truncated {
			out += fmt.Sprintf("... stopped at %d results\n", a.MaxResults)
		}
		if len(matches) == 0 {
			out = "no matches\n"
		}
		return out, nil
	},
}

// EditOp is one structured edit of edit_file. Op is "replace" (Old -> New, Old must occur exactly
// Count times, default 1), "insert_before" / "insert_after" (Text next to Anchor, which must occur
// exactly once), "delete" (Old, which must occur exactly once), "append" or "prepend" (Text).
type EditOp struct {
	Op     string `json:"op"`
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Count  int    `json:"count,omitempty"`
	Anchor string `json:"anchor,omitempty"`
	Text   string `json:"text,omitempty"`
}

type editArgs struct {
	Path       string   `json:"path"`
	Operations []EditOp `json:"operations"`
}

// ErrEditMismatch is returned (wrapped, naming the operation) when an edit's old text or anchor
// does not occur the required number of times. No operation of the call is applied then.
var ErrEditMismatch = errors.New("edit does not match the file")

var editFile = Tool{
	Name: "edit_file",
	Doc: "Edit an existing text file relative to your working directory with a list of structured operations, applied in order, all or nothing: " +
		`{"op":"replace","old":"...","new":"...","count":1}, {"op":"insert_before"|"insert_after","anchor":"...","text":"..."}, ` +
		`{"op":"delete","old":"..."}, {"op":"append"|"prepend","text":"..."}. old and anchor must match exactly (count times for replace, default once).`,
	Access: Write,
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1},` +
		`"operations":{"type":"array","minItems":1,"maxItems":100,"items":{"oneOf":[` +
		`{"type":"object","properties":{"op":{"const":"replace"},"old":{"type":"string","minLength":1},"new":{"type":"string"},"count":{"type":"integer","minimum":1}},"required":["op","old","new"],"additionalProperties":false},` +
		`{"type":"object","properties":{"op":{"enum":["insert_before","insert_after"]},"anchor":{"type":"string","minLength":1},"text":{"type":"string"}},"required":["op","anchor","text"],"additionalProperties":false},` +
		`{"type":"object","properties":{"op":{"const":"delete"},"old":{"type":"string","minLength":1}},"required":["op","old"],"additionalProperties":false},` +
		`{"type":"object","properties":{"op":{"enum":["append","prepend"]},"text":{"type":"string"}},"required":["op","text"],"additionalProperties":false}` +
		`]}}},"required":["path","operations"],"additionalProperties":false}`),
	Run: func(ctx context.Context, root *os.Root, raw json.RawMessage) (string, error) {
		var a editArgs
		if err := decodeStrict(raw, &a, "path", "operations"); err != nil {
			return "", err
		}
		rel, err := CleanRelative(a.Path)
		if err != nil {
			return "", err
		}
		info, err := root.Stat(rel)
		if err != nil {
			return "", fmt.Errorf("edit_file %s: %w", rel, err)
		}
		data, err := root.ReadFile(rel)
		if err != nil {
			return "", fmt.Errorf("edit_file %s: %w", rel, err)
		}
		text, err := ApplyEdits(string(data), a.Operations)
		if err != nil {
			return "", fmt.Errorf("edit_file %s: %w", rel, err)
		}
		if len(text) > maxFileBytes {
			return "", fmt.Errorf("%w: edited file would be %d bytes, limit %d", ErrInvalidArguments, len(text), maxFileBytes)
		}
		// Write a sibling and rename it over the file, so a failure never leaves half an edit.
		tmp := rel + ".assay-edit.tmp"
		if err := root.WriteFile(tmp, []byte(text), info.Mode().Perm()); err != nil {
			return "", fmt.Errorf("edit_file %s: %w", rel, err)
		}
		if err := root.Rename(tmp, rel); err != nil {
			_ = root.Remove(tmp)
			return "", fmt.Errorf("edit_file %s: %w", rel, err)
		}
		return fmt.Sprintf("edited %s: %d operations applied (%d bytes)", rel, len(a.Operations), len(text)), nil
	},
}

// ApplyEdits applies ops to text in order and returns the result, or an error wrapping
// ErrEditMismatch or ErrInvalidArguments naming the first operation that cannot apply (nothing is
// applied then).
func ApplyEdits(text string, ops []EditOp) (string, error) {
	exactlyOnce := func(i int, what, s string) (int, error) {
		n := strings.Count(text, s)
		if n != 1 {
			return 0, fmt.Errorf("%w: operation %d (%s): %s occurs %d times, want exactly 1", ErrEditMismatch, i+1, ops[i].Op, what, n)
		}
		return strings.Index(text, s), nil
	}
	for i, op := range ops {
		switch op.Op {
		case "replace":
			want := op.Count
			if want == 0 {
				want = 1
			}
			if op.Old == "" {
				return "", fmt.Errorf("%w: operation %d: old is empty", ErrInvalidArguments, i+1)
			}
			if n := strings.Count(text, op.Old); n != want {
				return "", fmt.Errorf("%w: operation %d (replace): old text occurs %d times, want %d", ErrEditMismatch, i+1, n, want)
			}
			text = strings.ReplaceAll(text, op.Old, op.New)
		case "insert_before", "insert_after":
			at, err := exactlyOnce(i, "anchor", op.Anchor)
			if err != nil {
				return "", err
			}
			if op.Op == "insert_after" {
				at += len(op.Anchor)
			}
			text = text[:at] + op.Text + text[at:]
		case "delete":
			at, err := exactlyOnce(i, "old text", op.Old)
			if err != nil {
				return "", err
			}
			text = text[:at] + text[at+len(op.Old):]
		case "append":
			text += op.Text
		case "prepend":
			text = op.Text + text
		default:
			return "", fmt.Errorf("%w: operation %d: unknown op %q", ErrInvalidArguments, i+1, op.Op)
		}
	}
	return text, nil
}
