package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
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
	Tags     []string
	GOOS     string
	GOARCH   string
	Reuse    bool
	Metrics  bool
	// BetweennessSources samples betweenness sources (0: exact).
	BetweennessSources int
}

// NewCmdIndex builds `assay index [PATH]`.
func NewCmdIndex(io IOStreams, runF func(context.Context, *IndexOptions) error) *cobra.Command {
	opts := &IndexOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "index [PATH]",
		Short: "Index a Go module into a SQLite code graph",
		Long: longHelp("0 indexed, also when packages had load errors (they are recorded, coverage lowered, a warning "+
			"printed); 1 when it could not index (an I/O or go command failure); 2 on bad input: no package matched, a PATH "+
			"that is not a directory, invalid options.",
			"Load the Go packages under PATH (default \".\") with go/packages, test packages included unless --tests=false, "+
				"write the code graph (modules, packages and their test variants, files, types, fields, functions, methods, "+
				"closures and the edges between them) into a SQLite graph database (default <out>/graph.db), compute every "+
				"metric into it ('assay metrics explain'), and print the counts and the database's SHA-256. The build context "+
				"(--tags, --goos, --goarch, CGO_ENABLED) is recorded with the snapshot. An unchanged tree reuses the "+
				"database, any change indexes again, saying what changed; runs writing one database take "+
				"turns through a lock beside it. What the counts and COVERAGE count, reuse, the lock: docs/cli.md."),
		Example: `  assay index
  assay index --tags integration --goos windows ./...
  assay index --format json $(go env GOMODCACHE)/github.com/spf13/cobra@v1.10.2`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return argCountError(c, "at most one PATH", len(args))
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
	cmd.Flags().StringSliceVar(&opts.Tags, "tags", nil, "build tags (comma-separated or repeated)")
	cmd.Flags().StringVar(&opts.GOOS, "goos", "", "target operating system (default: the go command's GOOS)")
	cmd.Flags().StringVar(&opts.GOARCH, "goarch", "", "target architecture (default: the go command's GOARCH)")
	cmd.Flags().BoolVar(&opts.Reuse, "reuse", true, "reuse the database when nothing that decides it changed")
	cmd.Flags().BoolVar(&opts.Metrics, "metrics", true, "compute metrics into the database")
	cmd.Flags().IntVar(&opts.BetweennessSources, "betweenness-sources", 0, "estimate betweenness from this many sources (a proxy; 0 = exact)")
	return cmd
}

