package metrics

import (
	"context"
	"go/token"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestPanicsAreErrors: a defect met while measuring a file (here a syntax
// tree that is nil) is an error of the computation naming the file, on
// every number of workers, not a crash of the process; protect reports
// what a function panicked with and nothing when it returns.
func TestPanicsAreErrors(t *testing.T) {
	if msg := protect(func() {}); msg != "" {
		t.Fatalf("protect of a function that returns: %q", msg)
	}
	if msg := protect(func() { panic("boom") }); msg != "boom" {
		t.Fatalf("protect of a panic: %q, want boom", msg)
	}
	for _, workers := range []int{1, 2, 8} {
		in := &Input{
			Nodes: map[string]*Node{
				"func:p.F": {ID: "func:p.F", Kind: "func", FileID: "file:p:p.go", StartLine: 3, StartCol: 1},
			},
			Files:   map[string]*File{"file:p:p.go": {ID: "file:p:p.go", Path: "/src/p/p.go"}},
			syntax:  map[string]indexer.SourceSyntax{"/src/p/p.go": {Fset: token.NewFileSet(), File: nil}},
			workers: workers,
		}
		_, err := computeInput(context.Background(), in)
		if err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), "/src/p/p.go") {
			t.Fatalf("workers=%d: err = %v, want an internal error naming the file", workers, err)
		}
	}
}
