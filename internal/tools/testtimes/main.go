// Command testtimes reads `go test -json` events (test2json's format, cmd/test2json) on standard
// input and prints what a reader of the plain `go test` needs: each package's result line, the
// output of every test that failed, build failures, and then the ten slowest tests by their
// reported elapsed time, and the slowest packages. It exits 1 when any package or test failed or
// the input held no package result, so that a pipeline with pipefail keeps go test's verdict.
//
//	go test -timeout 60m -json ./... | go run ./internal/tools/testtimes
//
// (Not GOFLAGS=-json: that reaches every go command the tests start, and go list refuses it.)
//
// Elapsed times are wall time on the machine that ran the tests, in seconds; parallel tests
// overlap, so they do not add up to the package's time.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one test2json event.
type event struct {
	Action     string  `json:"Action"`
	Package    string  `json:"Package"`
	ImportPath string  `json:"ImportPath"` // build events
	Test       string  `json:"Test"`
	Elapsed    float64 `json:"Elapsed"` // seconds, on pass/fail/skip
	Output     string  `json:"Output"`
}

// timing is one test's or package's elapsed seconds.
type timing struct {
	name    string
	seconds float64
}

func main() {
	os.Exit(summarize(os.Stdin, os.Stdout, 10))
}

// summarize reads events from in, prints to out and returns the exit status.
func summarize(in io.Reader, out io.Writer, top int) int {
	outputs := map[string][]string{} // package + "\x00" + test -> its output lines
	var tests, packages []timing
	failed, results := false, 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (the go command's own messages): pass it through.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test != "" {
				outputs[key] = append(outputs[key], e.Output)
			} else if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
				strings.HasPrefix(e.Output, "?") || strings.HasPrefix(e.Output, "panic") {
				fmt.Fprint(out, e.Output)
			} else {
				outputs[key] = append(outputs[key], e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				results++
				packages = append(packages, timing{e.Package, e.Elapsed})
				if e.Action == "fail" {
					failed = true
					// A package that failed outside any test (a panic, a timeout) shows its own output.
					fmt.Fprint(out, strings.Join(outputs[key], ""))
				}
				delete(outputs, key)
				continue
			}
			if e.Action == "fail" {
				failed = true
				fmt.Fprintf(out, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(outputs[key], ""))
			}
			if !strings.Contains(e.Test, "/") {
				tests = append(tests, timing{short(e.Package) + " " + e.Test, e.Elapsed})
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testtimes: reading go test -json:", err)
		return 1
	}
	printSlowest(out, "slowest tests", tests, top)
	printSlowest(out, "slowest packages", packages, 5)
	if results == 0 {
		fmt.Fprintln(out, "testtimes: no package result in the input")
		return 1
	}
	if failed {
		return 1
	}
	return 0
}

func printSlowest(out io.Writer, what string, ts []timing, n int) {
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].seconds > ts[j].seconds })
	if len(ts) > n {
		ts = ts[:n]
	}
	fmt.Fprintf(out, "== %d %s (wall seconds)\n", len(ts), what)
	for _, t := range ts {
		fmt.Fprintf(out, "%8.1f  %s\n", t.seconds, t.name)
	}
}

// short drops the module path from a package path.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/assay-audit/assay/")
}
