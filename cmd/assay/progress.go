package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/assay-audit/assay/harness"
)

// Progress modes of --progress.
const (
	progressAuto  = "auto"
	progressTTY   = "tty"
	progressPlain = "plain"
	progressNone  = "none"
)

// progressModes are --progress's values, the default first.
func progressModes() []string {
	return []string{progressAuto, progressTTY, progressPlain, progressNone}
}

// checkProgressFlag refuses --progress given with an empty value (bad usage, not "the default").
func checkProgressFlag(fs *pflag.FlagSet, mode string) error {
	if fs.Changed("progress") && mode == "" {
		return usageErrorf("--progress is empty: want one of %s", strings.Join(progressModes(), ", "))
	}
	return nil
}

// progressFlagHelp is --progress's help, shared by matrix run and resume.
const progressFlagHelp = "progress on stderr: auto (tty when stderr is a terminal, else plain), tty (a redrawn bar naming each running " +
	"case's phase — team, evidence, tests, oracle, checks, finalize — and the ETA), plain (one line per case start and end, the " +
	"end line with the ETA) or none (nothing but errors: no progress and no end-of-run summary); every mode but none ends " +
	"with a summary (cases by outcome, wall time, tokens, store and report paths). stdout is never written to by progress"

// addProgressFlag adds --progress to fs, stored in mode.
func addProgressFlag(fs *pflag.FlagSet, mode *string) {
	fs.StringVar(mode, "progress", progressAuto, progressFlagHelp)
}

// progressSetting resolves --progress for stderr errOut: the writer the harness writes progress to
// (nil for none), its style, and whether the end-of-run summary is printed. An unknown mode is bad
// usage.
func progressSetting(mode string, errOut io.Writer) (io.Writer, harness.ProgressStyle, bool, error) {
	switch mode {
	case progressAuto, "":
		if isTTY(errOut) {
			return errOut, harness.ProgressTerminal, true, nil
		}
		return errOut, harness.ProgressPlain, true, nil
	case progressTTY:
		return errOut, harness.ProgressTerminal, true, nil
	case progressPlain:
		return errOut, harness.ProgressPlain, true, nil
	case progressNone:
		return nil, harness.ProgressPlain, false, nil
	}
	return nil, "", false, usageErrorf("--progress %q is not one of %s", mode, strings.Join(progressModes(), ", "))
}

// isTTY reports whether w is a terminal (golang.org/x/term; /dev/null, a character device too, is
// not one).
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeRunTotals prints the end-of-run summary of sum on w (stderr): cases by outcome, wall time,
// tokens (unknown said as such, never 0) and where the evidence and report are (reportPath "" when
// none was written).
func writeRunTotals(w io.Writer, sum harness.Summary, reportPath string) {
	t := sum.Totals
	var outcomes []string
	for _, o := range t.CasesByOutcome {
		outcomes = append(outcomes, fmt.Sprintf("%d %s", o.Cases, o.Outcome))
	}
	if len(outcomes) == 0 {
		outcomes = []string{"none finished"}
	}
	fmt.Fprintf(w, "summary:  %d case(s): %s; wall %.1fs\n", t.Cases, strings.Join(outcomes, ", "), t.WallSeconds)
	if t.Tokens.Known() {
		fmt.Fprintf(w, "tokens:   %d prompt, %d completion (the harness's parse of the recorded responses)\n",
			*t.Tokens.PromptTokens, *t.Tokens.CompletionTokens)
	} else {
		fmt.Fprintf(w, "tokens:   unknown (%s)\n", t.Tokens.Unknown)
	}
	if sum.StorePath != "" {
		fmt.Fprintf(w, "evidence: %s\n", sum.StorePath)
	}
	if reportPath != "" {
		fmt.Fprintf(w, "report:   %s\n", reportPath)
	} else {
		fmt.Fprintf(w, "report:   not written\n")
	}
}
