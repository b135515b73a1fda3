package digest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/digest"
)

func TestFileDigestsContent(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: read in a stream
	bigSum := sha256.Sum256(big)
	for _, tc := range []struct {
		name    string
		content []byte
		want    string
	}{
		// FIPS 180-4 test vectors (NIST CSRC examples).
		{"empty", nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", []byte("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"large", big, hex.EncodeToString(bigSum[:])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := digest.File(path)
			if err != nil || got != tc.want {
				t.Fatalf("File = %q, %v; want %q", got, err, tc.want)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			if got, err := digest.FileIn(root, tc.name); err != nil || got != tc.want {
				t.Fatalf("FileIn = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFileFollowsASymbolicLinkToARegularFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := digest.File(filepath.Join(dir, "link"))
	if err != nil || got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("File(link) = %q, %v", got, err)
	}
}

// Nothing but a regular file is read: a FIFO without a writer, a device that never ends (reached
// through a link) and a directory are refused at once, with ErrNotRegular and the path.
func TestFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{"dir": "a directory"}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "linux" {
		if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
			t.Fatal(err)
		}
		cases["fifo"] = "a FIFO"
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero")); err != nil {
			t.Fatal(err)
		}
		cases["zero"] = "a device"
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for name, what := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			for call, f := range map[string]func() (string, error){
				"File":   func() (string, error) { return digest.File(path) },
				"FileIn": func() (string, error) { return digest.FileIn(root, name) },
			} {
				if call == "FileIn" && name == "zero" {
					continue // the link leaves root: TestFileInStaysInsideRoot
				}
				got, err := withDeadline(t, f)
				var pe *fs.PathError
				if got != "" || !errors.Is(err, digest.ErrNotRegular) || !errors.As(err, &pe) || !strings.Contains(err.Error(), what) {
					t.Fatalf("%s = %q, %v; want an error naming %s that wraps ErrNotRegular", call, got, err, what)
				}
				if call == "File" && pe.Path != path {
					t.Fatalf("%s error names %q, want %q", call, pe.Path, path)
				}
			}
		})
	}
}

func TestFileOfAMissingPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing")
	got, err := digest.File(path)
	if got != "" || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("File = %q, %v; want fs.ErrNotExist naming %s", got, err, path)
	}
}

func TestFileInStaysInsideRoot(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(outside, "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, name := range []string{"../secret", "escape"} {
		if got, err := digest.FileIn(root, name); err == nil || got != "" {
			t.Fatalf("FileIn(%q) = %q, %v; want a refusal (the file is outside root)", name, got, err)
		}
	}
}

// Concurrent digests of the same and of different files agree with a digest taken alone.
func TestFileConcurrentUse(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{}
	for i := range 4 {
		b := bytes.Repeat([]byte{byte('a' + i)}, 100_000*(i+1))
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		want[p] = hex.EncodeToString(s[:])
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for range 16 {
		for p, w := range want {
			wg.Go(func() {
				if got, err := digest.File(p); err != nil || got != w {
					errs <- p + ": " + got
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// withDeadline runs f, failing the test if it has not returned within a minute: a digest that
// reads a FIFO or a device would never return.
func withDeadline(t *testing.T, f func() (string, error)) (string, error) {
	t.Helper()
	type result struct {
		s   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := f()
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-time.After(time.Minute):
		t.Fatal("the digest did not return: it reads what it should have refused")
		return "", nil
	}
}
