package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// cliDoc returns docs/cli.md.
func cliDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cliReference returns the section of docs/cli.md under heading (a "## " line), up to the next.
func cliReference(t *testing.T, heading string) string {
	t.Helper()
	doc := cliDoc(t)
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/cli.md has no section %q", heading)
	}
	sec := doc[i+1:]
	if j := strings.Index(sec[len(heading):], "\n## "); j >= 0 {
		sec = sec[:len(heading)+j]
	}
	return sec
}

// oneSpaced is s with every run of white space one space, so a phrase is found across line breaks.
func oneSpaced(s string) string { return strings.Join(strings.Fields(s), " ") }

// Every command's help is at most maxHelpLines lines before its exit status, which every command
// that runs states, and points to docs/cli.md, where a section holds what was cut from it.
func TestHelpIsShortAndStatesTheExitStatus(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" {
			return
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
		// A group only dispatches to its subcommands (metrics also shows metrics itself).
		group := c.HasSubCommands() && c.Name() != "metrics"
		body, exit, hasExit := strings.Cut(c.Long, "\n\nExit status: ")
		if !group && (!hasExit || exit == "") {
			t.Errorf("%s: its help states no exit status:\n%s", c.CommandPath(), c.Long)
		}
		lines := 0
		for _, l := range strings.Split(body, "\n") {
			if strings.TrimSpace(l) != "" {
				lines++
			}
			if len(l) > helpWidth {
				t.Errorf("%s: a help line of %d columns: %q", c.CommandPath(), len(l), l)
			}
		}
		if lines > maxHelpLines {
			t.Errorf("%s: %d lines of help before its exit status, more than %d:\n%s", c.CommandPath(), lines, maxHelpLines, body)
		}
		if !group || !c.HasParent() {
			if !strings.Contains(c.Long, "docs/cli.md") {
				t.Errorf("%s: its help does not point to docs/cli.md", c.CommandPath())
			}
			// The section of the command, or of its parent for the subcommands of oracle, metrics and graph.
			if c.HasParent() && !strings.Contains(cliDoc(t), "\n## "+c.CommandPath()+"\n") {
				cliReference(t, "## "+c.Parent().CommandPath())
			}
		}
	}
	walk(NewCmdRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}))
}

// The lists in the help come from the registries: a formation, case, profile, language, check,
// fault kind or effect state added there is in the help without editing it.
func TestHelpListsWhatTheRegistriesHold(t *testing.T) {
	help := func(path ...string) string {
		r := runCLI(t, append(path, "--help")...)
		if r.code != 0 {
			t.Fatalf("%v --help: exit %d", path, r.code)
		}
		return oneSpaced(r.stdout)
	}
	matrix := help("matrix", "run")
	var durable, ensemble []string
	for _, f := range formation.Registry() {
		if f.Durable {
			durable = append(durable, f.Name)
		}
	}
	for _, m := range formation.EnsembleModes() {
		ensemble = append(ensemble, m.Name)
	}
	want := map[string][]string{
		"matrix run":   append(append(append(harness.CatalogNames(), harness.ProfileNames()...), harness.Languages()...), checkNames()...),
		"resume":       durable,
		"formations":   ensemble,
		"oracle check": oracle.CheckVerdicts(),
	}
	want["provider serve"] = reference.FaultKinds()
	for _, s := range effect.States() {
		want["effects"] = append(want["effects"], string(s))
	}
	for path, items := range want {
		text := help(strings.Fields(path)...)
		for _, item := range items {
			if !strings.Contains(text, item) {
				t.Errorf("assay %s --help does not name %q", path, item)
			}
		}
	}
	if n := len(harness.Catalog()); !strings.Contains(matrix, fmt.Sprintf("catalog (%d:", n)) {
		t.Errorf("matrix run --help does not count the %d cases of the catalog", n)
	}
	// The durable formations are listed, and only they.
	resume := help("resume")
	for _, f := range formation.Registry() {
		if !f.Durable && strings.Contains(resume, " "+f.Name+",") {
			t.Errorf("resume --help names %s, which does not resume durably", f.Name)
		}
	}
}
