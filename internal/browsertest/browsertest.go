// Package browsertest loads a local HTML file in Debian's headless Chromium, driven through the
// Chrome DevTools Protocol by github.com/chromedp/chromedp, and reports what a reader's browser
// would complain about: console errors and warnings, uncaught JavaScript exceptions, and every
// network request the page made. A self-contained report makes none; data: URIs are not requests.
//
// It exists for tests of assay's HTML reports. Require decides whether a test without Chromium
// skips or fails (ASSAY_REQUIRE_TOOLS).
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ErrUnavailable is wrapped by Available and Load when no Chromium executable is found.
var ErrUnavailable = errors.New("chromium is not installed")

// RequireEnv names the environment variable that turns a missing Chromium from a skipped test
// into a failed one (.ci/run sets it, so CI never passes by skipping).
const RequireEnv = "ASSAY_REQUIRE_TOOLS"

// PathEnv names the environment variable that, when set, is the only Chromium executable tried
// (a path or a name on PATH), for machines whose browser is installed elsewhere.
const PathEnv = "ASSAY_CHROMIUM"

// candidates are the executable names tried in order: Debian's package installs /usr/bin/chromium.
var candidates = []string{"chromium", "chromium-browser", "/usr/bin/chromium"}

// Available returns the path of the Chromium executable (ASSAY_CHROMIUM when set, else the first
// of chromium, chromium-browser, /usr/bin/chromium found), or an error wrapping ErrUnavailable
// that names the fix.
func Available() (string, error) {
	names := candidates
	if p, ok := os.LookupEnv(PathEnv); ok {
		names = []string{p}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked for %s); install it with: apt-get install -y chromium, or name it in %s",
		ErrUnavailable, strings.Join(names, ", "), PathEnv)
}

// Require returns Chromium's path for a test. Without Chromium it skips the test, or fails it when
// the environment variable ASSAY_REQUIRE_TOOLS is set to anything.
func Require(t testing.TB) string {
	t.Helper()
	p, err := Available()
	if err == nil {
		return p
	}
	if _, required := os.LookupEnv(RequireEnv); required {
		t.Fatalf("%v (%s is set: the tool is required)", err, RequireEnv)
	}
	t.Skipf("%v (set %s to fail instead of skipping)", err, RequireEnv)
	return ""
}

// Message is one console message: a console API call (console.error, console.warn), an uncaught
// exception or unhandled rejection, or an entry of the browser's own log (a resource that failed
// to load, a blocked request).
type Message struct {
	// Level is "error", "warning" or, for an uncaught exception, "exception".
	Level string `json:"level"`
	// Source is "console-api", "exception", or the browser log's source ("network", "security", ...).
	Source string `json:"source"`
	Text   string `json:"text"`
	// URL and Line (1-based; 0 when unknown) say where the message came from.
	URL  string `json:"url,omitempty"`
	Line int64  `json:"line,omitempty"`
}

func (m Message) String() string {
	s := m.Level + " [" + m.Source + "] " + m.Text
	if m.URL != "" {
		s += fmt.Sprintf(" (%s:%d)", m.URL, m.Line)
	}
	return s
}

// Result is what loading a page produced.
type Result struct {
	// URL is the file:// URL the page was loaded from.
	URL string `json:"url"`
	// Console holds the errors and warnings in arrival order, exceptions included.
	Console []Message `json:"console"`
	// Exceptions holds the uncaught exceptions and unhandled promise rejections alone.
	Exceptions []Message `json:"exceptions"`
	// Requests holds the URL of every request the page made other than for the page itself
	// and data: URIs, in the order the browser sent them.
	Requests []string `json:"requests"`
	// Screenshot is the path of the full-page PNG written, or "" when none was asked for.
	Screenshot string `json:"screenshot,omitempty"`
}

// Clean reports whether the page made no request and logged no error, warning or exception.
func (r Result) Clean() bool { return len(r.Console) == 0 && len(r.Requests) == 0 }

// Page is a loaded page. Its methods are not safe for concurrent use; Close releases the
// browser, and must be called.
type Page struct {
	ctx    context.Context // the tab's chromedp context
	cancel func()
	self   string

	mu     sync.Mutex
	result Result
}

// Open loads the HTML file at path, waits for its load event, writes a full-page PNG screenshot
// to screenshotPath (none when it is ""), and returns what the page logged and requested.
// Errors: ErrUnavailable (wrapped) without Chromium; the browser's or the file system's errors,
// naming path.
func Open(ctx context.Context, path, screenshotPath string) (Result, error) {
	p, err := Load(ctx, path)
	if err != nil {
		return Result{}, err
	}
	defer p.Close()
	return p.Finish(screenshotPath)
}

