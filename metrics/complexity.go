package metrics

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

const (
	mccabe1976   = "T. J. McCabe, \"A Complexity Measure\", IEEE Transactions on Software Engineering SE-2(4), 1976"
	campbell2017 = "G. Ann Campbell, \"Cognitive Complexity: A new way of measuring understandability\", SonarSource white paper, 2017 (version 1.2, 2018)"
)

// funcComplexity holds the complexity of one function or closure's syntax.
type funcComplexity struct {
	cyclomatic       int // the body without nested func literals
	cyclomaticFolded int // the body with nested func literals (gocyclo)
	cognitive        int // Campbell, nested func literals folded with nesting, recursion not included
}

// sourceSet is the parsed source of every indexed file, keyed by path, and
// the complexity of every function and closure found at a node's position.
type sourceSet struct {
	// byNode is the complexity of each func, method and closure node.
	byNode map[string]funcComplexity
	// missing says why a node has no complexity.
	missing map[string]gap
	// recovered says, for a node of byNode measured on the tree go/parser
	// recovered from a file with syntax errors, which file and error: its
	// inputs did not load cleanly.
	recovered map[string]string
}

// sourcesOnce parses the indexed files the first time a complexity metric
// asks (Compute asks before the descriptors run concurrently). Files are
// read, checked against their SHA-256 and parsed by in.parallelism()
// goroutines,
// or, when the indexer handed over the syntax trees it built from the bytes
// it hashed (FromGraph), measured from those trees;
// each file's result depends only on that file, so the set is the same
// whatever the number of goroutines.
func (in *Input) sourcesOnce(ctx context.Context) (*sourceSet, error) {
	if in.sources != nil {
		return in.sources, nil
	}
	byPath := map[string]map[srcPos][]string{}
	sums := map[string]string{}
	// files holds a file of each path, to name it in reasons.
	files := map[string]*File{}
	for _, n := range in.Nodes {
		if n.Kind != "func" && n.Kind != "method" && n.Kind != "closure" {
			continue
		}
		f, ok := in.Files[n.FileID]
		if !ok || n.StartLine == 0 {
			continue // dependencies and synthesized functions have no source here
		}
		if byPath[f.Path] == nil {
			byPath[f.Path] = map[srcPos][]string{}
		}
		k := srcPos{n.StartLine, n.StartCol}
		byPath[f.Path][k] = append(byPath[f.Path][k], n.ID)
		sums[f.Path] = f.SHA256
		if g := files[f.Path]; g == nil || f.ID < g.ID {
			files[f.Path] = f
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	results := make([]fileComplexity, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Pointer[string]
	for range min(in.parallelism(), len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(paths) || ctx.Err() != nil || panicked.Load() != nil {
					return
				}
				if msg := protect(func() {
					if src, ok := in.syntax[paths[i]]; ok {
						results[i] = measureSyntax(src.Fset, src.File, byPath[paths[i]])
					} else {
						results[i] = measureFile(paths[i], sums[paths[i]], byPath[paths[i]])
					}
				}); msg != "" {
					msg = fmt.Sprintf("%s (measuring %s)", msg, paths[i])
					panicked.CompareAndSwap(nil, &msg)
				}
			}
		}()
	}
	wg.Wait()
	if msg := panicked.Load(); msg != nil {
		return nil, fmt.Errorf("metrics: parse sources: internal error: %s", *msg)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("metrics: parse sources: %w", err)
	}
	s := &sourceSet{byNode: map[string]funcComplexity{}, missing: map[string]gap{}, recovered: map[string]string{}}
	for i, r := range results {
		maps.Copy(s.byNode, r.byNode)
		for id, reason := range r.missing {
			s.missing[id] = gap{reason, 0} // the file could not be read, or changed
		}
		if len(r.noBody) == 0 && r.syntaxErr == nil {
			continue
		}
		// Reasons name the file as the rest of assay does (module-relative).
		name := in.relPath(files[paths[i]])
		for id, k := range r.noBody {
			if r.syntaxErr != nil {
				s.missing[id] = gap{fmt.Sprintf("the file %s has syntax errors (the first at %s): the parser recovered no body for this function at %d:%d",
					name, firstSyntaxError(r.syntaxErr), k.line, k.col), 0}
			} else {
				// The file loaded whole: nothing is missing, there is no body.
				s.missing[id] = gap{fmt.Sprintf("no function body at %s:%d:%d (a declaration without body, or positions from //line directives)", name, k.line, k.col), 1}
			}
		}
		if r.syntaxErr != nil {
			for id := range r.byNode {
				s.recovered[id] = fmt.Sprintf("the file %s has syntax errors (the first at %s): measured on the tree the parser recovered, which may not be the function as written",
					name, firstSyntaxError(r.syntaxErr))
			}
		}
	}
	in.sources = s
	in.syntax = nil
	return s, nil
}

// gap is why a node has no complexity, and the coverage of that
// unavailable value: 0 when its source did not load, 1 when it did and has
// no body to measure.
type gap struct {
	reason   string
	coverage float64
}

// srcPos is a physical 1-based line and byte column.
type srcPos struct{ line, col int }

// fileComplexity is one file's part of a sourceSet.
type fileComplexity struct {
	byNode  map[string]funcComplexity
	missing map[string]string
	// noBody holds the nodes found no body for, at their positions.
	noBody map[string]srcPos
	// syntaxErr is the parse error (a scanner.ErrorList) of a file with
	// syntax errors, whose byNode come from the tree the parser recovered.
	syntaxErr error
}

// measureFile reads path, checks it against sum (SHA-256 hex) and measures
// the function bodies starting at the positions in want (node ids by
// position). A node whose file cannot be read or has changed is in missing
// with the reason; one that has no body at its position is in noBody. A
// file with syntax errors is measured on the tree go/parser recovers, and
// its error kept in syntaxErr.
func measureFile(path, sum string, want map[srcPos][]string) fileComplexity {
	r := fileComplexity{byNode: map[string]funcComplexity{}, missing: map[string]string{}}
	fail := func(reason string) {
		for _, ids := range want {
			for _, id := range ids {
				r.missing[id] = reason
			}
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fail(fmt.Sprintf("source unreadable: %v", err))
		return r
	}
	got := sha256.Sum256(data)
	if hex.EncodeToString(got[:]) != sum {
		fail("the source file changed since the snapshot (SHA-256 differs); re-index")
		return r
	}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, data, parser.SkipObjectResolution)
	if file == nil {
		fail(fmt.Sprintf("source unparsable: %v", err))
		return r
	}
	r = measureSyntax(fset, file, want)
	r.syntaxErr = err
	return r
}

// measureSyntax measures the function bodies of file (positions in fset,
// read physically) starting at the positions in want, as measureFile does
// for a file it parsed.
func measureSyntax(fset *token.FileSet, file *ast.File, want map[srcPos][]string) fileComplexity {
	r := fileComplexity{byNode: map[string]funcComplexity{}, missing: map[string]string{}, noBody: map[string]srcPos{}}
	found := map[srcPos]bool{}
	record := func(n ast.Node, c funcComplexity) {
		p := fset.PositionFor(n.Pos(), false)
		k := srcPos{p.Line, p.Column}
		for _, id := range want[k] {
			r.byNode[id] = c
		}
		found[k] = true
	}
	// Each body is walked once for its decision points (measure), nested
	// func literals measured on the way; the file's walk stops at bodies.
	// A literal's signature (an array length may hold a literal) folds
	// into the function around it, as a walk of that function's body
	// counts it.
	var measure func(n ast.Node, body *ast.BlockStmt) int
	var decisionsIn func(n ast.Node) (own, nested int)
	decisionsIn = func(n ast.Node) (own, nested int) {
		ast.Inspect(n, func(x ast.Node) bool {
			if lit, ok := x.(*ast.FuncLit); ok {
				sigOwn, sigNested := decisionsIn(lit.Type)
				nested += sigOwn + sigNested + measure(lit, lit.Body)
				return false
			}
			own += decisionPoint(x)
			return true
		})
		return own, nested
	}
	measure = func(n ast.Node, body *ast.BlockStmt) (folded int) {
		own, nested := decisionsIn(body)
		c := funcComplexity{cyclomatic: 1 + own, cyclomaticFolded: 1 + own + nested}
		cg := &cognitiveCounter{counted: map[ast.Expr]bool{}}
		cg.walk(body, 0)
		c.cognitive = cg.total
		record(n, c)
		return own + nested
	}
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Recv != nil {
				ast.Inspect(n.Recv, visit)
			}
			ast.Inspect(n.Type, visit)
			if n.Body != nil {
				measure(n, n.Body)
			}
			return false
		case *ast.FuncLit:
			ast.Inspect(n.Type, visit)
			measure(n, n.Body)
			return false
		}
		return true
	}
	ast.Inspect(file, visit)
	for k, ids := range want {
		if !found[k] {
			for _, id := range ids {
				r.noBody[id] = k
			}
		}
	}
	return r
}

