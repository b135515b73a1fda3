package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness"
)

// `assay matrix run --format json` with stderr on a real pseudo-terminal: --progress auto draws the
// bar there (each running case's phase, the ETA, unknown until the case finished) and ends with the
// summary; stdout holds the JSON object and nothing else, its totals the summary's figures.
func TestMatrixRunOnATerminalShowsPhasesETAAndSummaryAndKeepsStdoutJSON(t *testing.T) {
	t.Parallel()
	// The shared sequential case is this run: runMatrixRun with stderr on a pseudo-terminal.
	c := sequentialCaseRun(t)
	if c.noPTY != nil {
		t.Skipf("no pseudo-terminal on this machine: %v", c.noPTY)
	}
	shown, out, language := c.screen, c.out, c.language
	stdout := bytes.NewBufferString(c.stdout)

	var sum summaryJSON
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	if err := dec.Decode(&sum); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%q", err, stdout.String())
	}
	if dec.More() || strings.ContainsAny(stdout.String(), "\r\x1b") || strings.Contains(stdout.String(), "eta ") {
		t.Fatalf("stdout holds more than the JSON object:\n%q", stdout.String())
	}
	tt := sum.Totals
	if !tt.Tokens.Known() || *tt.Tokens.PromptTokens <= 0 || tt.Cases != 1 || len(tt.CasesByOutcome) != 1 || tt.CasesByOutcome[0].Outcome != "accepted" {
		t.Fatalf("totals %+v", tt)
	}

	for _, want := range []string{"eta unknown | sequential: team", "sequential: oracle", "sequential: finalize",
		"case 1/1 sequential/standard/" + language + ": accepted in",
		"summary:  1 case(s): 1 accepted; wall ",
		fmt.Sprintf("tokens:   %d prompt, %d completion", *tt.Tokens.PromptTokens, *tt.Tokens.CompletionTokens),
		"evidence: " + filepath.Join(out, "evidence.duckdb"), "report:   " + filepath.Join(out, "reports")} {
		if !strings.Contains(shown, want) {
			t.Fatalf("the terminal does not show %q:\n%q", want, shown)
		}
	}
	if !regexp.MustCompile(`accepted in \d+\.\ds \(run run-[^)]+\), eta 0s`).MatchString(shown) {
		t.Fatalf("the finished line has no ETA:\n%q", shown)
	}
}

func TestProgressSetting(t *testing.T) {
	var buf bytes.Buffer
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for _, c := range []struct {
		mode    string
		errOut  io.Writer
		style   harness.ProgressStyle
		writer  bool
		summary bool
	}{
		{"auto", &buf, harness.ProgressPlain, true, true},
		// /dev/null is a character device, not a terminal: no bar drawn into it.
		{"auto", devnull, harness.ProgressPlain, true, true},
		{"", &buf, harness.ProgressPlain, true, true},
		{"tty", &buf, harness.ProgressTerminal, true, true},
		{"plain", &buf, harness.ProgressPlain, true, true},
		{"none", &buf, harness.ProgressPlain, false, false},
	} {
		w, style, summary, err := progressSetting(c.mode, c.errOut)
		if err != nil || style != c.style || (w != nil) != c.writer || summary != c.summary {
			t.Errorf("progressSetting(%q, %T) = %v, %q, %v, %v", c.mode, c.errOut, w != nil, style, summary, err)
		}
	}
	if _, _, _, err := progressSetting("bar", &buf); err == nil || exitCode(err) != 2 {
		t.Fatalf("an unknown mode: %v, want bad usage", err)
	}
}

// cancelOn is stderr that cancels the run when a line containing on is written.
type cancelOn struct {
	bytes.Buffer
	on     string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.on) {
		c.cancel()
	}
	return c.Buffer.Write(p)
}

// An interrupted run still ends with the summary: the cases it did not finish are said as such,
// the tokens unknown (never 0), no report written; --progress none says nothing but the error.
func TestInterruptedRunSummarySaysWhatDidNotFinish(t *testing.T) {
	for _, mode := range []string{"plain", "none"} {
		ctx, cancel := context.WithCancel(context.Background())
		if mode == "none" {
			cancel() // nothing is written to cancel on
		}
		stderr := &cancelOn{on: ": running", cancel: cancel}
		var stdout bytes.Buffer
		h := harness.Options{OutDir: t.TempDir(), Formations: []string{"sequential", "parallel"}}
		err := runMatrixRun(ctx, &MatrixRunOptions{IO: IOStreams{Out: &stdout, ErrOut: stderr}, Harness: h, Format: "json", Progress: mode})
		cancel()
		if err == nil || exitCode(err) != 1 {
			t.Fatalf("%s: a cancelled run: %v, want exit 1", mode, err)
		}
		if stdout.Len() != 0 {
			t.Fatalf("%s: stdout %q", mode, stdout.String())
		}
		if mode == "none" {
			if stderr.Len() != 0 {
				t.Fatalf("--progress none wrote %q", stderr.String())
			}
			continue
		}
		for _, want := range []string{"summary:  2 case(s): 2 not_finished; wall ", "tokens:   unknown (no case finished)", "report:   not written"} {
			if !strings.Contains(stderr.String(), want) {
				t.Fatalf("%s: stderr lacks %q:\n%s (err %v)", mode, want, stderr.String(), err)
			}
		}
	}
}
