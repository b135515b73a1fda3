package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/indexer"
)

// IndexOptions are the parsed flags of `assay index`.
type IndexOptions struct {
	IO       IOStreams
	Dir      string
	Out      string
	DB       string
	Tests    bool
	Patterns []string
	Format   string
}

// NewCmdIndex builds `assay index [PATH]`.
func NewCmdIndex(io IOStreams, runF func(context.Context, *IndexOptions) error) *cobra.Command {
	opts := &IndexOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "index [PATH]",
		Short: "Index a Go module into a SQLite code graph",
		Long: `Load the Go packages under PATH (default ".") with golang.org/x/tools/go/packages, test packages
included unless --tests=false, and write packages, files, named types, functions and methods, and
import edges into a SQLite graph database (default <out>/graph.db) with a snapshot row (VCS revision
where there is one, Go and tool versions, counts, coverage). Prints the counts and the database
file's SHA-256. Packages that fail to load are recorded with their errors, never dropped.`,
		Example: `  assay index
  assay index --format json $(go env GOMODCACHE)/github.com/spf13/cobra@v1.10.2`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return badInput(fmt.Errorf("assay index takes at most one PATH, got %d", len(args)))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = "."
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runIndex(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "assay-out", "output directory")
	cmd.Flags().StringVar(&opts.DB, "db", "", "graph database file (default <out>/graph.db)")
	cmd.Flags().BoolVar(&opts.Tests, "tests", true, "include test packages")
	cmd.Flags().StringSliceVar(&opts.Patterns, "pattern", []string{"./..."}, "package patterns, relative to PATH")
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	return cmd
}

func runIndex(ctx context.Context, opts *IndexOptions) error {
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	fi, err := os.Stat(opts.Dir)
	if err != nil {
		return badInput(fmt.Errorf("index %s: %w", opts.Dir, err))
	}
	if !fi.IsDir() {
		return badInput(fmt.Errorf("index %s: not a directory", opts.Dir))
	}
	db := opts.DB
	if db == "" {
		if fi, err := os.Stat(opts.Out); err == nil && !fi.IsDir() {
			return badInput(fmt.Errorf("--out %s is a file, not a directory", opts.Out))
		}
		if err := os.MkdirAll(opts.Out, 0o755); err != nil {
			return badInput(fmt.Errorf("create output directory: %w", err))
		}
		db = filepath.Join(opts.Out, "graph.db")
	}
	abs, err := filepath.Abs(db)
	if err != nil {
		return badInput(err)
	}
	snap, err := indexer.Index(ctx, indexer.Options{Dir: opts.Dir, Patterns: opts.Patterns, Tests: opts.Tests, DBPath: abs, ToolVersion: version})
	if err != nil {
		if errors.Is(err, indexer.ErrNoPackages) {
			return badInput(err)
		}
		return badInput(fmt.Errorf("index %s: %w", opts.Dir, err))
	}
	if snap.Counts.LoadErrors > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "assay: warning: %d packages had load errors; they are recorded in load_errors and lower coverage\n", snap.Counts.LoadErrors)
	}
	if opts.Format == "json" {
		return writeJSON(opts.IO.Out, snap)
	}
	c := snap.Counts
	t := table{header: []string{"PACKAGES", "FILES", "TYPES", "FUNCS", "METHODS", "IMPORTS", "LOAD ERRORS"},
		rows: [][]string{{fmt.Sprint(c.Packages), fmt.Sprint(c.Files), fmt.Sprint(c.Types), fmt.Sprint(c.Funcs),
			fmt.Sprint(c.Methods), fmt.Sprint(c.Imports), fmt.Sprint(c.LoadErrors)}}}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	rev := snap.VCSRevision
	if rev == "" {
		rev = "none (not a VCS checkout)"
	} else if snap.VCSDirty {
		rev += " (dirty)"
	}
	fmt.Fprintf(opts.IO.Out, "\nsnapshot: %s\nrevision: %s\ndatabase: %s\nsha256:   %s\n", snap.ID, rev, snap.DBPath, snap.DBSHA256)
	return nil
}
