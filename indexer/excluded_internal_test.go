package indexer

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkGoFileDirs times the directory walk findExcluded adds to every
// index of a "..." pattern, over this repository.
func BenchmarkGoFileDirs(b *testing.B) {
	root, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := goFileDirs(root); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGoFileDirsSkipsWhatTheGoCommandNeverMatches: testdata, vendor, "."
// and "_" directories and nested modules are not package directories of
// the module; a directory with only non-.go files is none either.
func TestGoFileDirsSkipsWhatTheGoCommandNeverMatches(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"go.mod", "a/a.go", "a/b/b.go", "a/testdata/t.go", "vendor/v/v.go", ".git/g.go",
		"_x/x.go", "n/go.mod", "n/n.go", "c/readme.txt", "a/_skip.go"} {
		writeFile(t, filepath.Join(root, f))
	}
	got, err := goFileDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("goFileDirs = %v, want %v", got, want)
	}
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
