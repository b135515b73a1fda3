package browsertest_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/browsertest"
)

func writePage(t *testing.T, html string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A page with a deliberate console error, an uncaught exception and a request to another origin:
// every one of them must be reported, and the external server must have seen the request.
func TestOpenReportsConsoleErrorsExceptionsAndRequests(t *testing.T) {
	browsertest.Require(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a")) // not a valid image: the browser may log that too
	}))
	defer srv.Close()
	page := writePage(t, `<!doctype html><html><head><title>dirty</title></head><body>
<p>hello</p>
<img src="`+srv.URL+`/pixel.gif" alt="external">
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="inline">
<script>console.error("deliberate failure", 42); console.warn("careful"); console.log("fine");</script>
<script>throw new Error("boom");</script>
</body></html>`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	shot := filepath.Join(t.TempDir(), "dirty.png")
	res, err := browsertest.Open(ctx, page, shot)
	if err != nil {
		t.Fatal(err)
	}
	if res.Clean() {
		t.Fatalf("a page with a console error and an external request reported clean: %+v", res)
	}
	var sawError, sawWarning bool
	for _, m := range res.Console {
		if m.Source == "console-api" && m.Level == "error" && strings.Contains(m.Text, "deliberate failure 42") {
			sawError = true
		}
		if m.Source == "console-api" && m.Level == "warning" && m.Text == "careful" {
			sawWarning = true
		}
		if strings.Contains(m.Text, "fine") {
			t.Errorf("console.log reported as a problem: %v", m)
		}
	}
	if !sawError || !sawWarning {
		t.Errorf("console error seen %v, warning seen %v; console: %v", sawError, sawWarning, res.Console)
	}
	if len(res.Exceptions) != 1 || !strings.Contains(res.Exceptions[0].Text, "boom") {
		t.Errorf("exceptions = %v, want the one uncaught Error(boom)", res.Exceptions)
	}
	if len(res.Requests) != 1 || res.Requests[0] != srv.URL+"/pixel.gif" {
		t.Errorf("requests = %v, want exactly [%s/pixel.gif] (the data: URI and the page itself are not requests)", res.Requests, srv.URL)
	}
	if hits.Load() == 0 {
		t.Errorf("the external server saw no request: the page did not load its image")
	}
	checkPNG(t, shot)
}

func TestOpenCleanPage(t *testing.T) {
	browsertest.Require(t)
	page := writePage(t, `<!doctype html><html><head><title>clean</title>
<style>body{font-family:sans-serif} @media print { .screen-only { display:none } }</style></head>
<body><h1>Clean</h1><p class="screen-only">screen</p>
<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="40" fill="teal"/></svg>
</body></html>`)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := browsertest.Load(ctx, page)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n, err := browsertest.Eval[int](p, `document.querySelectorAll("svg rect").length`)
	if err != nil || n != 1 {
		t.Errorf("svg rect count = %d, %v; want 1", n, err)
	}
	visible := func() bool {
		v, err := browsertest.Eval[bool](p, `getComputedStyle(document.querySelector(".screen-only")).display !== "none"`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !visible() {
		t.Errorf("screen-only paragraph hidden on screen")
	}
	if err := p.Print(true); err != nil {
		t.Fatal(err)
	}
	if visible() {
		t.Errorf("screen-only paragraph visible in print media: Print did not apply @media print")
	}
	res, err := p.Finish("")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean() {
		t.Errorf("clean page reported problems: console %v, requests %v", res.Console, res.Requests)
	}
}

func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", path, err)
	}
	if r := img.Bounds(); r.Dx() < 100 || r.Dy() < 100 {
		t.Errorf("screenshot is %dx%d, too small", r.Dx(), r.Dy())
	}
}

// fakeTB records what Require asked of the test instead of stopping it.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
func (f *fakeTB) Logf(string, ...any)   {}
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }

// Without Chromium a test skips, unless ASSAY_REQUIRE_TOOLS is set: then it fails, so CI cannot
// pass by skipping the browser tests.
func TestRequireWithoutChromium(t *testing.T) {
	t.Setenv(browsertest.PathEnv, filepath.Join(t.TempDir(), "no-chromium-here"))
	if _, err := browsertest.Available(); !errors.Is(err, browsertest.ErrUnavailable) {
		t.Fatalf("Available with a missing executable: %v, want ErrUnavailable", err)
	}
	t.Setenv(browsertest.RequireEnv, "") // restores the caller's value when the test ends
	os.Unsetenv(browsertest.RequireEnv)
	f := &fakeTB{TB: t}
	browsertest.Require(f)
	if !f.skipped || f.failed {
		t.Errorf("without %s: skipped %v, failed %v; want a skip", browsertest.RequireEnv, f.skipped, f.failed)
	}
	t.Setenv(browsertest.RequireEnv, "1")
	f = &fakeTB{TB: t}
	browsertest.Require(f)
	if !f.failed {
		t.Errorf("with %s set: the test was not failed", browsertest.RequireEnv)
	}
}
