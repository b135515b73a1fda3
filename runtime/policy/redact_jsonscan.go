package policy

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonPathElem is one step of a path into a JSON value: an object key or an array position.
type jsonPathElem struct {
	isKey bool
	key   string
	pos   int
}

// jsonWalker visits the scalar values of valid JSON (check with json.Valid first) with their paths
// and byte spans, without decoding them (object keys are decoded, escapes included).
type jsonWalker struct {
	data []byte
	pos  int
	path []jsonPathElem
}

func (w *jsonWalker) walk(visit func(path []jsonPathElem, start, end int, str bool)) {
	w.value(visit)
}

func (w *jsonWalker) space() {
	for w.pos < len(w.data) && (w.data[w.pos] == ' ' || w.data[w.pos] == '\t' || w.data[w.pos] == '\n' || w.data[w.pos] == '\r') {
		w.pos++
	}
}

// str skips the string token at pos and returns its end (after the closing quote).
func (w *jsonWalker) str() int {
	i := w.pos + 1
	for i < len(w.data) && w.data[i] != '"' {
		if w.data[i] == '\\' {
			i++
		}
		i++
	}
	w.pos = i + 1
	return w.pos
}

func (w *jsonWalker) value(visit func([]jsonPathElem, int, int, bool)) {
	w.space()
	if w.pos >= len(w.data) {
		return
	}
	switch c := w.data[w.pos]; c {
	case '{', '[':
		object := c == '{'
		close := byte(']')
		if object {
			close = '}'
		}
		w.pos++
		for n := 0; ; n++ {
			w.space()
			if w.pos >= len(w.data) || w.data[w.pos] == close {
				w.pos++
				return
			}
			if w.data[w.pos] == ',' {
				w.pos++
				w.space()
			}
			el := jsonPathElem{pos: n}
			if object {
				start := w.pos
				end := w.str()
				key := string(w.data[start+1 : end-1])
				if strings.IndexByte(key, '\\') >= 0 {
					_ = json.Unmarshal(w.data[start:end], &key) // valid JSON: it decodes
				}
				el = jsonPathElem{isKey: true, key: key}
				w.space()
				w.pos++ // ':'
			}
			w.path = append(w.path, el)
			w.value(visit)
			w.path = w.path[:len(w.path)-1]
		}
	case '"':
		start := w.pos
		visit(w.path, start, w.str(), true)
	default:
		start := w.pos
		for w.pos < len(w.data) && strings.IndexByte(",}] \t\r\n", w.data[w.pos]) < 0 {
			w.pos++
		}
		visit(w.path, start, w.pos, false)
	}
}

// decodeJSONString decodes one JSON string token (quotes included) found at raw offset at, unit by
// unit, as encoding/json decodes it (invalid UTF-8 and lone surrogates become U+FFFD).
func decodeJSONString(tok []byte, at int) (sseFragment, bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return sseFragment{}, false
	}
	f := sseFragment{start: at, end: at + len(tok)}
	var text []byte
	s := tok[1 : len(tok)-1]
	for i := 0; i < len(s); {
		u := jsonStringUnit{rawStart: at + 1 + i, decStart: len(text)}
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s) {
				return sseFragment{}, false
			}
			switch e := s[i+1]; e {
			case '"', '\\', '/':
				text = append(text, e)
				i += 2
			case 'b', 'f', 'n', 'r', 't':
				text = append(text, map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[e])
				i += 2
			case 'u':
				r, ok := hex4(s[i+2:])
				if !ok {
					return sseFragment{}, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok := rune(0), false
					if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2, ok = hex4(s[i+2:])
					}
					if dr := utf16.DecodeRune(r, r2); ok && dr != unicode.ReplacementChar {
						r = dr
						i += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				text = utf8.AppendRune(text, r)
			default:
				return sseFragment{}, false
			}
		case c < 0x20:
			return sseFragment{}, false
		case c < utf8.RuneSelf:
			text = append(text, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			text = utf8.AppendRune(text, r) // invalid bytes: U+FFFD, one byte consumed
			i += size
		}
		u.rawEnd, u.decEnd = at+1+i, len(text)
		f.units = append(f.units, u)
	}
	f.text = string(text)
	return f, true
}

// hex4 parses the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
