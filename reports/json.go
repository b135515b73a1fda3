package reports

import (
	"encoding/json"
	"io"
)

// JSON writes r as one indented JSON document: snake_case keys, schema_version first-level,
// durations as *_seconds numbers (null when unknown), full hashes, times in RFC 3339, and no HTML
// escapes ("->" stays "->", not "\u003e").
func JSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
