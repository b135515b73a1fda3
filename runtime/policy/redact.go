package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/assay-audit/assay/internal/redactjson"
)

// Mask replaces every redacted value.
const Mask = "[REDACTED]"

// MinSecretLen is the shortest secret value the Redactor replaces inside text (bytes): a shorter
// value ("1", "on") would mask unrelated text. Fields with sensitive names are masked whatever their
// length.
const MinSecretLen = 6

// Redactor is the one redaction projection (SAFETY.md rule 13): events, logs, errors and reports
// pass arguments and texts through it before they are written anywhere. It masks known secret
// values wherever they appear and the values of fields whose names mark them as credentials. It is
// immutable and safe for concurrent use.
type Redactor struct {
	secrets []string
}

// NewRedactor returns a redactor for the given secret values (empty and too short ones are
// ignored). A nil *Redactor masks only sensitive field names.
func NewRedactor(secrets ...string) *Redactor {
	var s []string
	for _, v := range secrets {
		if len(v) >= MinSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{secrets: s}
}

// SecretsFromEnv returns the values of the environment entries (KEY=value, as os.Environ gives
// them) that are secrets: the variables named in names (e.g. the one --api-key-env names) and every
// variable whose name marks it as a credential (…KEY, …TOKEN, …SECRET, …PASSWORD, …CREDENTIALS).
func SecretsFromEnv(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		if slices.Contains(names, k) || sensitiveName(k) {
			out = append(out, v)
		}
	}
	return out
}

// sensitiveSuffixes are normalised name endings (lower case, no '_' or '-') that mark a credential.
// "tokens" (usage counts) does not end in "token".
var sensitiveSuffixes = []string{"password", "passwd", "secret", "apikey", "key", "authorization", "token",
	"credential", "credentials", "cookie", "privatekey"}

