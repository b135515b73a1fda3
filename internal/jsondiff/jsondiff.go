// Package jsondiff finds where two JSON documents differ and names each place with a JSON Pointer
// (RFC 6901). Replay uses it for the first differing field of a replayed request, tool call or
// event; a tolerance policy decides which of the differences it lists are allowed.
//
// Documents are compared as values, not bytes: numbers by their JSON text after decoding with
// json.Number (1.0 and 1 differ; RFC 8785 canonical forms of equal values are equal), objects member
// by member in RFC 8785 order (keys sorted by their UTF-16 code units), arrays element by element.
package jsondiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Difference is one place where two documents differ.
type Difference struct {
	// Pointer is the RFC 6901 JSON Pointer of the place ("" for the whole document).
	Pointer string
	// A and B are the values there (json.Number, string, bool, nil, map[string]any or []any);
	// InA and InB are false where the member or element is absent from that document.
	A, B     any
	InA, InB bool
}

// Decode parses data as one JSON value, numbers as json.Number. Trailing data is an error.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("jsondiff: data after the JSON value")
	}
	return v, nil
}

// Walk calls fn for every place where a and b differ, in document order (RFC 8785 member order),
// until fn returns false. A place is reported once: where the two values have different kinds, or
// are different scalars, or a member or element is absent from one of them; Walk does not descend
// below it. a and b are values as Decode returns them.
func Walk(a, b any, fn func(Difference) bool) {
	walk("", a, b, true, true, fn)
}

// First returns the first place where a and b differ, and false when they are equal.
func First(a, b any) (Difference, bool) {
	var first Difference
	found := false
	Walk(a, b, func(d Difference) bool {
		first, found = d, true
		return false
	})
	return first, found
}

// FirstBytes decodes two JSON documents and returns their first difference (false when equal). A
// document that is not JSON is compared as a whole, as a string.
func FirstBytes(a, b []byte) (Difference, bool) {
	av, aerr := Decode(a)
	bv, berr := Decode(b)
	if aerr != nil || berr != nil {
		if bytes.Equal(a, b) {
			return Difference{}, false
		}
		return Difference{A: string(a), B: string(b), InA: true, InB: true}, true
	}
	return First(av, bv)
}

func walk(ptr string, a, b any, inA, inB bool, fn func(Difference) bool) bool {
	if !inA || !inB {
		return fn(Difference{Pointer: ptr, A: a, B: b, InA: inA, InB: inB})
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return fn(Difference{Pointer: ptr, A: a, B: b, InA: true, InB: true})
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, compareUTF16)
		for _, k := range keys {
			av, ina := x[k]
			bv, inb := y[k]
			if !walk(ptr+"/"+Escape(k), av, bv, ina, inb, fn) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			return fn(Difference{Pointer: ptr, A: a, B: b, InA: true, InB: true})
		}
		for i := 0; i < max(len(x), len(y)); i++ {
			var av, bv any
			if i < len(x) {
				av = x[i]
			}
			if i < len(y) {
				bv = y[i]
			}
			if !walk(ptr+"/"+strconv.Itoa(i), av, bv, i < len(x), i < len(y), fn) {
				return false
			}
		}
		return true
	default:
		if scalarEqual(a, b) {
			return true
		}
		return fn(Difference{Pointer: ptr, A: a, B: b, InA: true, InB: true})
	}
}

func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785, section 3.2.3).
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// Escape escapes one reference token of a JSON Pointer: "~" as "~0", "/" as "~1" (RFC 6901).
func Escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// Tokens splits a JSON Pointer into its unescaped reference tokens; "" has none.
func Tokens(pointer string) []string {
	if pointer == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts
}

// Raw returns a value as compact JSON text, "" for an absent one (present false).
func Raw(v any, present bool) json.RawMessage {
	if !present {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(strconv.Quote(fmt.Sprint(v)))
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
