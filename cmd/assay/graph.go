package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/indexer"
)

// GraphOptions are the parsed flags and arguments of `assay graph QUERY`.
type GraphOptions struct {
	IO     IOStreams
	Graph  graphFlags
	Format string
	// Variant is the package variants `graph symbols` shows: base or all.
	Variant string
	// Package is the package pattern `graph errors` keeps ("" for all).
	Package string
	// Query is callers, callees, path, symbols or errors.
	Query string
	Args  []string
}

// NewCmdGraph builds `assay graph callers|callees|path|symbols|errors`.
func NewCmdGraph(io IOStreams, runF func(context.Context, *GraphOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "Query the code graph: callers, callees, import paths, symbols in a file, load errors",
		Long: longHelp("",
			"Query the graph database 'assay index' wrote (default assay-out/graph.db): the callers and callees of a "+
				"function, a shortest import path between packages, the declarations in a file, the load errors recorded. "+
				"Calls through interfaces and func values are never shown as resolved. What a SYMBOL, a FILE and a package "+
				"may be, and what the columns mean: the help of each query, and docs/cli.md."),
		Example: `  assay graph callers github.com/spf13/cobra.Command.Execute
  assay graph callees --format dot cobra.Command.ExecuteC | dot -Tsvg > callees.svg
  assay graph path github.com/spf13/cobra/doc github.com/spf13/pflag
  assay graph symbols command.go
  assay graph errors --package github.com/spf13/cobra/...`,
	}
	for _, q := range []struct {
		use, short string
		args       int
	}{
		{"callers SYMBOL", "Functions that call SYMBOL (static and dynamic edges)", 1},
		{"callees SYMBOL", "Functions SYMBOL calls, and its dynamic call sites", 1},
		{"path FROM TO", "A shortest import path from package FROM to package TO (exit 1 when there is none)", 2},
		{"symbols FILE", "Declarations in FILE (absolute, module-relative, or a path suffix naming one file: main.go, cmd/a/main.go)", 1},
	} {
		opts := &GraphOptions{IO: io, Query: strings.Fields(q.use)[0]}
		nargs := q.args
		sub := &cobra.Command{
			Use:   q.use,
			Short: q.short,
			// What SYMBOL and FILE may be and what the columns mean is
			// said here too: `assay graph symbols --help` is where one looks.
			Long: longHelp("0 answered, also when the answer is empty; 1 when there is no import path (graph path) or the "+
				"database could not be read; 2 on bad input: no graph database, an unknown or ambiguous symbol, package or "+
				"file, a query that does not apply to what is named.",
				q.short+".",
				"A SYMBOL is a node id (func:example.com/m/p.F), it without prefix, or a unique suffix (p.T.M), matched "+
					"exactly and case-sensitively; a FILE is an absolute path, one relative to its module root, or a unique suffix "+
					"of whole elements (main.go); a package an import path, a node id or a unique suffix. --variant all: a "+
					"_test.go file's symbols; callers of the test variant's copy (p [p.test]) too. CALLER_DECL: where a caller "+
					"is declared; CALL_SITE (dynamic sites): the call. Positions are physical (on disk); LINE_DIRECTIVE: a "+
					"//line directive's. Reference: docs/cli.md."),
			Args: func(c *cobra.Command, args []string) error {
				if len(args) != nargs {
					return argCountError(c, argsWord(nargs), len(args))
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error {
				opts.Args = args
				if runF != nil {
					return runF(c.Context(), opts)
				}
				return runGraph(c.Context(), opts)
			},
		}
		opts.Graph.register(sub)
		sub.Flags().StringVar(&opts.Format, "format", "table", "output format: table, json or dot")
		switch opts.Query {
		case "symbols":
			sub.Flags().StringVar(&opts.Variant, "variant", "base", "package variants to show: base, or all (test variants and external test packages too)")
		case "callers":
			sub.Flags().StringVar(&opts.Variant, "variant", "base", "callers of: base, the SYMBOL named; all, also of its copy in the package's test variant (p [p.test]), where the calls from _test.go files go")
		}
		cmd.AddCommand(sub)
	}
	cmd.AddCommand(newCmdGraphErrors(io, runF))
	return cmd
}

// newCmdGraphErrors builds `assay graph errors`.
func newCmdGraphErrors(io IOStreams, runF func(context.Context, *GraphOptions) error) *cobra.Command {
	opts := &GraphOptions{IO: io, Query: "errors"}
	sub := &cobra.Command{
		Use:   "errors",
		Short: "Load errors the index recorded, and the snapshot's coverage",
		Long: longHelp("0 listed; 1 when the database could not be read; 2 on bad input: no graph database, a --package "+
			"that matches nothing.",
			"List every load error 'assay index' recorded (the package, the kind, the position, the message), sorted by "+
				"package then position, and the coverage of the snapshot. --package keeps the errors of the packages an "+
				"import path or a pattern with ... matches; a pattern that matches no package is refused, since no errors "+
				"would read as a clean package. Reference: docs/cli.md."),
		Example: `  assay graph errors
  assay graph errors --package example.com/m/internal/... --format json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runGraph(c.Context(), opts)
		},
	}
	opts.Graph.register(sub)
	sub.Flags().StringVar(&opts.Package, "package", "", "only the errors of the packages this import path or pattern (with ...) matches")
	sub.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	return sub
}

func runGraph(ctx context.Context, opts *GraphOptions) error {
	formats := []string{"table", "json", "dot"}
	if opts.Query == "errors" {
		formats = formats[:2]
	}
	format, err := outputFormat(opts.Format, formats...)
	if err != nil {
		return err
	}
	opts.Format = format
	db, err := indexer.OpenDatabase(ctx, opts.Graph.path())
	if err != nil {
		return err
	}
	defer db.Close()
	switch opts.Query {
	case "callers", "callees":
		return graphCalls(ctx, db, opts)
	case "path":
		return graphPath(ctx, db, opts)
	case "symbols":
		return graphSymbols(ctx, db, opts)
	case "errors":
		return graphErrors(ctx, db, opts)
	}
	return usageErrorf("unknown graph query %q", opts.Query)
}

func graphCalls(ctx context.Context, db *sql.DB, opts *GraphOptions) error {
	id, err := indexer.ResolveSymbol(ctx, db, opts.Args[0])
	if err != nil {
		return err
	}
	// Only functions call and are called: "no callers" of a package, type
	// or field would read as a finding about it.
	node, err := indexer.Node(ctx, db, id)
	if err != nil {
		return fmt.Errorf("read the kind of %s: %w", id, err)
	}
	kind := node.Kind
	// Callers: of anything a call can go to, including an interface method
	// or a func-valued field a dynamic call goes through. Callees: of
	// anything with a body.
	switch {
	case kind == "func" || kind == "method" || kind == "closure":
	case opts.Query == "callers" && (kind == "interface_method" || kind == "field"):
	case opts.Query == "callers":
		return usageErrorf("%s is a %s: callers lists the calls to functions, methods, closures, interface methods and func-valued fields", id, kind)
	default:
		return usageErrorf("%s is a %s, which has no body: callees lists the calls made by functions, methods and closures", id, kind)
	}
	var rels []indexer.Relation
	var dyn []indexer.DynamicCall
	// The test variant's copy of a base declaration is another node: the
	// calls from _test.go files go there. Say so rather than let the base's
	// callers read as all of them.
	var testNote string
	var testCallers *variantCallers
	if opts.Query == "callers" {
		if opts.Variant != "base" && opts.Variant != "all" {
			return usageErrorf("--variant %q is not base or all", opts.Variant)
		}
		rels, err = indexer.Callers(ctx, db, id)
		if err != nil {
			return err
		}
		testID, err := indexer.TestVariantID(ctx, db, id)
		if err != nil {
			return err
		}
		if testID != "" {
			trels, err := indexer.Callers(ctx, db, testID)
			if err != nil {
				return err
			}
			testCallers = &variantCallers{Symbol: testID, Callers: len(trels)}
			if opts.Variant == "all" {
				rels = append(rels, trels...)
			} else if len(trels) > len(rels) {
				testNote = fmt.Sprintf("the test variant %s has %d callers (%d more, with the calls from _test.go files): --variant all shows them",
					testID, len(trels), len(trels)-len(rels))
			}
		}
	} else {
		rels, dyn, err = indexer.Callees(ctx, db, id)
	}
	if err != nil {
		return err
	}
	if kind == "field" && len(rels) == 0 {
		// "No callers" of a field that is not a func would read as a
		// finding about it.
		return usageErrorf("%s is a field that no call goes through: callers lists the calls to functions, methods, closures, interface methods and func-valued fields", id)
	}
	switch opts.Format {
	case "json":
		out := struct {
			Symbol       string                `json:"symbol"`
			Edges        []indexer.Relation    `json:"edges"`
			DynamicSites []indexer.DynamicCall `json:"dynamic_sites,omitempty"`
			// TestVariant is the test variant's copy of the symbol and
			// its number of callers (callers only; absent when none).
			TestVariant *variantCallers `json:"test_variant,omitempty"`
		}{id, nonNilSlice(rels), dyn, testCallers}
		return writeJSON(opts.IO.Out, out)
	case "dot":
		var edges [][3]string
		for _, r := range rels {
			edges = append(edges, [3]string{r.Src.ID, r.Dst.ID, r.Kind})
		}
		for i, d := range dyn {
			edges = append(edges, [3]string{d.Src.ID, fmt.Sprintf("dynamic site %d: %s (%s)", i+1, d.Expr, d.Mode), "dynamic_site"})
		}
		return writeDot(opts.IO.Out, opts.Query, edges)
	}
	// An edge has no call position (the graph stores relations, not
	// occurrences): its CALL_SITE is "-", never the caller's declaration.
	t := table{header: []string{"KIND", "CALLER", "CALLEE", "VARIANT", "CALLER_DECL", "CALL_SITE"}}
	for _, r := range rels {
		t.rows = append(t.rows, []string{r.Kind, r.Src.ID, r.Dst.ID, r.Variant, position(r.Src), "-"})
	}
	for _, d := range dyn {
		t.rows = append(t.rows, []string{"dynamic_site", d.Src.ID, d.Expr + " (" + dynamicTarget(d.Mode) + ")", d.Variant, position(d.Src),
			d.CallFile + ":" + strconv.Itoa(d.CallLine) + ":" + strconv.Itoa(d.CallCol)})
	}
	if len(t.rows) == 0 {
		fmt.Fprintf(opts.IO.Out, "no %s of %s in the graph\n", opts.Query, id)
		if testNote != "" {
			fmt.Fprintf(opts.IO.Out, "%s\n", testNote)
		}
		if kind == "closure" && opts.Query == "callees" {
			// Not "calls nothing": the graph records a closure's calls on
			// the declaration it is in.
			decl, _, _ := strings.Cut(id, "$")
			fmt.Fprintf(opts.IO.Out, "the calls made in a closure are recorded on the declaration it is in: assay graph callees '%s'\n", decl)
		}
		return nil
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	if testNote != "" {
		_, err = fmt.Fprintf(opts.IO.Out, "\n%s\n", testNote)
	}
	return err
}

// variantCallers is another package variant's copy of a symbol and its
// number of callers.
type variantCallers struct {
	Symbol  string `json:"symbol"`
	Callers int    `json:"callers"`
}

// dynamicTarget says what a dynamic call site without a target node is:
// an interface method with no node (error.Error, an unexported method of
// a dependency's interface), or a call of a func value.
func dynamicTarget(mode string) string {
	if mode == "interface" {
		return "interface method call; the method is not a node of the graph"
	}
	return mode + " call; callee unknown"
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func position(n indexer.NodeInfo) string {
	if n.File == "" {
		return ""
	}
	if n.Line == 0 {
		return n.File
	}
	return n.File + ":" + strconv.Itoa(n.Line)
}

func graphPath(ctx context.Context, db *sql.DB, opts *GraphOptions) error {
	path, err := indexer.ImportPath(ctx, db, opts.Args[0], opts.Args[1])
	if errors.Is(err, indexer.ErrNoImportPath) {
		return failed("%v", err)
	}
	if err != nil {
		return err
	}
	switch opts.Format {
	case "json":
		return writeJSON(opts.IO.Out, struct {
			Path []string `json:"path"`
		}{path})
	case "dot":
		var edges [][3]string
		for i := 1; i < len(path); i++ {
			edges = append(edges, [3]string{path[i-1], path[i], "imports"})
		}
		return writeDot(opts.IO.Out, "import_path", edges)
	}
	t := table{header: []string{"STEP", "PACKAGE"}}
	for i, p := range path {
		t.rows = append(t.rows, []string{strconv.Itoa(i), p})
	}
	return t.writeText(opts.IO.Out)
}

func graphSymbols(ctx context.Context, db *sql.DB, opts *GraphOptions) error {
	if opts.Variant != "base" && opts.Variant != "all" {
		return usageErrorf("--variant %q is not base or all", opts.Variant)
	}
	syms, err := indexer.FileSymbols(ctx, db, opts.Args[0])
	if err != nil {
		return err
	}
	if opts.Variant == "base" {
		var others []string
		for _, s := range syms {
			if s.Variant != "base" && !slices.Contains(others, s.Variant) {
				others = append(others, s.Variant)
			}
		}
		syms = slices.DeleteFunc(syms, func(s indexer.FileSymbol) bool { return s.Variant != "base" })
		if len(syms) == 0 {
			return usageErrorf("%s has declarations only in %s package variants; give --variant all to show them", opts.Args[0], strings.Join(others, ", "))
		}
	}
	switch opts.Format {
	case "json":
		return writeJSON(opts.IO.Out, map[string]any{"symbols": nonNilSlice(syms)})
	case "dot":
		var edges [][3]string
		for _, s := range syms {
			edges = append(edges, [3]string{s.File, s.ID, "declares"})
		}
		return writeDot(opts.IO.Out, "symbols", edges)
	}
	// LINE is physical; LINE_DIRECTIVE is the position a //line directive
	// gives the same declaration ("-" when none applies, "unknown" when the
	// file changed since the index).
	t := table{header: []string{"LINE", "KIND", "ID", "ORIGIN", "VARIANT", "LINE_DIRECTIVE"}}
	unknown, directed := "", 0
	for _, s := range syms {
		d := "-"
		switch {
		case s.Directive != nil:
			d = s.Directive.String()
			directed++
		case s.DirectiveUnknown != "":
			d, unknown = "unknown", s.DirectiveUnknown
		}
		t.rows = append(t.rows, []string{strconv.Itoa(s.Line), s.Kind, s.ID, s.Origin, s.Variant, d})
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	switch {
	case unknown != "":
		_, err = fmt.Fprintf(opts.IO.Out, "\nLINE is the physical line in the file on disk; whether a //line directive applies is unknown: %s\n", unknown)
	case directed > 0:
		_, err = fmt.Fprintf(opts.IO.Out, "\nLINE is the physical line in the file on disk; %d declarations are under a //line directive, whose position is LINE_DIRECTIVE\n", directed)
	}
	return err
}

func graphErrors(ctx context.Context, db *sql.DB, opts *GraphOptions) error {
	rep, err := indexer.LoadErrors(ctx, db, opts.Package)
	if err != nil {
		return err
	}
	if opts.Format == "json" {
		return writeJSON(opts.IO.Out, rep)
	}
	cov := coverageFigure(rep.Coverage, rep.PackagesOK, rep.PackagesMatched)
	if rep.PackagesOK != rep.PackagesMatched {
		cov += fmt.Sprintf(": %d of %d matched packages loaded and type-checked without errors", rep.PackagesOK, rep.PackagesMatched)
		if rep.UnmatchedPatterns > 0 {
			cov += fmt.Sprintf(" (the %d count %s that matched no package)", rep.PackagesMatched,
				plural(rep.UnmatchedPatterns, "pattern"))
		}
		if len(rep.PackagesExcluded) > 0 {
			cov += fmt.Sprintf(" (%d excluded by the build context, never analysed: %s)", len(rep.PackagesExcluded),
				strings.Join(rep.PackagesExcluded, ", "))
		}
	}
	// Packages whose types may be incomplete though they report nothing:
	// without this line "no load errors" would read as fully checked.
	illTyped := ""
	if len(rep.IllTypedWithoutErrors) > 0 {
		illTyped = fmt.Sprintf("ill-typed without errors of their own (a package they import has errors): %s\n", strings.Join(rep.IllTypedWithoutErrors, ", "))
	}
	if len(rep.Errors) == 0 {
		if opts.Package != "" {
			_, err := fmt.Fprintf(opts.IO.Out, "no load errors recorded for %s (coverage of the snapshot %s)\n%s", opts.Package, cov, illTyped)
			return err
		}
		_, err := fmt.Fprintf(opts.IO.Out, "no load errors recorded (coverage %s)\n%s", cov, illTyped)
		return err
	}
	t := table{header: []string{"PACKAGE", "KIND", "POSITION", "MESSAGE"}}
	// Errors without a package row belong to what the index did not index:
	// a dependency that failed, a pattern that matched nothing, a test main.
	indexed, other := map[string]bool{}, map[string]bool{}
	for _, e := range rep.Errors {
		if e.PackageID != "" {
			indexed[e.Package] = true
		} else {
			other[e.Package] = true
		}
		t.rows = append(t.rows, []string{e.Package, e.Kind, loadErrorPosition(e), oneLineMessage(e.Message)})
	}
	if err := t.writeText(opts.IO.Out); err != nil {
		return err
	}
	where := plural(len(indexed), "package")
	if len(other) > 0 {
		where = fmt.Sprintf("%s of the snapshot and %d not indexed (dependencies that failed, patterns that matched nothing, "+
			"packages the build context excluded, test mains)", where, len(other))
	}
	_, err = fmt.Fprintf(opts.IO.Out, "\n%s in %s; coverage of the snapshot %s\n%s",
		plural(len(rep.Errors), "load error"), where, cov, illTyped)
	return err
}

// coverageFigure formats a coverage ratio ok/matched to 3 significant
// digits, rounding down: a snapshot with a package that did not load never
// reads "1" (1999 of 2000 is 0.999, not 1).
func coverageFigure(c float64, ok, matched int) string {
	if ok < matched {
		return strconv.FormatFloat(math.Floor(c*1000)/1000, 'g', 3, 64)
	}
	return strconv.FormatFloat(c, 'g', 3, 64)
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// loadErrorPosition is file:line:col, as much of it as is known, or "-".
func loadErrorPosition(e indexer.LoadError) string {
	switch {
	case e.File == "":
		return "-"
	case e.Line == 0:
		return e.File
	case e.Col == 0:
		return e.File + ":" + strconv.Itoa(e.Line)
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Col)
}

// writeDot writes a Graphviz digraph; each edge is (from, to, label).
func writeDot(w io.Writer, name string, edges [][3]string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n  rankdir=LR;\n  node [shape=box];\n", strconv.Quote(name))
	for _, e := range edges {
		fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", strconv.Quote(e[0]), strconv.Quote(e[1]), strconv.Quote(e[2]))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