// firstSyntaxError renders the first error of a parse error as
// "line:col: message".
func firstSyntaxError(err error) string {
	var list scanner.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return fmt.Sprintf("%d:%d: %s", list[0].Pos.Line, list[0].Pos.Column, list[0].Msg)
	}
	return err.Error()
}

// decisionPoint is 1 for each of McCabe's decision points as gocyclo
// counts them (if, for, range, each non-default case of a switch or
// select, each && or ||), 0 for any other node.
func decisionPoint(n ast.Node) int {
	switch n := n.(type) {
	case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
		return 1
	case *ast.CaseClause:
		if n.List != nil {
			return 1
		}
	case *ast.CommClause:
		if n.Comm != nil {
			return 1
		}
	case *ast.BinaryExpr:
		if n.Op == token.LAND || n.Op == token.LOR {
			return 1
		}
	}
	return 0
}

// cognitiveCounter applies Campbell's rules (structural increments with
// nesting, hybrid else/else-if increments, one increment per run of like
// boolean operators, labeled jumps); recursion is added by the metric from
// the call graph.
type cognitiveCounter struct {
	total   int
	counted map[ast.Expr]bool
}

func (c *cognitiveCounter) walk(n ast.Node, nesting int) {
	if n == nil {
		return
	}
	ast.Inspect(n, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.IfStmt:
			c.total += 1 + nesting
			c.ifRest(x, nesting)
			return false
		case *ast.SwitchStmt:
			c.total += 1 + nesting
			c.walkAll(nesting, x.Init, x.Tag)
			c.walk(x.Body, nesting+1)
			return false
		case *ast.TypeSwitchStmt:
			c.total += 1 + nesting
			c.walkAll(nesting, x.Init, x.Assign)
			c.walk(x.Body, nesting+1)
			return false
		case *ast.SelectStmt:
			c.total += 1 + nesting
			c.walk(x.Body, nesting+1)
			return false
		case *ast.ForStmt:
			c.total += 1 + nesting
			c.walkAll(nesting, x.Init, x.Cond, x.Post)
			c.walk(x.Body, nesting+1)
			return false
		case *ast.RangeStmt:
			c.total += 1 + nesting
			c.walkAll(nesting, x.Key, x.Value, x.X)
			c.walk(x.Body, nesting+1)
			return false
		case *ast.FuncLit:
			c.walk(x.Type, nesting)
			c.walk(x.Body, nesting+1)
			return false
		case *ast.BranchStmt:
			if x.Label != nil {
				c.total++
			}
		case *ast.BinaryExpr:
			if (x.Op == token.LAND || x.Op == token.LOR) && !c.counted[x] {
				var ops []token.Token
				c.logicalOps(x, &ops)
				var last token.Token
				for _, op := range ops {
					if op != last {
						c.total++
						last = op
					}
				}
			}
		}
		return true
	})
}

