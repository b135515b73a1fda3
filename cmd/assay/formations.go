package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/runtime/formation"
)

// FormationsOptions are the parsed flags of `assay formations`.
type FormationsOptions struct {
	IO     IOStreams
	Format string
}

// NewCmdFormations builds `assay formations`, which lists the formation registry.
func NewCmdFormations(io IOStreams, runF func(context.Context, *FormationsOptions) error) *cobra.Command {
	opts := &FormationsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "formations",
		Short: "List the registered formations with their durability and contracts",
		Long: longHelp("0 listed; 2 on bad input.",
			"List every formation of the registry: its name, whether it resumes durably (one that does not refuses a resume "+
				"before executing anything), its contract with the exact structured replies, the ensemble modes ("+list("and", ensembleModeNames()...)+
				") of parallel and consensus, and every option with its default, range and durability (a durable option is bound to "+
				"a resumed run's checkpoint), as `assay matrix run --formation-option NAME=VALUE` sets them. Stricter than the seed: "+
				strings.Join(formation.StricterThanSeed(), "; ")+". Reference: docs/cli.md."),
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runFormations(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	return cmd
}

type formationRow struct {
	Name    string      `json:"name"`
	Durable bool        `json:"durable"`
	Doc     string      `json:"doc"`
	Options []optionRow `json:"options"`
}

// optionRow is one formation option as the registry lists it (formation.OptionSpec).
type optionRow struct {
	Name    string `json:"name"`
	Default string `json:"default"`
	Range   string `json:"range"`
	Durable bool   `json:"durable"`
	Doc     string `json:"doc"`
}

func runFormations(ctx context.Context, opts *FormationsOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	var rows []formationRow
	for _, f := range formation.Registry() {
		row := formationRow{Name: f.Name, Durable: f.Durable, Doc: f.Doc, Options: []optionRow{}}
		for _, o := range f.Options {
			row.Options = append(row.Options, optionRow{Name: o.Name, Default: o.Default, Range: o.Range, Durable: o.Durable, Doc: o.Doc})
		}
		rows = append(rows, row)
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, map[string]any{"formations": rows})
	}
	t := table{header: []string{"FORMATION", "DURABLE", "CONTRACT"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Name, fmt.Sprint(r.Durable), r.Doc})
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "\nensemble modes of parallel and consensus: %s.\n", formation.EnsembleContract())
	for _, m := range formation.EnsembleModes() {
		fmt.Fprintf(opts.IO.Out, "  %-12s %s\n", m.Name, m.Doc)
	}
	fmt.Fprintf(opts.IO.Out, "\noptions (--formation-option NAME=VALUE; default, range; * bound to a durable run's checkpoint):\n")
	for _, r := range rows {
		var list []string
		for _, o := range r.Options {
			mark := ""
			if o.Durable {
				mark = "*"
			}
			list = append(list, fmt.Sprintf("%s%s=%s (%s)", o.Name, mark, o.Default, o.Range))
		}
		fmt.Fprintf(opts.IO.Out, "  %-22s %s\n", r.Name, strings.Join(list, ", "))
	}
	fmt.Fprintf(opts.IO.Out, "\nstricter than the seed: %s.\n", strings.Join(formation.StricterThanSeed(), "; "))
	return nil
}
