package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/internal/jsonconv"
)

// table is rows of cells under a header, printable as table, CSV or JSON.
type table struct {
	header []string
	rows   [][]string
}

func (t table) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func (t table) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.header); err != nil {
		return err
	}
	if err := cw.WriteAll(t.rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// outputFormat returns the --format value format if it is one of allowed, the first of allowed (the
// flag's default) when it is "", and bad usage otherwise.
func outputFormat(format string, allowed ...string) (string, error) {
	switch {
	case format == "":
		return allowed[0], nil
	case !slices.Contains(allowed, format):
		return "", usageErrorf("--format %q is not one of %s", format, strings.Join(allowed, ", "))
	}
	return format, nil
}

// jsonSchemaVersion is the version of the shape of every command's JSON output (docs/json.md): it
// changes when a key is renamed or removed or a value changes meaning, not when a key is added.
const jsonSchemaVersion = 1

// writeJSON prints v, which must marshal to a JSON object, as a command's JSON output: the one
// convention of docs/json.md. The object gets a first key "schema_version" (jsonSchemaVersion), is
// indented by two spaces and ends in a newline; "<", ">" and "&" are printed as themselves, not as
// \u003c escapes. A value that is not an object (a list) is a programming error: wrap it in an object
// that names it.
func writeJSON(w io.Writer, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	body := bytes.TrimSpace(b)
	if len(body) < 2 || body[0] != '{' {
		return fmt.Errorf("JSON output of %T is not an object", v)
	}
	doc := fmt.Appendf(nil, `{"schema_version":%d`, jsonSchemaVersion)
	if rest := bytes.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
		doc = append(doc, ',')
	}
	doc = append(doc, body[1:]...)
	var out bytes.Buffer
	if err := json.Indent(&out, doc, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// marshalJSON is json.Marshal without HTML escapes: "<", ">" and "&" stay themselves (jsonconv.Marshal).
func marshalJSON(v any) ([]byte, error) { return jsonconv.Marshal(v) }

// storeFlags are the flags every command that reads the evidence store shares.
type storeFlags struct {
	out   string
	store string
}

func (f *storeFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.out, "out", "assay-out", "output directory holding evidence.duckdb")
	c.Flags().StringVar(&f.store, "store", "", "explicit evidence store file (overrides --out)")
}

// path returns the evidence store path the flags name.
func (f *storeFlags) path() string {
	if f.store != "" {
		return f.store
	}
	return filepath.Join(f.out, "evidence.duckdb")
}

// checkOutputPath refuses, as bad usage, an --output that would destroy evidence or cannot be a
// report file: one of the protected paths (the evidence store, its lock, a graph database the
// command reads), a file under the store's artifacts or cases directories (the evidence files
// reports link to), an existing directory, or an existing file that is a SQLite or DuckDB
// database (a gateway's usage database, an effects database, another store). Paths are compared
// after symbolic links are resolved. "" (stdout) passes. Nothing is written either way.
func checkOutputPath(output, storePath string, protected ...string) error {
	if output == "" {
		return nil
	}
	abs := resolvedPath(output)
	if storePath != "" {
		protected = append(protected, storePath, storePath+".lock", storePath+".wal")
		for _, dir := range []string{"artifacts", "cases"} {
			d := resolvedPath(filepath.Join(filepath.Dir(storePath), dir))
			if rel, err := filepath.Rel(d, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return usageErrorf("--output %s is inside the evidence store's %s directory: nothing written", output, dir)
			}
		}
	}
	for _, p := range protected {
		if p != "" && resolvedPath(p) == abs {
			return usageErrorf("--output %s is evidence this command reads: nothing written (name another file)", output)
		}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil // a new file; a missing directory is reported when writing
	}
	if fi.IsDir() {
		return usageErrorf("--output %s is a directory: name a file", output)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("SQLite format 3\x00")) || (len(head) >= 12 && string(head[8:12]) == "DUCK") {
		return usageErrorf("--output %s is a database (SQLite or DuckDB): assay never overwrites one with a report; nothing written", output)
	}
	return nil
}

// resolvedPath is path made absolute with symbolic links resolved: the path itself when it
// exists, else its directory (a file still to be written); as filepath.Abs gives it otherwise.
func resolvedPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(r, filepath.Base(abs))
	}
	return abs
}
