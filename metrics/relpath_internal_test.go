package metrics

import (
	"testing"
)

// TestRelPath: reasons name files as files.rel_path does, relative to the
// module root, for a package at the root, a nested one, an external test
// package (p_test lives in p's directory) and test variants; a file the
// import path does not place in its module keeps its path.
func TestRelPath(t *testing.T) {
	in := &Input{
		Packages: map[string]*Package{
			"pkg:m":                       {ID: "pkg:m", ImportPath: "m", Variant: "base"},
			"pkg:m/a/b":                   {ID: "pkg:m/a/b", ImportPath: "m/a/b", Variant: "base"},
			"pkg:m/a/b [m/a/b.test]":      {ID: "pkg:m/a/b [m/a/b.test]", ImportPath: "m/a/b", Variant: "test"},
			"pkg:m/a/b_test [m/a/b.test]": {ID: "pkg:m/a/b_test [m/a/b.test]", ImportPath: "m/a/b_test", Variant: "xtest"},
			"pkg:m/odd":                   {ID: "pkg:m/odd", ImportPath: "m/odd", Variant: "base"},
			"pkg:nomod":                   {ID: "pkg:nomod", ImportPath: "nomod", Variant: "base"},
		},
		Nodes: map[string]*Node{},
		Edges: map[string][]Edge{"contains": {
			{"mod:m", "pkg:m"}, {"mod:m", "pkg:m/a/b"}, {"mod:m", "pkg:m/a/b [m/a/b.test]"},
			{"mod:m", "pkg:m/a/b_test [m/a/b.test]"}, {"mod:m", "pkg:m/odd"}, {"pkg:m/a/b", "file:m/a/b:b.go"},
		}},
	}
	for _, tc := range []struct{ pkg, path, want string }{
		{"pkg:m", "/src/m/main.go", "main.go"},
		{"pkg:m/a/b", "/src/m/a/b/b.go", "a/b/b.go"},
		{"pkg:m/a/b [m/a/b.test]", "/src/m/a/b/b_test.go", "a/b/b_test.go"},
		{"pkg:m/a/b_test [m/a/b.test]", "/src/m/a/b/x_test.go", "a/b/x_test.go"},
		{"pkg:m/odd", "/elsewhere/gen.go", "/elsewhere/gen.go"},
		{"pkg:nomod", "/gopath/src/nomod/n.go", "/gopath/src/nomod/n.go"},
	} {
		id := "file:" + tc.path
		in.Nodes[id] = &Node{ID: id, Kind: "file", PackageID: tc.pkg}
		if got := in.relPath(&File{ID: id, Path: tc.path}); got != tc.want {
			t.Errorf("relPath(%s in %s) = %q, want %q", tc.path, tc.pkg, got, tc.want)
		}
	}
}
