package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/oracle"
)

// completeValues registers, on every command under c, shell completion of the values its flags and
// arguments take: --format from the formats its help lists, --formations (catalog names and "all"),
// --profile, --language, --spec from the registries, --progress's modes, and RUN arguments (commands whose use line
// names RUN) from the runs of the evidence store the command's --out or --store names.
func completeValues(c *cobra.Command) {
	for _, sub := range c.Commands() {
		completeValues(sub)
	}
	fixed := func(name string, values []string) {
		if c.Flags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if f := c.Flags().Lookup("format"); f != nil {
		fixed("format", formatsOf(f.Usage))
	}
	fixed("formations", append(harness.CatalogNames(), "all"))
	fixed("profile", harness.ProfileNames())
	fixed("language", harness.Languages())
	fixed("progress", progressModes())
	var specs []string
	for _, s := range oracle.Specs() {
		specs = append(specs, s.Name)
	}
	fixed("spec", specs)
	if strings.Contains(c.Use, "RUN") && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = completeRunIDs
	}
}

// formatsOf reads the formats a --format flag's usage lists: "output format: table, json or dot".
func formatsOf(usage string) []string {
	_, list, ok := strings.Cut(usage, ": ")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, " (")
	var out []string
	for _, f := range strings.FieldsFunc(strings.ReplaceAll(list, " or ", ","), func(r rune) bool { return r == ',' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// completeRunIDs completes a RUN argument with the run ids of the store the command's --store or
// --out names (evidence.duckdb in it), newest first; nothing when there is no readable store.
func completeRunIDs(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	path := ""
	if f := c.Flags().Lookup("store"); f != nil && f.Value.String() != "" {
		path = f.Value.String()
	} else if f := c.Flags().Lookup("out"); f != nil {
		path = filepath.Join(f.Value.String(), "evidence.duckdb")
	}
	if path == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := c.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true, Command: "assay completion"})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer s.Close()
	runs, err := s.Runs(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	for _, r := range runs {
		if strings.HasPrefix(r.RunID, toComplete) && !slices.Contains(args, r.RunID) {
			ids = append(ids, r.RunID)
		}
	}
	slices.Reverse(ids)
	return ids, cobra.ShellCompDirectiveNoFileComp
}
