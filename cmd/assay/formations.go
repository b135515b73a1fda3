package main

import (
	"context"
	"fmt"

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
			"List every formation of the registry the coordinator dispatches through: its name, whether it pauses and "+
				"resumes durably (one that does not refuses a resume before executing anything), and its contract, including "+
				"the exact structured replies its members give. The ensemble aggregation modes ("+list("and", ensembleModeNames()...)+
				") are modes of parallel and consensus, listed after the table. Reference: docs/cli.md."),
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
	Name    string `json:"name"`
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
		rows = append(rows, formationRow{Name: f.Name, Durable: f.Durable, Doc: f.Doc})
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
	return nil
}
