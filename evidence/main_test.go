package evidence

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/assay-audit/assay/internal/testroot"
)

// fixtureRoot holds the fixtures shared by the tests of this binary (finalizedRunCopy's templates);
// TestMain removes it after the tests.
var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "evidence-test-", &fixtureRoot))
}

// storeTemplates are the stores storeCopy wrote, by key.
var storeTemplates sync.Map // key -> *storeTemplate

type storeTemplate struct {
	once sync.Once
	path string // the template's evidence.duckdb, in a directory (assay-out) holding its artifacts too
	err  string
}

// storeCopy returns the path of a copy, in a directory of t's own, of the store build writes at the
// path it is given: written once per key per test binary, then copied whole (the store file and
// its artifacts), so that tests that each change a store need not each write one.
func storeCopy(t *testing.T, key string, build func(t *testing.T, path string)) string {
	t.Helper()
	v, _ := storeTemplates.LoadOrStore(key, &storeTemplate{})
	tpl := v.(*storeTemplate)
	tpl.once.Do(func() {
		tpl.err = "writing the store " + key + " failed in " + t.Name()
		dir, err := os.MkdirTemp(fixtureRoot, "store-")
		if err != nil {
			t.Fatal(err)
		}
		tpl.path = filepath.Join(dir, "assay-out", "evidence.duckdb")
		build(t, tpl.path)
		tpl.err = ""
	})
	if tpl.err != "" {
		t.Fatal(tpl.err)
	}
	dst := filepath.Join(t.TempDir(), "assay-out")
	if err := os.CopyFS(dst, os.DirFS(filepath.Dir(tpl.path))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "evidence.duckdb")
}