func (c *cognitiveCounter) walkAll(nesting int, nodes ...ast.Node) {
	for _, n := range nodes {
		if n != nil {
			c.walk(n, nesting)
		}
	}
}

// ifRest scores what follows an if's own increment: its init and condition
// at the if's nesting, its body one deeper, and an else-if chain or else
// block, each of which scores one (no nesting increment) with its body one
// deeper than the first if.
func (c *cognitiveCounter) ifRest(x *ast.IfStmt, nesting int) {
	c.walkAll(nesting, x.Init, x.Cond)
	c.walk(x.Body, nesting+1)
	switch e := x.Else.(type) {
	case *ast.IfStmt:
		c.total++
		c.ifRest(e, nesting)
	case *ast.BlockStmt:
		c.total++
		c.walk(e, nesting+1)
	}
}

// logicalOps flattens the && and || operators of a boolean expression in
// source order, through parentheses and other binary operators, marking
// every binary expression visited as counted.
func (c *cognitiveCounter) logicalOps(e ast.Expr, ops *[]token.Token) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		c.logicalOps(e.X, ops)
	case *ast.BinaryExpr:
		c.counted[e] = true
		c.logicalOps(e.X, ops)
		if e.Op == token.LAND || e.Op == token.LOR {
			*ops = append(*ops, e.Op)
		}
		c.logicalOps(e.Y, ops)
	}
}

