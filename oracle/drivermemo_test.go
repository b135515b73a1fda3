package oracle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDriverBuiltOnceOnlyForByteIdenticalInputs checks the per-process memo
// of Go driver binaries: the second Check of byte-identical artifact bytes
// reuses the first build (saying so in build.log) and still runs and passes;
// an artifact differing by one byte, or the same bytes under another file
// name, is built anew, and the one-byte change that makes Double wrong is
// caught. A memo keyed on less than the artifact's bytes would accept the
// wrong artifact with the correct one's driver.
func TestDriverBuiltOnceOnlyForByteIdenticalInputs(t *testing.T) {
	requireGo(t)
	nonce := make([]byte, 8)
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	correct := "package double\n\n// Double returns 2*x. " + t.Name() + " " + hex.EncodeToString(nonce) +
		"\nfunc Double[T ~int | ~float64](x T) T { return x + x }\n"
	wrong := strings.Replace(correct, "return x + x", "return x + 1", 1)
	check := func(name, file, src string) (Result, string) {
		t.Helper()
		dir := t.TempDir()
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		spec := DoubleSpec()
		spec.File = file
		res, err := Check(context.Background(), spec, path, Options{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		log, err := os.ReadFile(filepath.Join(res.WorkDir, goBuildLog))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res, string(log)
	}
	const reused = "go build not run"

	first, log := check("first", "double.go", correct)
	if first.Verdict != VerdictPassed || strings.Contains(log, reused) {
		t.Fatalf("first check: %s (%s), build.log %q; want passed, built", first.Verdict, first.Detail, log)
	}
	second, log := check("second", "double.go", correct)
	if second.Verdict != VerdictPassed || !strings.Contains(log, reused) || second.Checks != first.Checks {
		t.Fatalf("identical bytes: %s (%s) %d checks, build.log %q; want passed %d checks, the driver reused", second.Verdict, second.Detail, second.Checks, log, first.Checks)
	}
	if a, b := hashFile(filepath.Join(first.WorkDir, goDriverBinary)), hashFile(filepath.Join(second.WorkDir, goDriverBinary)); a == "" || a != b || !strings.Contains(log, a) {
		t.Fatalf("reused driver %s, built driver %s, build.log %q: want the same binary, named in the log", b, a, log)
	}
	bad, log := check("one byte differs", "double.go", wrong)
	if bad.Verdict != VerdictFailed || strings.Contains(log, reused) {
		t.Fatalf("one byte differs: %s (%s), build.log %q; want %s from a fresh build", bad.Verdict, bad.Detail, log, VerdictFailed)
	}
	renamed, log := check("another file name", "twice.go", correct)
	if renamed.Verdict != VerdictPassed || strings.Contains(log, reused) {
		t.Fatalf("same bytes as twice.go: %s (%s), build.log %q; want passed from a fresh build", renamed.Verdict, renamed.Detail, log)
	}
}

// TestDriverMemoIsBounded checks that the memo forgets its oldest binary
// beyond goDriverMemoSize and never remembers what it cannot key.
func TestDriverMemoIsBounded(t *testing.T) {
	m := &driverMemo{max: 2, bins: map[string]memoDriver{}}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", ""} {
		m.remember(k, bin)
	}
	for k, want := range map[string]bool{"a": false, "b": true, "c": true, "": false} {
		ok, err := m.reuse(k, filepath.Join(dir, "out-"+k), filepath.Join(dir, "log-"+k))
		if err != nil || ok != want {
			t.Errorf("reuse(%q) = %v, %v; want %v", k, ok, err, want)
		}
	}
}