func sensitiveName(name string) bool {
	n := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
	if n == "idempotencykey" || n == "batchkey" {
		return false
	}
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// String masks every secret value in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	// Every occurrence of every secret is an interval; overlapping intervals merge into one masked
	// run, so two secrets that share characters leave no part of either visible. Adjacent
	// occurrences stay separate masks.
	type span struct{ from, to int }
	var spans []span
	for _, v := range r.secrets {
		if v == "" {
			continue
		}
		for from := 0; ; {
			i := strings.Index(s[from:], v)
			if i < 0 {
				break
			}
			spans = append(spans, span{from + i, from + i + len(v)})
			from += i + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var b strings.Builder
	at := 0
	for k := 0; k < len(spans); {
		cur := spans[k]
		for k++; k < len(spans) && spans[k].from < cur.to; k++ {
			cur.to = max(cur.to, spans[k].to)
		}
		if cur.from < at { // inside an earlier run (a shorter secret within a longer one)
			continue
		}
		b.WriteString(s[at:cur.from])
		b.WriteString(Mask)
		at = cur.to
	}
	b.WriteString(s[at:])
	return b.String()
}

// JSON returns raw with the values of sensitive fields masked and secret values masked inside every
// string. Text that is not valid JSON is masked as a string. The result is compact JSON with object
// keys sorted (json.Marshal of the parsed value). The walk is internal/redactjson's.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	out, err := redactjson.Redact(raw, r.String, redactjson.Options{Mask: Mask, Field: sensitiveName, Reencode: true})
	if err != nil {
		out, _ := json.Marshal(r.String(string(raw)))
		return out
	}
	return out
}

// SSE is the redaction projection of a raw server-sent event stream of chat-completion chunks
// (media type text/event-stream, OpenAI streaming format): a client joins the text of each
// choice's delta.content (and delta.refusal, delta.reasoning_content) and of each tool call's
// function.arguments across chunks, so a secret can reach it split over several chunks ("sk-12"
// in one, "34…" in the next) and never appear whole in the bytes. SSE parses the stream (WHATWG
// HTML "Interpreting an event stream": CRLF, LF or CR line ends, a leading BOM, comments, several
// data lines per event), joins every such text per choice and per tool call in stream order, finds
// each secret occurrence in the joined text, and rewrites only the JSON string values of the
// chunks that carry part of one: the first carries Mask in place of its part, the later ones
// carry nothing in place of theirs. Joining the masked stream therefore gives what String gives
// for the joined text (except that overlapping occurrences of two different secrets are masked as
// one, where String would leave part of the shorter), the stream stays parseable with the same events, chunks and keys, and
// every byte outside the masked characters is unchanged (a rewritten value keeps the escapes of
// its other characters). Finally every secret that still appears whole anywhere in the bytes is
// masked as String does. Text that is not such a stream is masked by String alone; an event whose
// data is not JSON (the "[DONE]" marker, a broken chunk) is left to that byte-wise pass, so a
// secret split across broken chunks is not found. The result is a new slice (raw is not
// modified); a digest of it is of the masked bytes. A nil *Redactor returns raw.
func (r *Redactor) SSE(raw []byte) []byte {
	if r == nil || len(r.secrets) == 0 {
		return raw
	}
	frags := sseFragments(raw)
	var edits []sseEdit
	for _, stream := range frags {
		edits = append(edits, r.maskStream(stream)...)
	}
	out := raw
	if len(edits) > 0 {
		slices.SortFunc(edits, func(a, b sseEdit) int { return a.start - b.start })
		var b bytes.Buffer
		b.Grow(len(raw))
		prev := 0
		for _, e := range edits {
			if e.start < prev {
				continue // never happens: every edit is inside its own string token
			}
			b.Write(raw[prev:e.start])
			b.WriteString(e.text)
			prev = e.end
		}
		b.Write(raw[prev:])
		out = b.Bytes()
	} else {
		out = slices.Clone(raw)
	}
	return []byte(r.String(string(out)))
}

// sseFragment is one chunk's part of a joined text: the raw byte span of its JSON string token
// (quotes included) and the decoding of that token, unit by unit.
type sseFragment struct {
	start, end int // raw offsets of the token, quotes included
	units      []jsonStringUnit
	text       string // decoded value
}

// sseEdit replaces raw[start:end] with text.
type sseEdit struct {
	start, end int
	text       string
}

// jsonStringUnit is one source unit of a JSON string token (a plain byte sequence of one rune, or
// one escape) with the raw span it occupies and the decoded bytes it yields.
type jsonStringUnit struct {
	rawStart, rawEnd int // absolute raw offsets
	decStart, decEnd int // offsets in the fragment's decoded text
}

// maskStream finds the secrets in the joined text of one stream's fragments and returns the edits
// that mask them.
func (r *Redactor) maskStream(frags []sseFragment) []sseEdit {
	var joined strings.Builder
	for _, f := range frags {
		joined.WriteString(f.text)
	}
	text := joined.String()
	var spans [][2]int
	for _, s := range r.secrets {
		for from := 0; ; {
			i := strings.Index(text[from:], s)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{from + i, from + i + len(s)})
			from += i + len(s)
		}
	}
	if len(spans) == 0 {
		return nil
	}
	// Overlapping occurrences of different secrets are masked as one (String would leave the
	// shorter secret's characters outside the longer one's occurrence).
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s[0] < last[1] {
			last[1] = max(last[1], s[1])
			continue
		}
		merged = append(merged, s)
	}
	var edits []sseEdit
	base := 0
	for _, f := range frags {
		lo, hi := base, base+len(f.text)
		base = hi
		var local [][2]int
		var first []bool
		for _, s := range merged {
			if s[1] <= lo || s[0] >= hi {
				continue
			}
			local = append(local, [2]int{max(s[0], lo) - lo, min(s[1], hi) - lo})
			first = append(first, s[0] >= lo)
		}
		if len(local) == 0 {
			continue
		}
		edits = append(edits, f.mask(local, first)...)
	}
	return edits
}

