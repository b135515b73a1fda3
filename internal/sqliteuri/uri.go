// Package sqliteuri builds the data source names assay opens SQLite files
// with: SQLite URI filenames (https://www.sqlite.org/uri.html) whose path is
// percent-encoded, so that a '?', '#' or '%' in a file name is part of the
// name. Pasting a path into "file:"+path+"?..." instead lets such a name
// end the path early, drop the parameters after it (mode=ro among them) and
// open another file.
package sqliteuri

import (
	"net/url"
	"os"
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

// ReadOnlyFile returns the DSN that reads the file at abs, an absolute path,
// without creating or changing anything beside it: SQLite's read-only mode
// on a database in WAL mode creates its -wal and -shm files when they are
// missing and leaves them behind, so a database with no -wal file (closed
// cleanly: everything is in the main file) is opened immutable=1, and only
// one with a -wal file (a writer live or crashed, whose last commits are
// there) in mode=ro, where those files already exist.
func ReadOnlyFile(abs string) string {
	if _, err := os.Lstat(abs + "-wal"); err == nil {
		return File(abs, "mode=ro&_busy_timeout=10000")
	}
	return File(abs, "mode=ro&immutable=1")
}
