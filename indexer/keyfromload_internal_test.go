package indexer

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestKeyFromLoadEqualsListing: the reuse keys a cold index takes from its
// typed load are the keys the go command's own listing gives (what a later
// run compares them with), on modules with tests, embedded files, a
// vendored dependency, a directory replace, a go.work workspace, cgo, and
// on two packages of this repository.
func TestKeyFromLoadEqualsListing(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name     string
		dir      func(t *testing.T) string
		env      []string
		patterns []string
	}{
		{name: "vendor and embed", env: []string{"GOFLAGS=-mod=vendor", "GOPROXY=off"}, dir: func(t *testing.T) string {
			return write(t, map[string]string{
				"go.mod":                        "module example.com/k\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n",
				"vendor/modules.txt":            "# example.com/dep v1.0.0\n## explicit\nexample.com/dep\n",
				"vendor/example.com/dep/dep.go": "package dep\n\nfunc Two() int { return 2 }\n",
				"a/a.go":                        "package a\n\nimport \"example.com/dep\"\n\nfunc A() int { return dep.Two() }\n",
				"a/a_test.go":                   "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) { A() }\n",
				"a/x_test.go":                   "package a_test\n\nimport (\n\t\"testing\"\n\n\t\"example.com/k/a\"\n)\n\nfunc TestX(t *testing.T) { a.A() }\n",
				"e/e.go":                        "package e\n\nimport \"embed\"\n\n//go:embed data/*.txt\nvar Data embed.FS\n",
				"e/data/one.txt":                "one\n",
				"ignored/ig.go":                 "//go:build never\n\npackage ignored\n",
				"ignored/ok.go":                 "package ignored\n",
			})
		}},
		{name: "directory replace", env: []string{"GOPROXY=off", "GOFLAGS=-mod=mod"}, dir: func(t *testing.T) string {
			dir := write(t, map[string]string{
				"main/go.mod": "module example.com/main\n\ngo 1.22\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n",
				"main/m.go":   "package main\n\nimport \"example.com/lib\"\n\nfunc main() { lib.L() }\n",
				"lib/go.mod":  "module example.com/lib\n\ngo 1.22\n",
				"lib/l.go":    "package lib\n\nfunc L() {}\n",
			})
			return filepath.Join(dir, "main")
		}},
		{name: "workspace", dir: func(t *testing.T) string {
			return write(t, map[string]string{
				"go.work":  "go 1.22\n\nuse (\n\t./a\n\t./b\n)\n",
				"a/go.mod": "module example.com/wa\n\ngo 1.22\n",
				"a/a.go":   "package a\n\nimport \"example.com/wb\"\n\nfunc A() { b.B() }\n",
				"b/go.mod": "module example.com/wb\n\ngo 1.22\n",
				"b/b.go":   "package b\n\nfunc B() {}\n",
			})
		}},
		{name: "cgo", dir: func(t *testing.T) string { return "testdata/relations" }},
		{name: "this repository", dir: func(t *testing.T) string { return ".." }, patterns: []string{"./indexer", "./metrics"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir, err := filepath.Abs(tc.dir(t))
			if err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), tc.env...)
			if tc.name == "workspace" {
				env = append(env, "GOWORK="+filepath.Join(filepath.Dir(dir), filepath.Base(dir), "go.work"))
			}
			ge, err := readGoEnv(ctx, dir, env)
			if err != nil {
				t.Fatal(err)
			}
			patterns := tc.patterns
			if patterns == nil {
				patterns = []string{"./..."}
			}
			if patterns, err = workspacePatterns(ctx, dir, env, ge, patterns); err != nil {
				t.Fatal(err)
			}
			spec := loadSpec{dir: dir, env: env, patterns: patterns, tests: true}
			opts := Options{ToolVersion: "test", EnrichID: "e"}
			vcs := readVCS(ctx, dir, "")
			dbPath := filepath.Join(t.TempDir(), "g.db")
			listed, err := reuseKey(ctx, spec, ge, vcs, opts, nil, dbPath)
			if err != nil {
				t.Fatal(err)
			}
			res, err := load(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			loaded, ok, err := reuseKeyFromLoad(ctx, res, spec, ge, vcs, opts, nil, dbPath)
			if err != nil || !ok {
				t.Fatalf("reuseKeyFromLoad: ok %v, err %v", ok, err)
			}
			if len(listed.inputs.Files) < 2 {
				t.Fatalf("only %d files hashed: the comparison proves little", len(listed.inputs.Files))
			}
			for p, sum := range listed.inputs.Files {
				if loaded.inputs.Files[p] != sum {
					t.Errorf("file %s: listing %q, load %q", p, sum, loaded.inputs.Files[p])
				}
			}
			for p := range loaded.inputs.Files {
				if _, ok := listed.inputs.Files[p]; !ok {
					t.Errorf("file %s hashed from the load only", p)
				}
			}
			if listed.input != loaded.input || listed.config != loaded.config || listed.fs != loaded.fs {
				t.Errorf("keys differ: input %v, config %v, fs %v (packages %d vs %d, modules %q vs %q)",
					listed.input == loaded.input, listed.config == loaded.config, listed.fs == loaded.fs,
					len(listed.inputs.Packages), len(loaded.inputs.Packages), listed.inputs.Modules, loaded.inputs.Modules)
			}
		})
	}
}

// TestKeyFromLoadRefusesPlaceholders: when go/packages gives dependencies
// as placeholders (an ID only, as its documentation allows without
// NeedDeps), the keys are not taken from the load.
func TestKeyFromLoadRefusesPlaceholders(t *testing.T) {
	root := &packages.Package{ID: "example.com/a", Name: "a", PkgPath: "example.com/a", GoFiles: []string{"/nonexistent/a.go"},
		Imports: map[string]*packages.Package{"example.com/b": {ID: "example.com/b"}}}
	_, ok, err := reuseKeyFromLoad(context.Background(), &loadResult{all: []*packages.Package{root}}, loadSpec{dir: t.TempDir()}, goEnv{}, vcsState{}, Options{}, nil, filepath.Join(t.TempDir(), "g.db"))
	if err != nil || ok {
		t.Fatalf("reuseKeyFromLoad with a placeholder dependency: ok %v, err %v; want not ok", ok, err)
	}
}
