package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// fileError is a problem of a policy or approval file, said in the file's terms ("rule 1: unknown
// key "tool" (did you mean "tools"?)"); it unwraps to its kind (ErrInvalidPolicy,
// ErrInvalidApprovalFile), whose text it does not repeat.
type fileError struct {
	kind error
	msg  string
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.kind }

// decodeStrict decodes data into v (a pointer to File or ApprovalFile): as JSON, strictly (a
// trailing comma or a comment is an error), when isJSON, and either way through YAML (JSON is the
// YAML subset it is), refusing unknown keys, duplicate keys and more than one document. Errors are
// *fileError of kind, naming the place in the file by the file's own keys (rule N, approval N) and
// the line.
func decodeStrict(data []byte, isJSON bool, v any, kind error) error {
	bad := func(format string, args ...any) error {
		return &fileError{kind: kind, msg: fmt.Sprintf(format, args...)}
	}
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		var doc any
		err := dec.Decode(&doc)
		if err == nil {
			if _, extra := dec.Token(); extra != io.EOF {
				err = errors.New("more than one JSON value")
			}
		}
		if err != nil {
			line, col := lineCol(data, dec.InputOffset())
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line, col = lineCol(data, se.Offset-1) // Offset counts the offending byte
			}
			return bad("not valid JSON (line %d, column %d): %s", line, col, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return bad("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return bad("the file is empty")
	}
	if err := checkKeys(root.Content[0], reflect.TypeOf(v).Elem(), ""); err != "" {
		return bad("%s", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return bad("%s", strings.TrimPrefix(strings.ReplaceAll(err.Error(), "\n ", ""), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return bad("more than one document")
	}
	return nil
}

// checkKeys refuses a key of the mapping n that the struct t does not declare (its yaml tags),
// recursing into nested mappings and lists of them; where is the place so far ("rule 2: ").
func checkKeys(n *yaml.Node, t reflect.Type, where string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) || n.Kind != yaml.MappingNode {
		return ""
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = t.Field(i).Type
			names = append(names, name)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		ft, ok := fields[key.Value]
		if !ok {
			return fmt.Sprintf("%sunknown key %q at line %d%s", where, key.Value, key.Line, didYouMean(key.Value, names))
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Slice && val.Kind == yaml.SequenceNode:
			item := strings.TrimSuffix(key.Value, "s")
			for j, el := range val.Content {
				if p := checkKeys(el, ft.Elem(), fmt.Sprintf("%s%s %d: ", where, item, j+1)); p != "" {
					return p
				}
			}
		case ft.Kind() == reflect.Struct:
			if p := checkKeys(val, ft, where+key.Value+": "); p != "" {
				return p
			}
		}
	}
	return ""
}

// didYouMean names the known key closest to key (one that starts like it, or within two edits),
// as ` (did you mean "tools"?)`, or "".
func didYouMean(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		d := editDistance(key, k)
		if strings.HasPrefix(k, key) || strings.HasPrefix(key, k) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (known keys: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// lineCol is the 1-based line and column of byte offset off in data.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// readErr is a file's read error without the path the caller names first ("no such file or
// directory", not "open p.yaml: no such file or directory"); it still wraps the os error.
func readErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
