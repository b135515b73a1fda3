package metrics

import "testing"

// TestLoadProblem: a package with errors of its own says so; one ill-typed
// without any names the imports that did not load cleanly (one, several,
// or, when none of them is indexed, a dependency); a clean one has none.
func TestLoadProblem(t *testing.T) {
	in := &Input{Packages: map[string]*Package{}, Edges: map[string][]Edge{}}
	for _, p := range []*Package{
		{ID: "pkg:bad", ImportPath: "bad", Errors: 2},
		{ID: "pkg:worse", ImportPath: "worse", Errors: 1},
		{ID: "pkg:ok", ImportPath: "ok", OK: true},
		{ID: "pkg:one", ImportPath: "one"},
		{ID: "pkg:two", ImportPath: "two"},
		{ID: "pkg:far", ImportPath: "far"},
	} {
		in.Packages[p.ID] = p
		in.PackageIDs = append(in.PackageIDs, p.ID)
	}
	in.Edges["imports"] = []Edge{{"pkg:far", "pkg:ok"}, {"pkg:one", "pkg:bad"}, {"pkg:one", "pkg:ok"},
		{"pkg:two", "pkg:bad"}, {"pkg:two", "pkg:worse"}}
	for id, want := range map[string]string{
		"pkg:bad": "package bad has load or type errors",
		"pkg:ok":  "",
		"pkg:one": "package one has no errors of its own but is ill-typed through its import bad, which did not load cleanly",
		"pkg:two": "package two has no errors of its own but is ill-typed through its imports bad, worse, which did not load cleanly",
		"pkg:far": "package far has no errors of its own but is ill-typed through a dependency that did not load cleanly",
	} {
		if got := in.loadProblem(in.Packages[id]); got != want {
			t.Errorf("loadProblem(%s) = %q, want %q", id, got, want)
		}
	}
}
