package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// table is rows of cells under a header, printable as table, CSV or JSON.
type table struct {
	header []string
	rows   [][]string
}

func (t table) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func (t table) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(t.header); err != nil {
		return err
	}
	if err := cw.WriteAll(t.rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// outputFormat returns the --format value format if it is one of allowed, the first of allowed (the
// flag's default) when it is "", and bad usage otherwise.
func outputFormat(format string, allowed ...string) (string, error) {
	switch {
	case format == "":
		return allowed[0], nil
	case !slices.Contains(allowed, format):
		return "", usageErrorf("--format %q is not one of %s", format, strings.Join(allowed, ", "))
	}
	return format, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// storeFlags are the flags every command that reads the evidence store shares.
type storeFlags struct {
	out   string
	store string
}

func (f *storeFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.out, "out", "assay-out", "output directory holding evidence.duckdb")
	c.Flags().StringVar(&f.store, "store", "", "explicit evidence store file (overrides --out)")
}

// path returns the evidence store path the flags name.
func (f *storeFlags) path() string {
	if f.store != "" {
		return f.store
	}
	return filepath.Join(f.out, "evidence.duckdb")
}