// complexitySubjects lists the nodes a complexity metric measures: declared
// functions and methods, and closures when withClosures.
func (in *Input) complexitySubjects(withClosures bool) []string {
	var ids []string
	for _, f := range in.Funcs {
		ids = append(ids, f.ID)
	}
	if withClosures {
		ids = append(ids, in.Closures...)
	}
	slices.Sort(ids)
	return ids
}

// syntaxErrorChoice is how the complexity metrics treat a file with syntax
// errors.
const syntaxErrorChoice = "A function in a file with syntax errors is measured on the tree go/parser recovers from the file, " +
	"with coverage 0 and a reason naming the file and its first error (the recovery may not be the function as written: " +
	"an unclosed brace can fold the next function into this one); a function the parser recovered no body for is unavailable, saying so."

// syntaxCoverage is the Coverage of a complexity metric measured on syntax
// alone; unavailableSourceCoverage ends every complexity metric's.
const (
	syntaxCoverage = "the function's source file: 1 when it parsed without syntax errors, else 0; load or type errors do not lower it " +
		"(the syntax alone is measured). " + unavailableSourceCoverage
	unavailableSourceCoverage = "An unavailable value has 1 when the file loaded whole and there is no body to measure " +
		"(a declaration without body), 0 when the file could not be read, changed since the snapshot or did not parse."
)

// complexityMetric sets d.Compute to the complexity of every declared
// function (and closure, withClosures) given by value. usesCallGraph says
// that value also rests on the static call graph of a declared function's
// package (cognitive's recursion increment): its coverage is then 0 when
// that package did not load cleanly.
func complexityMetric(d *Descriptor, withClosures, usesCallGraph bool, value func(in *Input, id string, c funcComplexity) float64) *Descriptor {
	d.Choices = append(d.Choices, syntaxErrorChoice)
	d.Compute = func(ctx context.Context, in *Input) ([]Value, error) {
		src, err := in.sourcesOnce(ctx)
		if err != nil {
			return nil, err
		}
		var out []Value
		for _, id := range in.complexitySubjects(withClosures) {
			var p *Package
			n := in.Nodes[id]
			if n != nil {
				p = in.Packages[n.PackageID]
			}
			c, ok := src.byNode[id]
			if !ok {
				g, ok := src.missing[id]
				if !ok {
					// No source of its own (cgo-synthesized): nothing failed to
					// load unless its package did.
					g = gap{"no source position recorded for this function", 1}
					if p != nil {
						g.coverage = okCoverage(p)
					}
				}
				out = append(out, d.unavailable(in, id, g.reason, g.coverage))
				continue
			}
			v := d.measured(in, id, value(in, id, c))
			if reason, ok := src.recovered[id]; ok {
				v.Reason, v.Coverage = reason, 0
			} else if p != nil && !p.OK {
				v.Reason = in.loadProblem(p) + "; the syntax was measured as written"
				if usesCallGraph && n.Kind != "closure" {
					v.Reason += ", the recursion increment on a static call graph that may be incomplete"
					v.Coverage = 0
				}
			}
			out = append(out, v)
		}
		return out, nil
	}
	return d
}

