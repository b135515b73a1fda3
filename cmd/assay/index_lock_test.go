package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/indexer"
)

// TestConcurrentIndexProcessesTakeTurns: two `assay index` processes started
// together on one tree and one --out both exit 0; the one that gets the
// lock second waits, then reuses the first one's snapshot, and the SHA-256
// each prints is the file's. Without the lock both would index and write.
func TestConcurrentIndexProcessesTakeTurns(t *testing.T) {
	t.Parallel()
	mod := t.TempDir()
	for name, content := range map[string]string{
		"go.mod": "module example.com/turns\n\ngo 1.22\n",
		"a/a.go": "package a\n\nfunc A() int { return 1 }\n",
		"b/b.go": "package b\n\nimport \"example.com/turns/a\"\n\nfunc B() int { return a.A() + 1 }\n",
	} {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	args, err := json.Marshal([]string{"index", "--out", out, "--format", "json", mod})
	if err != nil {
		t.Fatal(err)
	}
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
	}
	var procs [2]*proc
	for i := range procs {
		p := &proc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), "ASSAY_TEST_CLI="+string(args), "GOPROXY=off")
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	var snaps [2]indexer.Snapshot
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("index process %d: %v\nstderr: %s", i, err, p.stderr.String())
		}
		if err := json.Unmarshal(p.stdout.Bytes(), &snaps[i]); err != nil {
			t.Fatalf("index process %d: %v: %q", i, err, p.stdout.String())
		}
	}
	sum := fileDigest(t, filepath.Join(out, "graph.db"))
	reused := 0
	for i, s := range snaps {
		if s.DBSHA256 != sum {
			t.Errorf("process %d printed sha256 %s, the file's is %s", i, s.DBSHA256, sum)
		}
		if s.Reused {
			reused++
			if !strings.Contains(procs[i].stderr.String(), "nothing changed since the last index") {
				t.Errorf("process %d reused without saying so: %q", i, procs[i].stderr.String())
			}
		}
	}
	if reused != 1 || snaps[0].ID != snaps[1].ID {
		t.Errorf("%d of the 2 runs reused the database (snapshots %s, %s); want the second to reuse the first's",
			reused, snaps[0].ID, snaps[1].ID)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%d entries in --out after both runs, want graph.db and its SHA-256 record", len(entries))
	}
}

// TestIndexHelpNamesTheLock: --help says that runs of one database take
// turns, and the reference it points to what the lock file is.
func TestIndexHelpNamesTheLock(t *testing.T) {
	r := runCLI(t, "index", "--help")
	if r.code != 0 {
		t.Fatalf("index --help: exit %d", r.code)
	}
	for _, want := range []string{"runs writing one database take turns through a lock beside it", "docs/cli.md"} {
		if !strings.Contains(oneSpaced(r.stdout), want) {
			t.Errorf("index --help does not say %q", want)
		}
	}
	ref := oneSpaced(cliReference(t, "## assay index"))
	for _, want := range []string{"`<db>-lock`", "a second run waits for it", "whether it exists means nothing"} {
		if !strings.Contains(ref, want) {
			t.Errorf("docs/cli.md, assay index, does not say %q", want)
		}
	}
}

// TestIndexProgressSaysWaitingEverywhere: off a terminal the stages are
// quiet, but waiting for another index of the database is printed.
func TestIndexProgressSaysWaitingEverywhere(t *testing.T) {
	t.Parallel()
	for _, tty := range []bool{false, true} {
		var b bytes.Buffer
		p := indexProgress(&b, tty)
		p("loading and type-checking packages")
		p("waiting for another index of /x/graph.db to finish (pid 7)")
		got := b.String()
		if !strings.Contains(got, "assay: waiting for another index of /x/graph.db") {
			t.Errorf("tty=%v: waiting not printed: %q", tty, got)
		}
		if strings.Contains(got, "loading") != tty {
			t.Errorf("tty=%v: stage printed=%v: %q", tty, !tty, got)
		}
	}
}
