// Package jsonconv is assay's JSON output convention applied to recorded JSON (docs/json.md):
// check evidence and other structures the runtime recorded with Go field names are re-presented
// with snake_case keys and durations in seconds, without changing what the store holds.
package jsonconv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// SnakeKey matches a key of the output convention: lower-case words joined by underscores.
var SnakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// goFieldName matches a key encoding/json took from an untagged Go field ("ExitCode").
var goFieldName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// Evidence re-presents recorded check evidence in the output convention:
//   - a key that is a Go field name becomes snake_case ("ArtifactSHA256" -> "artifact_sha256");
//   - a Go duration ("Duration", an integer of nanoseconds) becomes "<name>_seconds", in seconds;
//   - an object keyed by data rather than names (member ids, file paths, session ids: any key that
//     is not snake_case) becomes a list of {"key", "value"} pairs in key order.
//
// Numbers keep their recorded digits. nil stays nil.
func Evidence(raw json.RawMessage) (json.RawMessage, error) { return convert(raw, false) }

// convert decodes raw (numbers kept as recorded) and marshals it in the convention; nil for none.
func convert(raw json.RawMessage, keepDataKeys bool) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("recorded evidence is not JSON: %w", err)
	}
	return Marshal(value(v, keepDataKeys))
}

// Readable is Evidence for a person to read: Go field names and durations are converted as
// Evidence converts them, but an object keyed by data stays an object (votes by file name read
// as {"double.go":3}, not as a list of key/value pairs).
func Readable(raw json.RawMessage) (json.RawMessage, error) { return convert(raw, true) }

// keyValue is one entry of an object keyed by data.
type keyValue struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// Value is v (decoded with UseNumber) in the convention, as Evidence describes.
func Value(v any) any { return value(v, false) }

// value is Value; keepDataKeys leaves an object keyed by data an object (Readable).
func value(v any, keepDataKeys bool) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = value(x, keepDataKeys)
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		obj := make(map[string]any, len(v))
		for _, k := range keys {
			name, val := k, value(v[k], keepDataKeys)
			if goFieldName.MatchString(k) {
				name = SnakeCase(k)
				if n, ok := v[k].(json.Number); ok && strings.HasSuffix(k, "Duration") {
					if ns, err := n.Int64(); err == nil {
						name, val = name+"_seconds", float64(ns)/1e9
					}
				}
			}
			if !SnakeKey.MatchString(name) && !keepDataKeys {
				list := make([]keyValue, 0, len(keys))
				for _, k := range keys {
					list = append(list, keyValue{Key: k, Value: value(v[k], keepDataKeys)})
				}
				return list
			}
			obj[name] = val
		}
		return obj
	}
	return v
}

// SnakeCase turns a Go field name into snake_case: a word starts at an upper-case letter after a
// lower-case letter or a digit, or at the last upper-case letter of an acronym followed by a
// lower-case one ("ArtifactSHA256After" -> "artifact_sha256_after").
func SnakeCase(name string) string {
	rs := []rune(name)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Marshal is json.Marshal without HTML escapes ("<", ">" and "&" stay themselves) and without
// the trailing newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
