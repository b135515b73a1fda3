package indexer

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

func TestSplitPosition(t *testing.T) {
	for _, tc := range []struct {
		pos       string
		file      string
		line, col int
		ok        bool
	}{
		{"/src/a.go:12:5", "/src/a.go", 12, 5, true},
		{"/src/a.go:12", "/src/a.go", 12, 0, true},
		{`C:\src\a.go:3:1`, `C:\src\a.go`, 3, 1, true},
		{"-", "", 0, 0, false},
		{"", "", 0, 0, false},
		{"a.go:x:y", "", 0, 0, false},
		{":7", "", 0, 0, false},
	} {
		file, line, col, ok := splitPosition(tc.pos)
		if file != tc.file || line != tc.line || col != tc.col || ok != tc.ok {
			t.Errorf("splitPosition(%q) = %q, %d, %d, %v; want %q, %d, %d, %v",
				tc.pos, file, line, col, ok, tc.file, tc.line, tc.col, tc.ok)
		}
	}
}

func TestReceiverTypeName(t *testing.T) {
	for _, tc := range []struct {
		src     string
		name    string
		pointer bool
		ok      bool
	}{
		{"T", "T", false, true},
		{"*T", "T", true, true},
		{"(*T)", "T", true, true},
		{"Pair[K, V]", "Pair", false, true},
		{"*Box[T]", "Box", true, true},
		{"**T", "", false, false},
		{"pkg.T", "", false, false},
	} {
		expr, err := parser.ParseExpr(tc.src)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.src, err)
		}
		name, pointer, ok := receiverTypeName(expr)
		if name != tc.name || pointer != tc.pointer || ok != tc.ok {
			t.Errorf("receiverTypeName(%s) = %q, %v, %v; want %q, %v, %v", tc.src, name, pointer, ok, tc.name, tc.pointer, tc.ok)
		}
	}
}

// TestSyntaxTypeKind covers the classification used when a package has no
// type information: whatever syntax cannot decide is "unknown".
func TestSyntaxTypeKind(t *testing.T) {
	for _, tc := range []struct {
		decl string
		want string
	}{
		{"type T struct{ A int }", "struct"},
		{"type T (interface{ M() })", "interface"},
		{"type T = U", "alias"},
		{"type T []int", "other"},
		{"type T map[string]int", "other"},
		{"type T func()", "other"},
		{"type T *int", "other"},
		{"type T U", "unknown"},
		{"type T int", "unknown"},
		{"type T pkg.U", "unknown"},
		{"type T G[int]", "unknown"},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package p\n"+tc.decl+"\n", 0)
		if err != nil {
			t.Fatalf("parse %q: %v", tc.decl, err)
		}
		ts := f.Decls[0].(*ast.GenDecl).Specs[0].(*ast.TypeSpec)
		if got := syntaxTypeKind(ts); got != tc.want {
			t.Errorf("syntaxTypeKind(%s) = %q, want %q", tc.decl, got, tc.want)
		}
	}
}

func TestIDAllocator(t *testing.T) {
	a := idAllocator{}
	got := []string{a.next("func:p.init"), a.next("func:p.F"), a.next("func:p.init"), a.next("func:p.init")}
	want := []string{"func:p.init", "func:p.F", "func:p.init#2", "func:p.init#3"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("id %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestPackageClassification(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pkg      packages.Package
		variant  string
		testMain bool
		pattern  bool
	}{
		{"base", packages.Package{ID: "m/p", Name: "p", PkgPath: "m/p", Dir: "/m/p", GoFiles: []string{"/m/p/p.go"}}, "base", false, false},
		{"test variant", packages.Package{ID: "m/p [m/p.test]", Name: "p", PkgPath: "m/p", ForTest: "m/p", Dir: "/m/p", GoFiles: []string{"/m/p/p.go"}}, "test", false, false},
		{"external test", packages.Package{ID: "m/p_test [m/p.test]", Name: "p_test", PkgPath: "m/p_test", ForTest: "m/p", Dir: "/m/p", GoFiles: []string{"/m/p/x_test.go"}}, "xtest", false, false},
		{"recompiled dependency", packages.Package{ID: "m/q [m/p.test]", Name: "q", PkgPath: "m/q", ForTest: "m/p", Dir: "/m/q", GoFiles: []string{"/m/q/q.go"}}, "test_dependency", false, false},
		{"synthesized test main", packages.Package{ID: "m/p.test", Name: "main", PkgPath: "m/p.test", Dir: "/m/p", GoFiles: []string{"/cache/ab/abc-d"}}, "base", true, false},
		{"real main package named like a test main", packages.Package{ID: "m/x.test", Name: "main", PkgPath: "m/x.test", Dir: "/m/x.test", GoFiles: []string{"/m/x.test/main.go"}}, "base", false, false},
		{"unresolved pattern", packages.Package{ID: "./missing", PkgPath: "./missing", Errors: []packages.Error{{Msg: "directory not found"}}}, "base", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := packageVariant(&tc.pkg); got != tc.variant {
				t.Errorf("packageVariant = %q, want %q", got, tc.variant)
			}
			if got := isTestMain(&tc.pkg); got != tc.testMain {
				t.Errorf("isTestMain = %v, want %v", got, tc.testMain)
			}
			if got := isUnmatchedPattern(&tc.pkg); got != tc.pattern {
				t.Errorf("isUnmatchedPattern = %v, want %v", got, tc.pattern)
			}
		})
	}
}