func runIndex(ctx context.Context, opts *IndexOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	fi, err := os.Stat(opts.Dir)
	if err != nil {
		return fmt.Errorf("index %s: %w", opts.Dir, err)
	}
	if !fi.IsDir() {
		return usageErrorf("index %s: not a directory", opts.Dir)
	}
	if opts.BetweennessSources < 0 {
		return usageErrorf("--betweenness-sources %d is negative", opts.BetweennessSources)
	}
	db := opts.DB
	if db == "" {
		// The directory is created when the database is written, so that a
		// refused run leaves nothing behind.
		if fi, err := os.Stat(opts.Out); err == nil && !fi.IsDir() {
			return usageErrorf("--out %s is a file, not a directory", opts.Out)
		}
		db = filepath.Join(opts.Out, "graph.db")
	}
	abs, err := filepath.Abs(db)
	if err != nil {
		return err
	}
	iopts := indexer.Options{Dir: opts.Dir, Patterns: opts.Patterns, Tests: opts.Tests, DBPath: abs, ToolVersion: version,
		Tags: opts.Tags, GOOS: opts.GOOS, GOARCH: opts.GOARCH, Reuse: opts.Reuse}
	iopts.Progress = indexProgress(opts.IO.ErrOut, isTerminal(opts.IO.ErrOut))
	if opts.Metrics {
		mopts := metrics.Options{BetweennessSources: opts.BetweennessSources}
		iopts.Enrich = metrics.Enrich(mopts)
		iopts.EnrichID = fmt.Sprintf("%s sources=%d", metrics.RegistryID(), opts.BetweennessSources)
	}
	snap, err := indexer.Index(ctx, iopts)
	if err != nil {
		return err
	}
	if c := snap.Counts; c.PackagesWithErrors > 0 || c.UnmatchedPatterns > 0 || c.PackagesExcluded > 0 {
		var what []string
		if c.PackagesWithErrors > 0 {
			what = append(what, plural(c.PackagesWithErrors, "package")+" (test variants counted apart) had load errors")
		}
		if c.UnmatchedPatterns > 0 {
			what = append(what, plural(c.UnmatchedPatterns, "pattern")+" matched nothing")
		}
		if c.PackagesExcluded > 0 {
			what = append(what, fmt.Sprintf("%s excluded by the build context (CGO_ENABLED=%s, GOOS=%s, GOARCH=%s, tags %q) were never analysed",
				plural(c.PackagesExcluded, "package"), snap.CGOEnabled, snap.GOOS, snap.GOARCH, strings.Join(snap.Tags, ",")))
		}
		fmt.Fprintf(opts.IO.ErrOut, "assay: warning: %s (%s recorded in the load_errors table; 'assay graph errors' lists them); coverage %s\n",
			strings.Join(what, " and "), plural(c.LoadErrors, "error"), coverage3(snap.Coverage))
		if first := firstLoadError(ctx, snap.DBPath); first != "" {
			fmt.Fprintf(opts.IO.ErrOut, "assay: first load error: %s\n", first)
		}
	}
	if snap.Reused {
		fmt.Fprintf(opts.IO.ErrOut, "assay: nothing changed since the last index; reused %s\n", snap.DBPath)
	}
	if snap.FullReason != "" {
		fmt.Fprintf(opts.IO.ErrOut, "assay: indexed again: %s\n", snap.FullReason)
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, snap)
	}
	c := snap.Counts
	t := table{header: []string{"PACKAGES", "FILES", "TYPES", "FUNCS", "METHODS", "NODES", "EDGES", "LOAD ERRORS", "COVERAGE"},
		rows: [][]string{{fmt.Sprint(c.Packages), fmt.Sprint(c.Files), fmt.Sprint(c.Types), fmt.Sprint(c.Funcs),
			fmt.Sprint(c.Methods), fmt.Sprint(c.Nodes), fmt.Sprint(c.Edges), fmt.Sprint(c.LoadErrors), coverage3(snap.Coverage)}}}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	rev := snap.VCSRevision
	if rev == "" {
		rev = "none (not a VCS checkout)"
	} else if snap.VCSDirty {
		rev += " (dirty)"
	}
	fmt.Fprintf(opts.IO.Out, "\nsnapshot: %s\nrevision: %s\nbuild:    GOOS=%s GOARCH=%s CGO_ENABLED=%s tags=%s\ndatabase: %s\nsha256:   %s\n",
		snap.ID, rev, snap.GOOS, snap.GOARCH, snap.CGOEnabled, strings.Join(snap.Tags, ","), snap.DBPath, snap.DBSHA256)
	return nil
}

// indexProgress prints indexing stages on w when it is a terminal (tty).
// Waiting for another index of the same database is printed on any w: in a
// CI log it would otherwise look like a hang.
func indexProgress(w io.Writer, tty bool) func(stage string) {
	return func(stage string) {
		if tty || strings.HasPrefix(stage, "waiting for another index") {
			fmt.Fprintf(w, "assay: %s...\n", stage)
		}
	}
}

// isTerminal reports whether w is a character device (a terminal), where
// progress lines help; piped or captured stderr gets none.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// firstLoadError returns the first recorded load error of the graph
// database at path ("position: message", or the message alone), or "" when
// there is none or it cannot be read.
func firstLoadError(ctx context.Context, path string) string {
	db, err := indexer.OpenDatabase(ctx, path)
	if err != nil {
		return ""
	}
	defer db.Close()
	pos, msg, ok, err := indexer.FirstLoadError(ctx, db)
	if err != nil || !ok {
		return ""
	}
	m := oneLineMessage(msg)
	if pos != "" && !strings.HasPrefix(m, pos) {
		return pos + ": " + m
	}
	return m
}

// oneLineMessage puts a load error's message on one line: the go command's
// messages span lines ("# pkg" then "file:line: ..."), joined with "; "
// without the package header.
func oneLineMessage(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "# ") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// coverage3 formats a coverage ratio with 3 decimals, rounding down, so that
// one package short of complete never reads 1.000.
func coverage3(c float64) string {
	if c < 1 {
		return fmt.Sprintf("%.3f", math.Floor(c*1000)/1000)
	}
	return fmt.Sprintf("%.3f", c)
}
