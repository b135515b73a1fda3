package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// Flags that would do nothing, or do the wrong thing, are refused before anything is written: exit
// 2, one line naming the problem, the store and the files named unchanged (adversarial review).
func TestMisusedTrustFlagsAreRefusedWritingNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := storeWithRuns(t, dir, "run-a")
	keys := t.TempDir()
	if r := runCLI(t, "keygen", "--out", filepath.Join(keys, "a.key")); r.code != 0 {
		t.Fatalf("keygen: %d %s", r.code, r.stderr)
	}
	notes := filepath.Join(keys, "notes.txt")
	if err := os.WriteFile(notes, []byte("not a manifest\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(keys, "a.key.pub")
	sum := func(p string) [32]byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b)
	}
	before, notesBefore := sum(store), sum(notes)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "--store", store, "--manifest", keys}, "is not a regular file"},
		{[]string{"verify", "--store", store, "--manifest", notes, "--write"}, "exists and is not a manifest; nothing overwritten"},
		{[]string{"verify", "--store", store, "--attestations", notes, "--pubkey", pub}, "no attestations directory"},
		{[]string{"verify", "--store", store, "--pubkey", pub}, "--pubkey checks signatures of a manifest being checked or of attestations"},
		{[]string{"matrix", "run", "--out", filepath.Join(dir, "o"), "--attestations", filepath.Join(dir, "att")}, "add --sign-key KEY"},
		{[]string{"matrix", "run", "--out", filepath.Join(dir, "o"), "--model-alias", "a=b", "--model-alias", "a=c"}, "a is given twice (b and c)"},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", c.args, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
	}
	if sum(store) != before || sum(notes) != notesBefore {
		t.Error("a refused command changed the store or the file it named")
	}
	if _, err := os.Stat(filepath.Join(dir, "o")); !os.IsNotExist(err) {
		t.Errorf("a refused matrix run created its output directory (%v)", err)
	}
}
