// Package sqliteuri builds the data source names assay opens SQLite files
// with: SQLite URI filenames (https://www.sqlite.org/uri.html) whose path is
// percent-encoded, so that a '?', '#' or '%' in a file name is part of the
// name. Pasting a path into "file:"+path+"?..." instead lets such a name
// end the path early, drop the parameters after it (mode=ro among them) and
// open another file.
package sqliteuri

import (
	"net/url"
	"path/filepath"
)

// File returns the DSN for the file at abs, an absolute path, with params
// (a URI query such as "mode=ro&_busy_timeout=10000", mattn/go-sqlite3's
// underscore parameters included; "" for none).
func File(abs, params string) string {
	s := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
	if params != "" {
		s += "?" + params
	}
	return s
}
