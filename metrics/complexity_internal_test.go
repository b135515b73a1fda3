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
