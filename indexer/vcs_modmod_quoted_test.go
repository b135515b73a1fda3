package indexer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestVCSDirtyAfterGoCommandWritesQuotedFlag: the go command splits
// GOFLAGS allowing quotes around an element ('-mod=mod', "-mod=mod"), so
// a quoted -mod=mod lets it rewrite go.mod too; the snapshot of a checkout
// that was clean before must then say dirty.
func TestVCSDirtyAfterGoCommandWritesQuotedFlag(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not on PATH")
	}
	for _, goflags := range []string{`'-mod=mod'`, `-tags=x "-mod=mod"`} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"go.mod": "module example.com/vm\n", "vm.go": "package vm\n\nfunc F() int { return 1 }\n"})
		for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "fixture"}} {
			cmd := exec.Command(git, append([]string{"-C", dir, "-c", "user.name=assay", "-c", "user.email=assay@example.com"}, args...)...)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		snap := index(t, indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "g.db"), Env: []string{"GOFLAGS=" + goflags}})
		data, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		if !strings.Contains(string(data), "\ngo ") {
			t.Fatalf("GOFLAGS=%s: the go command did not add a go line (go.mod %q): the test no longer sets up what it checks", goflags, data)
		}
		if snap.VCSRevision == "" || !snap.VCSDirty {
			t.Errorf("GOFLAGS=%s, go.mod rewritten: revision %q dirty %v, want dirty", goflags, snap.VCSRevision, snap.VCSDirty)
		}
	}
}
