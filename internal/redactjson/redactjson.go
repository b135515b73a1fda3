// Package redactjson is the one walk that masks secrets inside a JSON
// value, for the redaction projections built on policy.Redactor (SAFETY.md
// rule 13). What differs between them is in Options: runtime/policy masks
// fields by their names (an "api_key" member whatever its value) and always
// re-encodes; the harness's event projection masks object keys too, leaves
// its record vocabulary alone and keeps a payload without secrets byte for
// byte.
package redactjson

import (
	"bytes"
	"encoding/json"
)

// Options say what Redact masks besides the secrets inside string values.
type Options struct {
	// Mask replaces the value of a member masked by name (Field), and the
	// whole payload when the masked value cannot be encoded.
	Mask string
	// Field reports whether the value of an object member with this name
	// (the name as it is in the payload) is replaced by Mask whole. A value
	// that is an object is walked instead, so its own members are judged
	// by name. nil: no member is masked by name.
	Field func(name string) bool
	// Keys: object member names are masked as string values are (a secret
	// can be a key). Two names masked to one keep one of their values.
	Keys bool
	// Keep reports whether a string value is left as it is, never masked:
	// a fixed word of the record's own vocabulary. Names are not kept by it.
	// nil: every string value is masked.
	Keep func(value string) bool
	// Reencode makes the result json.Marshal of the walked value always
	// (compact, object keys sorted). Without it a payload in which nothing
	// was masked is returned as it came, byte for byte.
	Reencode bool
}

// Redact returns the JSON value raw with mask applied to every string value
// (and to every name, with o.Keys), members masked by name (o.Field), and
// strings o.Keep accepts left alone. mask masks the secrets in one string
// (policy.Redactor.String). Numbers keep their digits (they are decoded as
// json.Number); text after the first JSON value is ignored.
//
// It returns the decoder's error, and nothing masked, when raw does not
// start with a JSON value: how such text is masked is the caller's choice.
// Safe for concurrent use when mask and o's functions are.
func Redact(raw []byte, mask func(string) string, o Options) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	w := walker{mask: mask, o: o}
	v = w.value(v)
	if !w.changed && !o.Reencode {
		return raw, nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		m, _ := json.Marshal(o.Mask)
		return m, nil
	}
	return out, nil
}

// walker masks one decoded value; changed records whether anything was.
type walker struct {
	mask    func(string) string
	o       Options
	changed bool
}

func (w *walker) value(v any) any {
	switch x := v.(type) {
	case string:
		if w.o.Keep != nil && w.o.Keep(x) {
			return x
		}
		return w.str(x)
	case []any:
		for i := range x {
			x[i] = w.value(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			name := k
			if w.o.Keys {
				name = w.str(k)
			}
			if _, isObject := e.(map[string]any); !isObject && w.o.Field != nil && w.o.Field(k) {
				out[name] = w.o.Mask
				w.changed = true
				continue
			}
			out[name] = w.value(e)
		}
		return out
	}
	return v
}

func (w *walker) str(s string) string {
	m := w.mask(s)
	if m != s {
		w.changed = true
	}
	return m
}
