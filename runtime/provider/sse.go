package provider

import (
	"bytes"
)

// sseParser splits a server-sent event stream into the data of its events,
// following the WHATWG HTML "Interpreting an event stream" rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// lines end with CRLF, LF or a lone CR; a leading UTF-8 BOM is dropped; a line
// starting with ':' is a comment; "field: value" loses one space after the
// colon; several data lines of one event are joined with LF; a blank line
// dispatches the event when its data buffer is non-empty; an unfinished event
// at the end of the stream is discarded. Bytes may arrive split anywhere,
// including inside a CRLF pair; the parser buffers across feeds.
//
// Only the data field matters to chat completions; event, id and retry are
// parsed and ignored.
type sseParser struct {
	started   bool   // the BOM check has been done
	line      []byte // bytes of the current, unterminated line
	afterCR   bool   // the previous byte ended a line with CR: skip one LF
	data      []byte // the event's data buffer
	dataLines int    // data fields seen in the current event
}

// feed parses b and calls dispatch with each complete event's data. It stops
// early, returning stop=true, when dispatch does; the bytes after that event
// are not parsed. A dispatch error is returned as is.
func (p *sseParser) feed(b []byte, dispatch func(data []byte) (stop bool, err error)) (bool, error) {
	if !p.started {
		// The BOM may itself arrive split; wait for three bytes or a mismatch.
		probe := append(p.line, b...)
		bom := []byte("\xEF\xBB\xBF")
		if len(probe) < len(bom) && bytes.HasPrefix(bom, probe) {
			p.line = probe
			return false, nil
		}
		p.started = true
		b = bytes.TrimPrefix(probe, bom)
		p.line = nil
	}
	for len(b) > 0 {
		if p.afterCR {
			p.afterCR = false
			if b[0] == '\n' {
				b = b[1:]
				continue
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			p.line = append(p.line, b...)
			return false, nil
		}
		p.line = append(p.line, b[:i]...)
		p.afterCR = b[i] == '\r'
		b = b[i+1:]
		stop, err := p.processLine(p.line, dispatch)
		p.line = p.line[:0]
		if err != nil || stop {
			return stop, err
		}
	}
	return false, nil
}

func (p *sseParser) processLine(line []byte, dispatch func([]byte) (bool, error)) (bool, error) {
	if len(line) == 0 {
		if p.dataLines == 0 {
			return false, nil
		}
		data := bytes.TrimSuffix(p.data, []byte("\n"))
		out := make([]byte, len(data))
		copy(out, data)
		p.data = p.data[:0]
		p.dataLines = 0
		return dispatch(out)
	}
	if line[0] == ':' {
		return false, nil
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	if string(field) == "data" {
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
		p.dataLines++
	}
	return false, nil
}
