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

	"github.com/assay-audit/assay/internal/jsonkeys"
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
	if p := checkValue(root.Content[0], reflect.TypeOf(v).Elem()); p != "" {
		return bad("the file %s", p)
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

// checkValue says, in the file's terms, how the value node n is not of the type t a field declares
// ("must be a list, not the string \"shell\""); "" when it is. null is taken as no value. A
// string field takes only a string (a JSON number is not silently read as its digits), an integer
// field only an integer, a time only an RFC 3339 time.
func checkValue(n *yaml.Node, t reflect.Type) string {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return ""
	}
	got := func() string {
		switch {
		case n.Kind == yaml.MappingNode:
			return "a mapping"
		case n.Kind == yaml.SequenceNode:
			return "a list"
		case n.Tag == "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case n.Tag == "!!int" || n.Tag == "!!float":
			return "the number " + n.Value
		case n.Tag == "!!bool":
			return n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	switch {
	case t == reflect.TypeOf(time.Time{}):
		if n.Kind != yaml.ScalarNode {
			return "must be a time (RFC 3339: 2026-12-02T15:04:05Z), not " + got()
		}
		if _, err := time.Parse(time.RFC3339Nano, n.Value); err != nil {
			return "must be a time (RFC 3339: 2026-12-02T15:04:05Z), not " + got()
		}
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return "must be a list, not " + got()
		}
		for i, el := range n.Content {
			if p := checkValue(el, t.Elem()); p != "" {
				return fmt.Sprintf("item %d %s", i+1, p)
			}
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return "must be a mapping of keys, not " + got()
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return "must be a string, not " + got()
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return "must be a whole number, not " + got()
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return "must be true or false, not " + got()
		}
	}
	return ""
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
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if first, dup := seen[k.Value]; dup {
			if first.Line == k.Line {
				return fmt.Sprintf("%skey %q is given twice, on line %d (columns %d and %d)", where, k.Value, k.Line, first.Column, k.Column)
			}
			return fmt.Sprintf("%skey %q is given twice, at lines %d and %d", where, k.Value, first.Line, k.Line)
		}
		seen[k.Value] = k
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
			return fmt.Sprintf("%sunknown key %q at line %d%s", where, key.Value, key.Line, jsonkeys.DidYouMean(key.Value, names))
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if p := checkValue(val, ft); p != "" {
			return fmt.Sprintf("%s%q at line %d %s", where, key.Value, val.Line, p)
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
