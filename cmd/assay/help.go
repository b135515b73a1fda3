package main

import (
	"strings"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/metrics"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime/formation"
)

// helpWidth is the column help paragraphs are wrapped at.
const helpWidth = 100

// maxHelpLines is how many lines a command's help may take before its exit status: the rest is
// reference, in docs/cli.md.
const maxHelpLines = 8

// longHelp is a command's Long help: the paragraphs, each wrapped at helpWidth (a paragraph whose
// lines start with spaces, a list, is kept as written), then "Exit status: " and exit, wrapped.
// Lists of what the registries hold are built by the caller from them, never written by hand.
func longHelp(exit string, paragraphs ...string) string {
	var b strings.Builder
	for _, p := range paragraphs {
		b.WriteString(wrap(p))
		b.WriteString("\n\n")
	}
	if exit == "" {
		return strings.TrimSuffix(b.String(), "\n\n")
	}
	b.WriteString(wrap("Exit status: " + exit))
	return b.String()
}

// wrap fills the words of p into lines of at most helpWidth columns (a longer word stands alone);
// a paragraph with an indented line is returned as it is.
func wrap(p string) string {
	for _, line := range strings.Split(p, "\n") {
		if strings.HasPrefix(line, " ") {
			return p
		}
	}
	var lines []string
	line := ""
	for _, w := range strings.Fields(p) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) > helpWidth:
			lines = append(lines, line)
			line = w
		default:
			line += " " + w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// list is "a, b and c" (or "a or b" with the word or).
func list(word string, items ...string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + word + " " + items[len(items)-1]
}

// checkNames are the matrix checks' names, in the order they run (harness.Checks).
func checkNames() []string {
	var names []string
	for _, c := range harness.Checks() {
		names = append(names, c.Name)
	}
	return names
}

// durableFormations are the formations of the registry that pause and resume durably.
func durableFormations() []string {
	var names []string
	for _, f := range formation.Registry() {
		if f.Durable {
			names = append(names, f.Name)
		}
	}
	return names
}

// ensembleModeNames are the ensemble aggregation modes (formation.EnsembleModes).
func ensembleModeNames() []string {
	var names []string
	for _, m := range formation.EnsembleModes() {
		names = append(names, m.Name)
	}
	return names
}

// metricsByScope is "package: a, b; type: c; func: d, e" (metrics.Names of each scope).
func metricsByScope() string {
	var parts []string
	for _, s := range metrics.Scopes() {
		parts = append(parts, string(s)+": "+strings.Join(metrics.Names(s), ", "))
	}
	return strings.Join(parts, "; ")
}

// specNames are the built-in oracle specs' names.
func specNames() []string {
	var names []string
	for _, s := range oracle.Specs() {
		names = append(names, s.Name)
	}
	return names
}
