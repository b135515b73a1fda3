package indexer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// LoadError is one recorded load error (a row of load_errors).
type LoadError struct {
	// Package is the go/packages ID of the package the error was reported
	// for ("p", "p [p.test]", "p_test [p.test]", or the test main "p.test"),
	// or, for a pattern that matched no package, the pattern.
	Package string `json:"package"`
	// PackageID is the package's node id; "" when the package is not in
	// the graph (an unmatched pattern, a test main package).
	PackageID string `json:"package_id,omitempty"`
	// Kind is list, parse, type, module, file, unknown or
	// excluded_by_build_context (see the package doc, load_errors).
	Kind string `json:"kind"`
	// File is the file the error is in, as NodeInfo.File gives it (relative
	// to its module root, absolute outside one); "" when the error has no
	// position (the go command's own errors, which may name one in the
	// message).
	File string `json:"file,omitempty"`
	// Line and Col are the 1-based physical line and byte column; 0 when
	// not known.
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
	// Message is the error's text as recorded; the go command's messages
	// span several lines.
	Message string `json:"message"`
}

// LoadErrorReport is what LoadErrors returns: the errors and the coverage
// of the snapshot they belong to.
type LoadErrorReport struct {
	// Snapshot is the snapshot's id (SHA-256 hex, 64 chars).
	Snapshot string `json:"snapshot"`
	// PackagesOK and PackagesMatched are the snapshot's packages_ok and
	// packages_matched, and Coverage their ratio (0..1), all of the whole
	// snapshot whatever the pattern: see the package doc, Coverage.
	PackagesOK      int     `json:"packages_ok"`
	PackagesMatched int     `json:"packages_matched"`
	Coverage        float64 `json:"coverage"`
	// UnmatchedPatterns is how many of PackagesMatched are patterns that
	// matched no package (snapshots.unmatched_patterns): each counts as a
	// package that did not load.
	UnmatchedPatterns int `json:"unmatched_patterns"`
	// PackagesExcluded are the import paths, sorted, of the package
	// directories the build context excluded (load_errors kind
	// excluded_by_build_context; e.g. cgo-only packages with
	// CGO_ENABLED=0), of the whole snapshot whatever the pattern: each
	// counts in PackagesMatched as a package that did not load. Never nil.
	PackagesExcluded []string `json:"packages_excluded"`
	// Errors are the recorded load errors that match the pattern, sorted
	// by Package, then File, Line and Col (errors without a position after
	// those with one), then the order they were recorded in. Never nil.
	Errors []LoadError `json:"errors"`
	// IllTypedWithoutErrors are the go/packages IDs, sorted, of the
	// packages matching the pattern that have no error of their own but
	// are ill-typed (go/packages IllTyped: a package they import has
	// errors), so their type information may be incomplete; they count
	// against coverage. (snapshots.packages_ill_typed counts every
	// ill-typed package, with errors of its own or not.) Never nil.
	IllTypedWithoutErrors []string `json:"ill_typed_without_errors"`
}

// ErrNoSuchPackage is returned (wrapped, naming the pattern) when a
// package pattern matches no package of the graph and no recorded error:
// an empty answer would read as "no errors" for a package never indexed.
var ErrNoSuchPackage = errors.New("indexer: no package matches")