// Load starts a headless Chromium (no sandbox: CI runs as root; no GPU; no first-run or default
// browser prompts; a 1280x900 window) and loads the HTML file at path, waiting for its load event.
// The caller queries the page (Eval, Print) and then calls Finish and Close.
func Load(ctx context.Context, path string) (*Page, error) {
	exe, err := Available()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("browsertest: %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("browsertest: %w", err)
	}
	self := (&url.URL{Scheme: "file", Path: abs}).String()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	p := &Page{self: self, result: Result{URL: self}}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(p.observe))
	p.ctx = tabCtx
	p.cancel = func() { cancelTab(); cancelAlloc() }
	if err := chromedp.Do(tabCtx, chromedp.Navigate(self)); err != nil {
		p.Close()
		return nil, fmt.Errorf("browsertest: load %s: %w", self, err)
	}
	return p, nil
}

// observe runs in the tab's read loop, in arrival order; it must return fast and send nothing.
func (p *Page) observe(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		level := string(ev.Type)
		if level != "error" && level != "warning" && level != "assert" {
			return
		}
		m := Message{Level: level, Source: "console-api", Text: argsText(ev.Args)}
		if st := ev.StackTrace; st != nil && len(st.CallFrames) > 0 {
			m.URL, m.Line = st.CallFrames[0].URL, st.CallFrames[0].LineNumber+1
		}
		p.result.Console = append(p.result.Console, m)
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		m := Message{Level: "exception", Source: "exception", Text: text, URL: d.URL, Line: d.LineNumber + 1}
		p.result.Console = append(p.result.Console, m)
		p.result.Exceptions = append(p.result.Exceptions, m)
	case *log.EventEntryAdded:
		e := ev.Entry
		if e.Level != log.EntryLevelError && e.Level != log.EntryLevelWarning {
			return
		}
		m := Message{Level: string(e.Level), Source: string(e.Source), Text: e.Text, URL: e.URL}
		if e.LineNumber > 0 {
			m.Line = e.LineNumber + 1
		}
		p.result.Console = append(p.result.Console, m)
	case *network.EventRequestWillBeSent:
		u := ev.Request.URL
		if u == p.self || strings.HasPrefix(u, "data:") {
			return
		}
		p.result.Requests = append(p.result.Requests, u)
	}
}

func argsText(args []*runtime.RemoteObject) string {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		switch {
		case a.Value != nil:
			var s string
			if err := json.Unmarshal(a.Value, &s); err != nil {
				s = string(a.Value) // a number, a boolean, a JSON object
			}
			parts = append(parts, s)
		case a.Description != "":
			parts = append(parts, a.Description)
		default:
			parts = append(parts, string(a.Type))
		}
	}
	return strings.Join(parts, " ")
}

// Eval evaluates the JavaScript expression in the page and decodes its JSON value into T.
// Errors: the browser's, and chromedp.ExceptionError when the expression throws.
func Eval[T any](p *Page, expr string) (T, error) {
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		var zero T
		return zero, fmt.Errorf("browsertest: eval %q: %w", expr, err)
	}
	return v, nil
}

// Print switches the page to print media (CSS @media print applies), or back to screen when
// on is false, so a screenshot shows what a printed report looks like.
func (p *Page) Print(on bool) error {
	media := "screen"
	if on {
		media = "print"
	}
	if _, err := chromedp.Call(p.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: media}); err != nil {
		return fmt.Errorf("browsertest: emulate %s media: %w", media, err)
	}
	return nil
}

// Screenshot writes a full-page PNG of the page as it is now to path.
func (p *Page) Screenshot(path string) error {
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("browsertest: screenshot of %s: %w", p.self, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("browsertest: %w", err)
	}
	return nil
}

// Finish writes the screenshot (when screenshotPath is not "") and returns what the page logged
// and requested up to now. Every event the browser sent before the reply to a final round trip
// has been seen, because the listener runs in the tab's read loop in arrival order.
func (p *Page) Finish(screenshotPath string) (Result, error) {
	if screenshotPath != "" {
		if err := p.Screenshot(screenshotPath); err != nil {
			return Result{}, err
		}
	}
	// A round trip: its reply arrives after every event the page caused before it.
	if _, err := Eval[string](p, `document.readyState`); err != nil {
		return Result{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.result
	r.Screenshot = screenshotPath
	r.Console = append([]Message(nil), r.Console...)
	r.Exceptions = append([]Message(nil), r.Exceptions...)
	r.Requests = append([]string(nil), r.Requests...)
	return r, nil
}

// Close stops the browser and waits for it to exit.
func (p *Page) Close() {
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}
