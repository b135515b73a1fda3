package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// complexityOf is the reference measureSyntax is checked against: each
// count from a walk of its own over the body.
func complexityOf(body *ast.BlockStmt) funcComplexity {
	c := funcComplexity{cyclomatic: 1 + decisions(body, false), cyclomaticFolded: 1 + decisions(body, true)}
	cg := &cognitiveCounter{counted: map[ast.Expr]bool{}}
	cg.walk(body, 0)
	c.cognitive = cg.total
	return c
}

// decisions counts decision points in n; with folded false, nested func
// literals are not entered.
func decisions(n ast.Node, folded bool) int {
	count := 0
	ast.Inspect(n, func(n ast.Node) bool {
		if _, ok := n.(*ast.FuncLit); ok {
			return folded
		}
		count += decisionPoint(n)
		return true
	})
	return count
}

// TestMeasureSyntaxMatchesSeparateWalks: measureSyntax walks each body once
// for both cyclomatic counts, measuring nested literals on the way; on real
// code (go/types, go/parser, net/http and this package's fixtures, with
// closures nested several deep) every function and literal gets what
// separate walks of its body give, and none is missed or measured twice.
func TestMeasureSyntaxMatchesSeparateWalks(t *testing.T) {
	var files []string
	for _, dir := range []string{
		filepath.Join(runtime.GOROOT(), "src", "go", "types"),
		filepath.Join(runtime.GOROOT(), "src", "go", "parser"),
		filepath.Join(runtime.GOROOT(), "src", "net", "http"),
	} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	err := filepath.WalkDir("testdata", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".go" {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d files to measure", len(files))
	}
	funcs, lits, folded := 0, 0, 0
	for _, path := range files {
		fset := token.NewFileSet()
		file, _ := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if file == nil {
			continue
		}
		want := map[srcPos][]string{}
		ref := map[string]funcComplexity{}
		add := func(n ast.Node, body *ast.BlockStmt) {
			p := fset.PositionFor(n.Pos(), false)
			id := p.String()
			want[srcPos{p.Line, p.Column}] = append(want[srcPos{p.Line, p.Column}], id)
			ref[id] = complexityOf(body)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body != nil {
					add(n, n.Body)
					funcs++
				}
			case *ast.FuncLit:
				add(n, n.Body)
				lits++
			}
			return true
		})
		got := measureSyntax(fset, file, want)
		if len(got.byNode) != len(ref) {
			t.Errorf("%s: %d functions and literals measured, want %d", path, len(got.byNode), len(ref))
		}
		for id, w := range ref {
			g, ok := got.byNode[id]
			switch {
			case !ok:
				t.Errorf("%s: not measured", id)
			case g != w:
				t.Errorf("%s: %+v, separate walks give %+v", id, g, w)
			}
			if w.cyclomaticFolded != w.cyclomatic {
				folded++
			}
		}
	}
	// The check means something only if literals fold into their parents.
	if funcs < 1000 || lits < 200 || folded < 50 {
		t.Fatalf("measured %d functions, %d literals, %d with literals folded in: too few to compare", funcs, lits, folded)
	}
}

// TestMeasureSyntaxLiteralsInSignatures: a func literal can sit in another
// literal's signature (an array length taken with unsafe.Sizeof of its
// call) or in a package-level literal's; it is measured as every literal
// is, and its decision points fold into the function around it, as
// separate walks of that function's body count them.
func TestMeasureSyntaxLiteralsInSignatures(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"in a literal's parameter type", `package p
import "unsafe"
var b, c bool
func F() int {
	g := func(a [unsafe.Sizeof(func() int { if b && c { return 1 }; return 0 }())]int) int { if b { return 1 }; return len(a) }
	return g([8]int{})
}`},
		{"in a literal's result type", `package p
import "unsafe"
var b bool
func F() { _ = func() (r [unsafe.Sizeof(func() bool { return b || !b }())]int) { return } }`},
		{"in a package-level literal's parameter type", `package p
import "unsafe"
var b bool
var V = func(a [unsafe.Sizeof(func() int { for range 3 { if b { return 1 } }; return 0 }())]int) {}`},
		{"in a method's parameter type and its literal's", `package p
import "unsafe"
type T [8]int
func (t *T) M(a [unsafe.Sizeof(func() int { if true { return 1 }; return 0 }())]int) { _ = func(x [unsafe.Sizeof(func() int { switch { case true: return 1 }; return 0 }())]int) {} }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, "p.go", tc.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			want := map[srcPos][]string{}
			ref := map[string]funcComplexity{}
			ast.Inspect(file, func(n ast.Node) bool {
				var body *ast.BlockStmt
				switch n := n.(type) {
				case *ast.FuncDecl:
					body = n.Body
				case *ast.FuncLit:
					body = n.Body
				}
				if body != nil {
					p := fset.PositionFor(n.Pos(), false)
					want[srcPos{p.Line, p.Column}] = append(want[srcPos{p.Line, p.Column}], p.String())
					ref[p.String()] = complexityOf(body)
				}
				return true
			})
			got := measureSyntax(fset, file, want)
			for id, w := range ref {
				if g, ok := got.byNode[id]; !ok {
					t.Errorf("%s: not measured (no body: %v)", id, got.noBody[id])
				} else if g != w {
					t.Errorf("%s: %+v, separate walks give %+v", id, g, w)
				}
			}
		})
	}
}
