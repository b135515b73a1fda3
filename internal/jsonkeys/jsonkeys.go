// Package jsonkeys finds what makes a JSON text mean different things to different readers: an
// object key given twice.
package jsonkeys

import (
	"bytes"
	"encoding/json"
)

// Duplicate reports the first object key that appears twice in one object of data, at any depth,
// and whether there is one. data must be valid JSON (what is not is reported as no duplicate: check
// validity first). encoding/json keeps the last of duplicate keys and another reader may keep the
// first; RFC 8259 §4 says names SHOULD be unique, RFC 7493 (I-JSON) §2.3 that they MUST.
func Duplicate(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func() (string, bool)
	walk = func() (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false
				}
				k, _ := kt.(string)
				if seen[k] {
					return k, true
				}
				seen[k] = true
				if key, dup := walk(); dup {
					return key, true
				}
			}
			_, _ = dec.Token() // '}'
		case json.Delim('['):
			for dec.More() {
				if key, dup := walk(); dup {
					return key, true
				}
			}
			_, _ = dec.Token() // ']'
		}
		return "", false
	}
	return walk()
}
