package indexer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestStripBodiesBlanksByPackageName: an import is blanked when its
// package's name does not appear in the declarations left after the
// bodies are dropped. The name comes from the listing; for a path the
// listing lacks it is assumed only where the path's last element is the
// name by plain convention, and otherwise the import is kept.
func TestStripBodiesBlanksByPackageName(t *testing.T) {
	t.Parallel()
	names := map[string]string{
		"github.com/openai/openai-go/v3": "openai",
		"example.com/other-go":           "other",
		"example.com/twice-go":           "", // the listing found two names
	}
	for _, tc := range []struct {
		name, path, use string
		signature       bool
		blanked         bool
	}{
		{"named by the listing, used in a signature, kept", "github.com/openai/openai-go/v3", "openai", true, false},
		{"named by the listing, used in a body only, blanked", "example.com/other-go", "other", false, true},
		{"named ambiguously, kept", "example.com/twice-go", "twice", false, false},
		{"not listed, plain last element, body only, blanked", "example.com/foo/v2", "foo", false, true},
		{"not listed, plain last element, used in a signature, kept", "example.com/foo/v2", "foo", true, false},
		{"not listed, gopkg.in version suffix, kept", "gopkg.in/yaml.v3", "yaml", false, false},
		{"not listed, go- prefix, kept", "example.com/go-bar", "bar", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package p\n\nimport " + strconv.Quote(tc.path) + "\n\n"
			if tc.signature {
				src += "func F(x " + tc.use + ".T) { _ = x }\n"
			} else {
				src += "func F() { " + tc.use + ".G() }\n"
			}
			f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ends := stripBodies(f, names)
			if len(ends) != 1 || f.Decls[1].(*ast.FuncDecl).Body != nil {
				t.Fatalf("F's body was not stripped")
			}
			blanked := f.Imports[0].Name != nil && f.Imports[0].Name.Name == "_"
			if blanked != tc.blanked {
				t.Errorf("import %q blanked %v, want %v", tc.path, blanked, tc.blanked)
			}
		})
	}
}
