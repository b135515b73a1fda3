package atomicfile_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/internal/atomicfile"
)

func TestWriteReplacesContentAndSetsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.md")
	if err := os.WriteFile(path, []byte("old content, longer than the new one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(path, []byte("new\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "new\n" {
		t.Fatalf("content %q, want %q", got, "new\n")
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// 0666 survives any umask: the mode is the caller's, set exactly.
		if fi.Mode().Perm() != 0o666 {
			t.Fatalf("mode %v, want %v", fi.Mode().Perm(), fs.FileMode(0o666))
		}
	}
	assertOnly(t, filepath.Dir(path), "report.md")
}

func TestWriteCreatesAMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.json")
	if err := atomicfile.Write(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o444) {
		t.Fatalf("got size %d mode %v, want an empty file with mode 0444", fi.Size(), fi.Mode().Perm())
	}
}

func TestWriteErrorsNamePathAndLeaveNothing(t *testing.T) {
	dir := t.TempDir()
	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(dir, "no", "such", "file")
		err := atomicfile.Write(path, []byte("x"), 0o600)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != path || pe.Op != "write" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want a *fs.PathError for %s (write) that is fs.ErrNotExist", err, path)
		}
		if strings.Contains(err.Error(), ".tmp-") || err.Error() != "write "+path+": no such file or directory" {
			t.Fatalf("error %q names more than path and the cause (the temporary file is no one's concern)", err)
		}
	})
	t.Run("directory at path", func(t *testing.T) {
		path := filepath.Join(dir, "occupied")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "inside"), []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := atomicfile.Write(path, []byte("x"), 0o600)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != path || pe.Op != "rename" {
			t.Fatalf("err = %v, want a *fs.PathError for %s (rename)", err, path)
		}
		if strings.Contains(err.Error(), ".tmp-") {
			t.Fatalf("error %q names the temporary file, which is gone", err)
		}
		if b, err := os.ReadFile(filepath.Join(path, "inside")); err != nil || string(b) != "kept" {
			t.Fatalf("the directory at path was touched: %q, %v", b, err)
		}
		assertOnly(t, dir, "occupied")
	})
}

// A symbolic link at path is replaced by the file; what it pointed to is not written through it.
func TestWriteReplacesASymbolicLinkNotItsTarget(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("target"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target" {
		t.Fatalf("target written through the link: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("link not replaced by a regular file: %v, %v", fi, err)
	}
}

// Writers racing on one path each install a whole file, and a reader running alongside never
// sees anything but a whole file (the first or one of the writers').
func TestConcurrentWritersAndReaderSeeWholeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	whole := map[string]bool{}
	content := func(w, i int) []byte {
		// Lengths differ, so a mix of two contents or a truncated one is never whole.
		return bytes.Repeat([]byte(fmt.Sprintf("writer %d write %d;", w, i)), 200+w*50+i)
	}
	const writers, writes = 6, 15
	for w := range writers {
		for i := range writes {
			whole[string(content(w, i))] = true
		}
	}
	first := content(0, 0)
	if err := atomicfile.Write(path, first, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	readerDone := make(chan error)
	go func() {
		for reads := 0; ; reads++ {
			select {
			case <-stop:
				readerDone <- nil
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err != nil {
				readerDone <- fmt.Errorf("read %d: %w", reads, err)
				return
			}
			if !whole[string(b)] {
				readerDone <- fmt.Errorf("read %d saw %d bytes that no writer wrote whole", reads, len(b))
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, writers*writes)
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				if err := atomicfile.Write(path, content(w, i), 0o600); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !whole[string(b)] {
		t.Fatalf("final content is not one writer's whole file (%d bytes, %v)", len(b), err)
	}
	assertOnly(t, filepath.Dir(path), "state.json")
}

// helperEnv names the file the helper process rewrites until it is killed.
const helperEnv = "ATOMICFILE_TEST_REWRITE"

// crashContents are what the helper process alternates between: large enough that a kill lands
// in the middle of writing one more often than not.
func crashContents() [2][]byte {
	return [2][]byte{bytes.Repeat([]byte("A"), 4<<20), bytes.Repeat([]byte("Bb"), 3<<20)}
}

// TestHelperRewriteUntilKilled is not a test: run as a subprocess by
// TestKilledWriterLeavesAWholeFile, it rewrites the file named by helperEnv
// forever, printing a line after each Write returns.
func TestHelperRewriteUntilKilled(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	c := crashContents()
	for i := 0; ; i++ {
		if err := atomicfile.Write(path, c[i%2], 0o600); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", i)
	}
}

// A process killed at an arbitrary point of a Write — mid-write, between write and rename, after
// it — leaves the file with one whole content: the old one or one it wrote.
func TestKilledWriterLeavesAWholeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.json")
	old := []byte("the old content")
	c := crashContents()
	for round := range 12 {
		if err := atomicfile.Write(path, old, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRewriteUntilKilled$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a number of completed writes that varies by round (0: during the first).
		lines := bufio.NewScanner(out)
		for range round % 4 {
			if !lines.Scan() {
				break
			}
			if l := lines.Text(); !strings.HasPrefix(l, "wrote ") {
				t.Fatalf("helper: %s", l)
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !bytes.Equal(got, old) && !bytes.Equal(got, c[0]) && !bytes.Equal(got, c[1]) {
			t.Fatalf("round %d: after the kill the file holds %d bytes that are no whole content", round, len(got))
		}
	}
}

// assertOnly fails unless dir holds exactly the entries names (no temporary file left behind).
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}