// mask returns the raw edits that replace the decoded spans of f (fragment-local offsets): each
// span's units are replaced by Mask when the span starts the occurrence, by nothing otherwise. A
// span boundary inside a unit widens the span to the whole unit.
func (f sseFragment) mask(spans [][2]int, first []bool) []sseEdit {
	var edits []sseEdit
	for k, s := range spans {
		a, b := -1, -1
		for i, u := range f.units {
			if u.decEnd > s[0] && u.decStart < s[1] {
				if a < 0 {
					a = i
				}
				b = i
			}
		}
		if a < 0 {
			continue
		}
		text := ""
		if first[k] {
			text = Mask
		}
		start, end := f.units[a].rawStart, f.units[b].rawEnd
		if n := len(edits); n > 0 && edits[n-1].end > start {
			// Two spans in one unit: keep the earlier edit and widen it.
			edits[n-1].end = max(edits[n-1].end, end)
			continue
		}
		edits = append(edits, sseEdit{start: start, end: end, text: text})
	}
	return edits
}

// sseFragments parses raw as a server-sent event stream and returns the joined-text fragments of
// each stream key (choice content, choice refusal, choice reasoning, tool call arguments), each in
// stream order. Keys are ordered by first appearance.
func sseFragments(raw []byte) [][]sseFragment {
	type segment struct{ raw, data, n int } // a data line's value: raw offset, offset in data, length
	var (
		order   []string
		streams = map[string][]sseFragment{}
		segs    []segment
		data    []byte
		calls   = map[string]string{} // tool-call id -> stream key, for fragments without an index
		last    = map[int]string{}    // choice index -> key of its latest tool call
	)
	add := func(key string, f sseFragment) {
		if _, ok := streams[key]; !ok {
			order = append(order, key)
		}
		streams[key] = append(streams[key], f)
	}
	dispatch := func() {
		defer func() { segs, data = segs[:0], data[:0] }()
		if len(segs) == 0 {
			return
		}
		toRaw := func(pos int) int {
			for _, s := range segs {
				if pos >= s.data && pos <= s.data+s.n {
					return s.raw + pos - s.data
				}
			}
			return -1
		}
		for _, v := range chunkStrings(data) {
			start, end := toRaw(v.start), toRaw(v.end)
			if start < 0 || end < 0 || end-start != v.end-v.start {
				continue // a string token cannot span lines; this data is not what it seems
			}
			f, ok := decodeJSONString(raw[start:end], start)
			if !ok {
				continue
			}
			var key string
			switch {
			case v.field != "arguments":
				key = fmt.Sprintf("choice %d %s", v.choice, v.field)
			case v.callIndex != nil:
				key = fmt.Sprintf("choice %d call %d", v.choice, *v.callIndex)
			case v.callID != "":
				if k, ok := calls[v.callID]; ok {
					key = k
				} else {
					key = fmt.Sprintf("choice %d call id %s", v.choice, v.callID)
				}
			default:
				key = last[v.choice]
				if key == "" {
					key = fmt.Sprintf("choice %d call ?", v.choice)
				}
			}
			if v.field == "arguments" {
				if v.callID != "" {
					if _, ok := calls[v.callID]; !ok {
						calls[v.callID] = key
					}
				}
				last[v.choice] = key
			}
			add(key, f)
		}
	}
	pos := 0
	if bytes.HasPrefix(raw, []byte("\xEF\xBB\xBF")) {
		pos = 3
	}
	for pos < len(raw) {
		end := bytes.IndexAny(raw[pos:], "\r\n")
		if end < 0 {
			break // an unfinished line: the client never dispatches it
		}
		end += pos
		line := raw[pos:end]
		next := end + 1
		if raw[end] == '\r' && next < len(raw) && raw[next] == '\n' {
			next++
		}
		switch {
		case len(line) == 0:
			dispatch()
		case line[0] == ':':
		default:
			field, value, valueAt := line, []byte(nil), end
			if i := bytes.IndexByte(line, ':'); i >= 0 {
				field, value, valueAt = line[:i], line[i+1:], pos+i+1
				if len(value) > 0 && value[0] == ' ' {
					value, valueAt = value[1:], valueAt+1
				}
			}
			if string(field) == "data" {
				if len(segs) > 0 {
					data = append(data, '\n')
				}
				segs = append(segs, segment{raw: valueAt, data: len(data), n: len(value)})
				data = append(data, value...)
			}
		}
		pos = next
	}
	out := make([][]sseFragment, 0, len(order))
	for _, k := range order {
		out = append(out, streams[k])
	}
	return out
}

