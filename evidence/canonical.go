package evidence

import "unicode/utf8"

// isCanonicalObject reports whether b is a JSON object already in RFC 8785
// canonical form, checked in one pass without allocating: no insignificant
// whitespace; member names ASCII, strictly increasing (so sorted as RFC 8785
// section 3.2.3 requires, and without duplicates); strings valid UTF-8 using
// exactly the escapes of section 3.2.2.2; numbers integers in canonical
// decimal form of magnitude below 2^53; literals true, false, null.
//
// It is a fast path only: false means "not shown canonical" (non-ASCII
// names, fractions and exponents are left to jcs.Transform), never "invalid".
// FuzzCanonicalFastPath checks that whatever it accepts, jcs.Transform leaves
// unchanged.
func isCanonicalObject(b []byte) bool {
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	end, ok := canonValue(b, 0, 0)
	return ok && end == len(b)
}

const maxCanonDepth = 64

// canonValue checks the value starting at b[i] and returns the index after it.
func canonValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxCanonDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{':
		return canonObject(b, i, depth)
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = canonValue(b, i, depth+1); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '"':
		end, _, ok := canonString(b, i)
		return end, ok
	case c == '-' || c >= '0' && c <= '9':
		return canonInt(b, i)
	case c == 't':
		return canonLiteral(b, i, "true")
	case c == 'f':
		return canonLiteral(b, i, "false")
	case c == 'n':
		return canonLiteral(b, i, "null")
	}
	return 0, false
}

func canonLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

func canonObject(b []byte, i, depth int) (int, bool) {
	i++ // '{'
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var prev []byte
	first := true
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		end, ascii, ok := canonString(b, i)
		if !ok || !ascii {
			return 0, false
		}
		name := b[i+1 : end-1]
		if !first && string(prev) >= string(name) {
			return 0, false // unsorted or duplicate: leave it to jcs
		}
		prev, first = name, false
		i = end
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if i, ok = canonValue(b, i+1, depth+1); !ok || i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// canonString checks the string starting at b[i] (a '"') and returns the
// index after its closing quote and whether it is plain ASCII without
// escapes.
func canonString(b []byte, i int) (int, bool, bool) {
	i++
	ascii := true
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, ascii, true
		case c < 0x20:
			return 0, false, false
		case c == '\\':
			ascii = false
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				// Only \u00xx for a control character other than the
				// two-letter ones, lowercase hex.
				if i+5 >= len(b) || b[i+2] != '0' || b[i+3] != '0' {
					return 0, false, false
				}
				h, l := b[i+4], b[i+5]
				if !(h == '0' || h == '1') || !(l >= '0' && l <= '9' || l >= 'a' && l <= 'f') {
					return 0, false, false
				}
				v := (h-'0')<<4 | hexVal(l)
				if v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t' {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < utf8.RuneSelf:
			i++
		default:
			ascii = false
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
	return 0, false, false
}

func hexVal(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// canonInt accepts -?(0|[1-9][0-9]{0,15}) below 2^53 in magnitude, not "-0".
func canonInt(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - digits
	switch {
	case n == 0 || n > 16:
		return 0, false
	case b[digits] == '0' && (n > 1 || digits > start):
		return 0, false // leading zero, or -0
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, false
	}
	if n == 16 {
		var v uint64
		for _, c := range b[digits:i] {
			v = v*10 + uint64(c-'0')
		}
		if v >= 1<<53 {
			return 0, false
		}
	}
	return i, true
}
