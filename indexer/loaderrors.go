package indexer

import (
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// addDependencyErrors records the errors of the packages the roots import
// that are not indexed themselves (a missing module, a dependency that does
// not build): the root's own error only says that the import failed, and
// the go command's reason would otherwise be lost. Each dependency's errors
// are recorded once, without a package row (package_id NULL, go_id the
// dependency's), in the order the roots and their sorted imports reach it.
func (b *builder) addDependencyErrors(roots []*packages.Package) {
	seen := map[string]bool{}
	for _, p := range roots {
		for _, path := range slices.Sorted(maps.Keys(p.Imports)) {
			imp := p.Imports[path]
			if b.indexed[imp.ID] || seen[imp.ID] {
				continue
			}
			seen[imp.ID] = true
			if len(imp.Errors) > 0 || (imp.Module != nil && imp.Module.Error != nil) {
				b.addErrors(imp, sql.Null[string]{})
			}
		}
	}
}

// messagePosition returns the position a go command message starts with
// when its error has none of its own ("# pkg" header lines skipped):
// "p/bad.go:3:23" of "# example.com/m/p\np/bad.go:3:23: syntax error: ...",
// and "" when the first line does not start with FILE:LINE[:COL]: .
func messagePosition(msg string) string {
	for line := range strings.Lines(msg) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		head, _, found := strings.Cut(line, ": ")
		if !found || strings.ContainsAny(head, " \t") {
			return ""
		}
		if _, l, _, ok := splitPosition(head); ok && l > 0 {
			return head
		}
		return ""
	}
	return ""
}

// addErrors records p's errors, and its module's error if any.
func (b *builder) addErrors(p *packages.Package, pkgID sql.Null[string]) {
	for _, e := range p.Errors {
		r := loadErrorRow{packageID: pkgID, goID: p.ID, kind: errorKind(e.Kind), message: e.Msg}
		pos := e.Pos
		if pos == "" || pos == "-" {
			pos = messagePosition(e.Msg)
		}
		if pos != "" && pos != "-" {
			r.position = valid(pos)
			if file, line, col, ok := splitPosition(pos); ok {
				r.file = valid(file)
				r.line = valid(int64(line))
				if col > 0 {
					r.col = valid(int64(col))
				}
			}
		}
		b.g.loadErrors = append(b.g.loadErrors, r)
	}
	if p.Module != nil && p.Module.Error != nil {
		b.g.loadErrors = append(b.g.loadErrors, loadErrorRow{
			packageID: pkgID, goID: p.ID, kind: "module",
			message: fmt.Sprintf("module %s: %s", p.Module.Path, p.Module.Error.Err),
		})
	}
}

func errorKind(k packages.ErrorKind) string {
	switch k {
	case packages.ListError:
		return "list"
	case packages.ParseError:
		return "parse"
	case packages.TypeError:
		return "type"
	default:
		return "unknown"
	}
}

// splitPosition parses go/packages' "file:line:col" or "file:line"; ok is
// false (and the results zero) for anything else, such as "-".
func splitPosition(pos string) (file string, line, col int, ok bool) {
	rest, last, found := cutLast(pos, ":")
	if !found {
		return "", 0, 0, false
	}
	n, err := strconv.Atoi(last)
	if err != nil {
		return "", 0, 0, false
	}
	if head, mid, found := cutLast(rest, ":"); found {
		if m, err := strconv.Atoi(mid); err == nil && head != "" {
			return head, m, n, true
		}
	}
	if rest == "" {
		return "", 0, 0, false
	}
	return rest, n, 0, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
