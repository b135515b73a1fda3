package reports

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/browsertest"
)

// inChromium writes page to a temp dir as name+".html" and loads it in headless Chromium (the
// test skips or fails without it, see browsertest.Require); the page closes with the test.
func inChromium(t *testing.T, page []byte, name string) (*browsertest.Page, string) {
	t.Helper()
	browsertest.Require(t)
	dir := t.TempDir()
	path := filepath.Join(dir, name+".html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	p, err := browsertest.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, dir
}

// screenAndPrint screenshots the page on screen and in print media (name-screen.png,
// name-print.png under dir), runs printed (assertions about the print layout) in between, and
// fails the test when the page logged an error or warning or made any request. With
// ASSAY_KEEP_SCREENSHOTS=DIR the page and both screenshots are copied to DIR to be looked at.
func screenAndPrint(t *testing.T, p *browsertest.Page, dir, name string, printed func()) {
	t.Helper()
	if err := p.Screenshot(filepath.Join(dir, name+"-screen.png")); err != nil {
		t.Fatal(err)
	}
	if err := p.Print(true); err != nil {
		t.Fatal(err)
	}
	printed()
	res, err := p.Finish(filepath.Join(dir, name+"-print.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() {
		t.Errorf("the page is not self-contained or logs problems: console %v, requests %v", res.Console, res.Requests)
	}
	if keep := os.Getenv("ASSAY_KEEP_SCREENSHOTS"); keep != "" {
		for _, f := range []string{name + ".html", name + "-screen.png", name + "-print.png"} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				_ = os.WriteFile(filepath.Join(keep, f), b, 0o644)
			}
		}
	}
}
