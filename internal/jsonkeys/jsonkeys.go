// Package jsonkeys is about the keys of a JSON (or YAML) object a user wrote: one given twice,
// which makes the text mean different things to different readers, and one misspelt.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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

// DidYouMean names the known key closest to key (one that starts like it, or within two edits,
// Levenshtein distance in bytes), as ` (did you mean "tools"?)`, or, when none is that close, lists
// the known keys: ` (known keys: a, b)`.
func DidYouMean(key string, known []string) string {
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
