package policy

import (
	"encoding/json"
	"strconv"
	"strings"
)

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
