package harness

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/assay-audit/assay/internal/testroot"
)

// fixtureRoot holds the matrix runs several tests read (sharedRun), made once per test binary.
var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "assay-harness-fixtures-*", &fixtureRoot))
}

type sharedFixture struct {
	once sync.Once
	out  string
	sum  Summary
	err  error
}

var (
	sharedMu   sync.Mutex
	sharedRuns = map[string]*sharedFixture{}
)

// sharedRun runs the matrix with opts once per test binary under name (tests asking for one name
// must ask with the same opts; OutDir is set here) and returns its summary and a copy of its output
// directory for the calling test alone, which may write into it (resume, edit the databases).
func sharedRun(t *testing.T, name string, opts Options) (Summary, string) {
	t.Helper()
	sharedMu.Lock()
	f, ok := sharedRuns[name]
	if !ok {
		f = &sharedFixture{out: filepath.Join(fixtureRoot, name)}
		sharedRuns[name] = f
	}
	sharedMu.Unlock()
	f.once.Do(func() {
		opts.OutDir = f.out
		f.sum, f.err = Run(t.Context(), opts)
	})
	if f.err != nil {
		t.Fatalf("fixture %s: %v", name, f.err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := testroot.CopyTree(f.out, out); err != nil {
		t.Fatal(err)
	}
	return f.sum, out
}