func TestCountLines(t *testing.T) {
	for _, tc := range []struct {
		data string
		want int64
	}{
		{"", 0},
		{"a", 1},
		{"a\n", 1},
		{"a\nb", 2},
		{"\n\n", 2},
	} {
		if got := countLines([]byte(tc.data)); got != tc.want {
			t.Errorf("countLines(%q) = %d, want %d", tc.data, got, tc.want)
		}
	}
}

// TestRelationPassPanicIsAnError: a defect met while visiting one file
// (here: a file without type information in the work list) is returned as
// an error naming the file, not a crash of the calling process.
func TestRelationPassPanicIsAnError(t *testing.T) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "p.go", "package p\n\nfunc (T) M() {}\n\ntype T struct{}\n", parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := &packages.Package{ID: "example.com/p", Fset: fset} // TypesInfo nil
	b := &builder{g: &graph{}, declIDs: map[declKey]string{}, objIDs: map[types.Object]string{},
		extIDs: map[string]bool{}, depNodes: map[string]bool{}, declared: map[string]bool{}, indexed: map[string]bool{},
		rootOf: map[*types.Package]*packages.Package{}}
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			b.declIDs[declKey{pkg.ID, fd}] = "method:example.com/p.T.M"
		}
	}
	b.work = []relWork{{pkg: pkg, pkgID: "pkg:example.com/p", fileID: "file:example.com/p:p.go", variant: "base", file: file}}
	err = b.addRelations(context.Background())
	if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "file:example.com/p:p.go") {
		t.Fatalf("addRelations = %v, want an internal error naming the file", err)
	}
}

// TestMessagePosition: the position a go command message starts with, for
// errors that come without one.
func TestMessagePosition(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"# example.com/se/syntax\nsyntax/bad.go:3:23: syntax error: unexpected literal 2":                   "syntax/bad.go:3:23",
		"go.mod:3: unknown directive: foo":                                                                  "go.mod:3",
		"p/p.go:7:2: no required module provides package example.com/x; to add it:\n\tgo get example.com/x": "p/p.go:7:2",
		"no required module provides package example.com/x":                                                 "",
		"example.com/x: malformed module path":                                                              "",
		"module example.com/m: reading https://proxy: 404":                                                  "",
		"":                      "",
		"# only a header\n":     "",
		"a b.go:3:1: something": "",
	} {
		if got := messagePosition(msg); got != want {
			t.Errorf("messagePosition(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestSpanEndsInItsFile: go/parser ends a function whose parameter list
// the end of its file cuts off one past that end, which in a file set
// holding more files is the first position of the file parsed after it
// (go/packages parses concurrently: any of them). The span ends at the
// end of the declaration's own file, whatever was parsed next.
func TestSpanEndsInItsFile(t *testing.T) {
	fset := token.NewFileSet()
	cut, _ := parser.ParseFile(fset, "cut.go", "package p\n\nfunc Lost(a int", parser.AllErrors)
	if _, err := parser.ParseFile(fset, "next.go", "package p\n", 0); err != nil {
		t.Fatal(err)
	}
	fd := cut.Decls[0].(*ast.FuncDecl)
	sp := (&declExtractor{fset: fset}).span(fd.Pos(), fd.End())
	if sp == nil || sp.startLine != 3 || sp.endLine != 3 || sp.endCol != 16 {
		t.Fatalf("span of Lost = %+v, want 3:1 to the end of cut.go, 3:16", sp)
	}
}
