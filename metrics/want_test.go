package metrics_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/assay-audit/assay/metrics"
)

// A fixture carries the values its metrics must have in "// want"
// comments, as golang.org/x/tools/go/analysis/analysistest's fixtures carry
// their diagnostics: the values are written once, beside the code they are
// about, and fixtureWants reads them. A comment
//
//	// want METRIC=VALUE ...
//
// on the line of a package clause is about the package, on the line of a
// type's name about the type, on the line of a func declaration's name
// about the function or method, and on the line of a func literal (with no
// declaration on it) about the closure. VALUE is a decimal number, a
// fraction ("2/3") or "unavailable"; either may be followed by ("TEXT"),
// which the value's reason must contain. METRIC[test] is about the
// package's test variant ("p [p.test]") instead of its base variant.
var wantTerm = regexp.MustCompile(`^(\w+)(\[test\])?=(unavailable|[0-9.]+(?:/[0-9.]+)?)(?:\("([^"]*)"\))?`)

// fixtureWants returns the "// want" expectations of the Go files of the
// module in dir. A comment it cannot read, or one on a line with nothing it
// can be about, fails the test: an expectation must never be dropped.
func fixtureWants(t *testing.T, dir string) []want {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	modulePath := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(mod), "\n", 2)[0], "module"))
	var out []want
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, err := filepath.Rel(dir, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkgPath := modulePath
		if rel != "." {
			pkgPath += "/" + filepath.ToSlash(rel)
		}
		ws, err := fileWants(path, pkgPath)
		out = append(out, ws...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fileWants reads the expectations of one file of package pkgPath.
func fileWants(path, pkgPath string) ([]want, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	// What each line is about, for a variant's package ID.
	subjects := map[int]func(pkgID string) string{}
	line := func(p token.Pos) int { return fset.Position(p).Line }
	subjects[line(f.Name.Pos())] = func(id string) string { return "pkg:" + id }
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok {
					subjects[line(ts.Name.Pos())] = func(id string) string { return "type:" + id + "." + ts.Name.Name }
				}
			}
		case *ast.FuncDecl:
			declID := func(id string) string { return "func:" + id + "." + decl.Name.Name }
			if decl.Recv != nil && len(decl.Recv.List) > 0 {
				recv := receiverName(decl.Recv.List[0].Type)
				declID = func(id string) string { return "method:" + id + "." + recv + "." + decl.Name.Name }
			}
			for lit, suffix := range closureSuffixes(decl) {
				if l := line(lit.Pos()); subjects[l] == nil {
					subjects[l] = func(id string) string { return declID(id) + suffix }
				}
			}
			subjects[line(decl.Name.Pos())] = declID
		}
	}
	var out []want
	for _, g := range f.Comments {
		for _, c := range g.List {
			text, ok := strings.CutPrefix(c.Text, "// want ")
			if !ok {
				continue
			}
			at := fset.Position(c.Pos())
			subject := subjects[at.Line]
			if subject == nil {
				return nil, fmt.Errorf("%s: a want comment on a line with no package clause, type, function or closure", at)
			}
			for rest := strings.TrimSpace(text); rest != ""; {
				m := wantTerm.FindStringSubmatch(rest)
				if m == nil {
					return nil, fmt.Errorf("%s: cannot read %q (want METRIC=VALUE, see wantTerm)", at, rest)
				}
				id := pkgPath
				if m[2] != "" {
					id = pkgPath + " [" + pkgPath + ".test]"
				}
				w := want{metric: m[1], subject: subject(id), reason: m[4]}
				if m[3] != "unavailable" {
					v, err := parseNumber(m[3])
					if err != nil {
						return nil, fmt.Errorf("%s: %w", at, err)
					}
					w.value = &v
				}
				out = append(out, w)
				rest = strings.TrimLeft(rest[len(m[0]):], " ")
			}
		}
	}
	return out, nil
}

// closureSuffixes returns the id suffix of every func literal in decl, as
// the indexer numbers closures: "$n" from 1 in source order within the
// innermost enclosing function or closure.
func closureSuffixes(decl *ast.FuncDecl) map[*ast.FuncLit]string {
	out := map[*ast.FuncLit]string{}
	var visit func(n ast.Node, prefix string)
	visit = func(n ast.Node, prefix string) {
		count := 0
		ast.Inspect(n, func(m ast.Node) bool {
			lit, ok := m.(*ast.FuncLit)
			if !ok || m == n {
				return true
			}
			count++
			out[lit] = prefix + "$" + strconv.Itoa(count)
			visit(lit.Body, out[lit])
			return false
		})
	}
	visit(decl, "")
	return out
}

// receiverName is the type name of a receiver expression ("*Stack[T]" is
// Stack).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// parseNumber reads a decimal number or a fraction "a/b".
func parseNumber(s string) (float64, error) {
	num, den, frac := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || !frac {
		return n, err
	}
	d, err := strconv.ParseFloat(den, 64)
	if err != nil || d == 0 {
		return 0, fmt.Errorf("bad fraction %q", s)
	}
	return n / d, nil
}

// TestFixtureWants: every value the fixture's want comments name is the
// value indexed, and every metric they name is in the registry.
func TestFixtureWants(t *testing.T) {
	t.Parallel()
	wants := fixtureWants(t, "testdata/fixture")
	if len(wants) < 50 {
		t.Fatalf("only %d expectations read from the fixture: the want comments were not found", len(wants))
	}
	for _, w := range wants {
		if _, ok := metrics.Lookup(w.metric); !ok {
			t.Errorf("want %s of %s: no such metric", w.metric, w.subject)
		}
	}
	_, got := indexFixture(t, metrics.Options{})
	check(t, got, wants)
}