// chunkString is a joined-text string value found in one chunk's JSON: its byte span in the
// event's data and where it belongs.
type chunkString struct {
	start, end int
	choice     int
	field      string // content, refusal, reasoning_content or arguments
	callPos    int    // the tool call's position in the chunk's tool_calls
	callIndex  *int   // its "index", nil when absent
	callID     string // its "id", "" when absent
}

// joinedDeltaFields are the delta fields a client concatenates across chunks.
var joinedDeltaFields = []string{"content", "refusal", "reasoning_content"}

// chunkStrings returns the string values at choices[*].delta.{content,refusal,reasoning_content}
// and choices[*].delta.tool_calls[*].function.arguments of one chunk, with the choice index and
// tool-call index or id the chunk gives them, reading keys and indices as encoding/json would
// (case-insensitive keys, escapes decoded, the last of duplicate indices wins). Data that is not valid JSON, or whose indices are not
// integers, gives none: a client could not have read it either.
func chunkStrings(data []byte) []chunkString {
	if !json.Valid(data) {
		return nil
	}
	type call struct{ choice, pos int }
	var (
		found       []chunkString
		choiceIndex = map[int]int{}
		callIndex   = map[call]int{}
		callID      = map[call]string{}
		bad         bool
	)
	// Keys match as encoding/json matches struct fields: exactly or case-insensitively.
	is := func(e jsonPathElem, name string) bool { return e.isKey && strings.EqualFold(e.key, name) }
	w := jsonWalker{data: data}
	w.walk(func(p []jsonPathElem, start, end int, str bool) {
		if len(p) < 3 || !is(p[0], "choices") || p[1].isKey {
			return
		}
		k := p[1].pos
		last := p[len(p)-1]
		switch {
		case len(p) == 3 && is(last, "index") && !str:
			if n, ok := jsonInt(data[start:end], &bad); ok {
				choiceIndex[k] = n
			} else {
				delete(choiceIndex, k)
			}
		case len(p) == 4 && str && is(p[2], "delta"):
			for _, f := range joinedDeltaFields {
				if is(last, f) {
					found = append(found, chunkString{start: start, end: end, choice: k, field: f})
				}
			}
		case len(p) >= 6 && is(p[2], "delta") && is(p[3], "tool_calls") && !p[4].isKey:
			c := call{k, p[4].pos}
			switch {
			case len(p) == 6 && is(last, "index") && !str:
				if n, ok := jsonInt(data[start:end], &bad); ok {
					callIndex[c] = n
				} else {
					delete(callIndex, c)
				}
			case len(p) == 6 && is(last, "id") && str:
				var id string
				bad = bad || json.Unmarshal(data[start:end], &id) != nil
				callID[c] = id
			case len(p) == 7 && str && is(p[5], "function") && is(last, "arguments"):
				found = append(found, chunkString{start: start, end: end, choice: k, field: "arguments", callPos: c.pos})
			}
		}
	})
	if bad {
		return nil
	}
	for i := range found {
		f := &found[i]
		k := f.choice
		if n, ok := choiceIndex[k]; ok {
			f.choice = n
		}
		if f.field != "arguments" {
			continue
		}
		c := call{k, f.callPos}
		f.callID = callID[c]
		if n, ok := callIndex[c]; ok {
			f.callIndex = &n
		}
	}
	return found
}

// jsonInt reads an integer index as encoding/json decodes it into *int: null is absent (ok false),
// anything but an integer sets bad (the client refuses such a chunk).
func jsonInt(tok []byte, bad *bool) (int, bool) {
	if string(tok) == "null" {
		return 0, false
	}
	n, err := strconv.Atoi(string(tok))
	if err != nil {
		*bad = true
		return 0, false
	}
	return n, true
}

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