func cyclomatic() *Descriptor {
	return complexityMetric(&Descriptor{
		Name: "cyclomatic", Title: "Cyclomatic complexity", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method: Method{ID: "mccabe-ast", Version: 4}, Source: mccabe1976,
		Doc: "1 + the number of decision points of the function's own body: if, for, range, each non-default case " +
			"of a switch or type switch, each non-default clause of a select, each && and ||. A closure is measured " +
			"on its own and is not part of its enclosing function's value (see cyclomatic_folded).",
		Choices: []string{"Decision points are counted as gocyclo counts them, so the folded value is comparable.",
			"Functions declared without a body (assembly) have no value."},
		Limits:   []string{"Measured on syntax: a decision hidden in a called function or a table does not count."},
		Coverage: syntaxCoverage,
	}, true, false, func(_ *Input, _ string, c funcComplexity) float64 { return float64(c.cyclomatic) })
}

func cyclomaticFolded() *Descriptor {
	return complexityMetric(&Descriptor{
		Name: "cyclomatic_folded", Title: "Cyclomatic complexity, closures folded", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method: Method{ID: "mccabe-ast-folded", Version: 4}, Source: mccabe1976 + "; as reported by github.com/fzipp/gocyclo",
		Doc: "Cyclomatic complexity of a declared function or method with the decision points of every closure " +
			"inside it added, which is what gocyclo reports. Cross-checked against gocyclo (docs/metrics-crosscheck.md).",
		Choices:  []string{"Only declared functions and methods have a folded value; closures at package level (var f = func() {...}) are not measured."},
		Limits:   []string{"gocyclo reads every file of a directory, including files excluded by build tags, and honours //gocyclo:ignore; assay measures the files of the build context and ignores no function."},
		Coverage: syntaxCoverage,
	}, false, false, func(_ *Input, _ string, c funcComplexity) float64 { return float64(c.cyclomaticFolded) })
}

func cognitive() *Descriptor {
	d := &Descriptor{
		Name: "cognitive", Title: "Cognitive complexity", Kind: Measured, Scope: ScopeFunc, Integer: true,
		Method: Method{ID: "campbell-ast-callgraph", Version: 4}, Source: campbell2017,
		Doc: "Campbell's cognitive complexity: +1 for each if, else if, else, switch, select, for and range, plus " +
			"the nesting level for if, switch, select and loops; nesting grows inside those and inside closures; " +
			"+1 per run of like boolean operators (a && b && c || d scores 2); +1 for goto and labeled break or " +
			"continue; +1 for a function that takes part in a recursion cycle, direct or mutual (methods included), " +
			"found as a strongly connected component of the static call graph. A closure is also measured on its own " +
			"(from nesting 0, without the recursion increment).",
		Choices: []string{
			"Recursion comes from the indexer's static call graph (go/types resolution), so mutual recursion between methods counts; calls through interfaces or func values are dynamic and do not make a cycle.",
			"A switch scores once for the whole switch, not per case (Campbell).",
			"Closures inside a function add to its value with one more level of nesting, as gocognit does.",
		},
		Limits: []string{"gocognit -exact-recursion counts recursion within one package from its own resolution; assay's cycles are the same in every case compared so far (docs/metrics-crosscheck.md)."},
		Coverage: "the function's source file (1 when it parsed without syntax errors, else 0) and, for a declared function, " +
			"its package's static call graph, on which the recursion increment rests (0 when the package has load or type errors, " +
			"its own or through an import: a call left unresolved may hide a cycle). " + unavailableSourceCoverage,
	}
	return complexityMetric(d, true, true, func(in *Input, id string, c funcComplexity) float64 {
		v := c.cognitive
		if in.recursive()[id] {
			v++
		}
		return float64(v)
	})
}
