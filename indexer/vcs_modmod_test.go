package indexer_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestVCSDirtyAfterGoCommandWrites: with -mod=mod in GOFLAGS (plain, or
// quoted as the go command allows: '-mod=mod', "-mod=mod") the go command
// rewrites a go.mod that lacks its go line while the packages load; the
// snapshot of a checkout that was clean before the index must then say
// dirty (the tree indexed is not the commit), and say clean when the go
// command had nothing to write.
func TestVCSDirtyAfterGoCommandWrites(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not on PATH")
	}
	for _, c := range []struct {
		goflags     string
		lacksGoLine bool
	}{
		{"-mod=mod", true},
		{"-mod=mod", false},
		{`'-mod=mod'`, true},
		{`-tags=x "-mod=mod"`, true},
	} {
		dir := t.TempDir()
		mod := "module example.com/vm\n"
		if !c.lacksGoLine {
			mod += "\ngo 1.21\n"
		}
		writeFiles(t, dir, map[string]string{"go.mod": mod, "vm.go": "package vm\n\nfunc F() int { return 1 }\n"})
		for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "fixture"}} {
			cmd := exec.Command(git, append([]string{"-C", dir, "-c", "user.name=assay", "-c", "user.email=assay@example.com"}, args...)...)
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		snap := index(t, indexer.Options{Dir: dir, DBPath: filepath.Join(t.TempDir(), "g.db"), Env: []string{"GOFLAGS=" + c.goflags}})
		data, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		rewritten := strings.Contains(string(data), "\ngo ") && c.lacksGoLine
		if c.lacksGoLine && !rewritten {
			t.Fatalf("GOFLAGS=%s: the go command did not add a go line (go.mod %q): the test no longer sets up what it checks", c.goflags, data)
		}
		if snap.VCSRevision == "" || snap.VCSDirty != rewritten {
			t.Errorf("GOFLAGS=%s, go.mod lacking its go line %v (rewritten %v): revision %q dirty %v, want dirty %v",
				c.goflags, c.lacksGoLine, rewritten, snap.VCSRevision, snap.VCSDirty, rewritten)
		}
	}
}
