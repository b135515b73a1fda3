package reports

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// Format is one report format: its name (`assay report --format NAME`), the file name a command
// writes it under, and its renderer. Adding a format is adding one value to Formats.
type Format struct {
	Name   string
	File   string
	Render func(w io.Writer, r Report) error
}

// Formats lists every format `assay report` renders (sarif belongs to `assay audit`).
func Formats() []Format {
	return []Format{
		{Name: "md", File: "report.md", Render: Markdown},
		{Name: "html", File: "report.html", Render: HTML},
		{Name: "json", File: "report.json", Render: JSON},
		{Name: "junit", File: "junit.xml", Render: JUnit},
	}
}

// LookupFormat returns the format named name; ok false when there is none.
func LookupFormat(name string) (Format, bool) {
	for _, f := range Formats() {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// invocationFormats are the formats `matrix run` and `resume` write for their invocation.
var invocationFormats = []string{"md", "html", "json", "junit"}

// InvocationReports are the files WriteInvocationReports wrote.
type InvocationReports struct {
	// Dir is OUT/reports/<invocation id>; Files the reports in it; Latest their copies in OUT.
	Dir    string
	Files  []string
	Latest []string
}

// WriteInvocationReports renders the report of runIDs (the runs one invocation wrote or sealed),
// read back from the evidence store at storePath opened read-only, into
// OUT/reports/<invocationID>/ (report.md, report.html, report.json, junit.xml) and copies in OUT (the store's directory)
// that point to the latest invocation: each file is rendered for its own directory, so its
// relative links to evidence files resolve from where it is. Files are written atomically, mode
// 0644; no report of an earlier invocation is lost. Every run is verified as Load verifies it,
// with bindings recomputing the records outside the store (nil: their hashes only); groupBy, when not
// "", also groups the cases by that axis (Selection.GroupBy).
//
// Errors: evidence.Open's; an error wrapping evidence.ErrNoRun for a run the store lacks; an
// invocation id that is not 1..128 characters of [A-Za-z0-9._-] (it names a directory); the file
// system's errors, naming the path.
func WriteInvocationReports(ctx context.Context, storePath, invocationID string, runIDs []string, bindings []evidence.BindingChecker, groupBy string) (InvocationReports, error) {
	if !validName(invocationID) {
		return InvocationReports{}, fmt.Errorf("reports: invocation id %q is not 1..128 characters of [A-Za-z0-9._-]", invocationID)
	}
	store, err := evidence.Open(ctx, storePath, evidence.OpenOptions{ReadOnly: true, Command: "matrix report"})
	if err != nil {
		return InvocationReports{}, err
	}
	var r Report
	if len(runIDs) > 0 {
		r, err = Load(ctx, store, Selection{RunIDs: runIDs, Bindings: bindings, GroupBy: groupBy})
	} else {
		// No runs is an empty report, never "the latest" (what an empty RunIDs selects).
		r, err = emptyReport(store)
	}
	store.Close()
	if err != nil {
		return InvocationReports{}, err
	}
	r.Selection = "the runs of invocation " + invocationID
	out := InvocationReports{Dir: filepath.Join(r.OutDir, "reports", invocationID)}
	if err := os.MkdirAll(out.Dir, 0o755); err != nil {
		return InvocationReports{}, err
	}
	for _, dir := range []string{out.Dir, r.OutDir} {
		rb, err := r.Rebase(dir)
		if err != nil {
			return InvocationReports{}, err
		}
		for _, name := range invocationFormats {
			f, _ := LookupFormat(name)
			path := filepath.Join(dir, f.File)
			if err := WriteReportFile(path, f, rb); err != nil {
				return InvocationReports{}, err
			}
			if dir == out.Dir {
				out.Files = append(out.Files, path)
			} else {
				out.Latest = append(out.Latest, path)
			}
		}
	}
	return out, nil
}

// emptyReport is the report of no runs of store.
func emptyReport(store *evidence.Store) (Report, error) {
	outDir, err := filepath.Abs(filepath.Dir(store.Path()))
	if err != nil {
		return Report{}, err
	}
	return Report{SchemaVersion: ReportSchemaVersion, GeneratedAt: time.Now().UTC(), StorePath: store.Path(), OutDir: outDir,
		LinkBase: outDir, Totals: totalsOf(nil), Invocations: []Invocation{}}, nil
}

// WriteReportFile renders r in format f and writes it to path atomically (WriteFileAtomic, mode
// 0644): nothing is written when rendering fails. Errors name path.
func WriteReportFile(path string, f Format, r Report) error {
	var buf bytes.Buffer
	if err := f.Render(&buf, r); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if err := WriteFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// validName reports whether s is a well-formed id (evidence.ValidID) that names a directory of its
// own (not "." or "..").
func validName(s string) bool { return evidence.ValidID(s) && s != "." && s != ".." }
