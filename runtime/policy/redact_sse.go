package policy

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

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