// LoadErrors returns the load errors recorded in the graph database db
// (every error go/packages or the go command reported, and the patterns
// that matched no package) with the snapshot's coverage. pattern, when not
// "", keeps the errors of the packages it matches: an import path, or a
// pattern with "..." wildcards as the go command reads it
// ("example.com/m/..." is example.com/m and every package below it); a
// package's test variant, external test package and test main count as the
// package (example.com/m/p matches "example.com/m/p_test [example.com/m/p.test]"),
// and an unmatched pattern's error is matched by that pattern exactly.
// Errors: ErrNoSuchPackage (wrapped) when pattern matches no package of the
// graph and no error; a wrapped SQLite error.
func LoadErrors(ctx context.Context, db *sql.DB, pattern string) (LoadErrorReport, error) {
	r := LoadErrorReport{Errors: []LoadError{}, IllTypedWithoutErrors: []string{}, PackagesExcluded: []string{}}
	if err := db.QueryRowContext(ctx, "SELECT id, packages_ok, packages_matched, coverage, unmatched_patterns FROM snapshots").
		Scan(&r.Snapshot, &r.PackagesOK, &r.PackagesMatched, &r.Coverage, &r.UnmatchedPatterns); err != nil {
		return LoadErrorReport{}, fmt.Errorf("indexer: read the snapshot: %w", err)
	}
	match := packagePattern(pattern)
	// A file's module-relative path, from any of the rows the file has
	// (one per package variant compiling it; all have the same).
	rows, err := db.QueryContext(ctx, `SELECT e.go_id, coalesce(e.package_id, ''), e.kind,
		coalesce(f.rel_path, e.file, ''), coalesce(e.line, 0), coalesce(e.col, 0), e.message
		FROM load_errors e LEFT JOIN (SELECT path, max(rel_path) AS rel_path FROM files GROUP BY path) f ON f.path = e.file
		ORDER BY e.seq`)
	if err != nil {
		return LoadErrorReport{}, fmt.Errorf("indexer: load errors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e LoadError
		if err := rows.Scan(&e.Package, &e.PackageID, &e.Kind, &e.File, &e.Line, &e.Col, &e.Message); err != nil {
			return LoadErrorReport{}, fmt.Errorf("indexer: load errors: %w", err)
		}
		if e.Kind == ExcludedByBuildContext {
			r.PackagesExcluded = append(r.PackagesExcluded, e.Package)
		}
		if match(e.Package) {
			r.Errors = append(r.Errors, e)
		}
	}
	if err := rows.Err(); err != nil {
		return LoadErrorReport{}, fmt.Errorf("indexer: load errors: %w", err)
	}
	slices.Sort(r.PackagesExcluded)
	slices.SortStableFunc(r.Errors, func(a, b LoadError) int {
		switch {
		case a.Package != b.Package:
			return strings.Compare(a.Package, b.Package)
		case (a.File == "") != (b.File == ""):
			if a.File == "" {
				return 1
			}
			return -1
		case a.File != b.File:
			return strings.Compare(a.File, b.File)
		case a.Line != b.Line:
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	pkgs, err := db.QueryContext(ctx, "SELECT go_id, ill_typed = 1 AND error_count = 0 FROM packages ORDER BY go_id")
	if err != nil {
		return LoadErrorReport{}, fmt.Errorf("indexer: packages: %w", err)
	}
	defer pkgs.Close()
	found := len(r.Errors) > 0
	for pkgs.Next() {
		var id string
		var illTyped bool
		if err := pkgs.Scan(&id, &illTyped); err != nil {
			return LoadErrorReport{}, fmt.Errorf("indexer: packages: %w", err)
		}
		if match(id) {
			found = true
			if illTyped {
				r.IllTypedWithoutErrors = append(r.IllTypedWithoutErrors, id)
			}
		}
	}
	if err := pkgs.Err(); err != nil {
		return LoadErrorReport{}, fmt.Errorf("indexer: packages: %w", err)
	}
	if !found {
		return LoadErrorReport{}, fmt.Errorf("%w %q in the graph", ErrNoSuchPackage, pattern)
	}
	return r, nil
}

// FirstLoadError returns the load error recorded first in the graph
// database db: its position as go/packages or the go command gave it
// ("file:line:col", the file as loaded; "" when it has none) and its
// message, which may span lines. ok is false when no error is recorded.
// Errors: a wrapped SQLite error.
func FirstLoadError(ctx context.Context, db *sql.DB) (position, message string, ok bool, err error) {
	var pos sql.NullString
	err = db.QueryRowContext(ctx, "SELECT position, message FROM load_errors ORDER BY seq LIMIT 1").Scan(&pos, &message)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("indexer: first load error: %w", err)
	}
	return pos.String, message, true, nil
}

// packagePattern returns the matcher of a go/packages ID for LoadErrors'
// pattern ("" matches everything). "..." matches any string, and a
// trailing "/..." also matches the path without it, as in the go command
// (cmd/go/internal/search.MatchPattern, without its vendor rule).
func packagePattern(pattern string) func(goID string) bool {
	if pattern == "" {
		return func(string) bool { return true }
	}
	re := strings.ReplaceAll(regexp.QuoteMeta(pattern), `\.\.\.`, `.*`)
	if strings.HasSuffix(re, `/.*`) {
		re = strings.TrimSuffix(re, `/.*`) + `(/.*)?`
	}
	rx := regexp.MustCompile(`^` + re + `$`)
	return func(goID string) bool {
		if goID == pattern {
			return true
		}
		path, _, _ := strings.Cut(goID, " [")
		if rx.MatchString(path) {
			return true
		}
		for _, suffix := range []string{"_test", ".test"} {
			if base, ok := strings.CutSuffix(path, suffix); ok && rx.MatchString(base) {
				return true
			}
		}
		return false
	}
}
