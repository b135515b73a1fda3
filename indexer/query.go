package indexer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrSymbolNotFound is returned (wrapped, naming the symbol) when no node
// matches a symbol.
var ErrSymbolNotFound = errors.New("indexer: no such symbol in the graph")

// ErrNoImportPath is returned (wrapped, naming both packages) when no chain
// of imports leads from one package to the other.
var ErrNoImportPath = errors.New("indexer: no import path")

// AmbiguousSymbolError lists the nodes a symbol matches when it matches more
// than one.
type AmbiguousSymbolError struct {
	Symbol     string
	Candidates []string
	// Package is set when Symbol names a package (the end of an import
	// path, ImportPath) rather than a declaration.
	Package bool
}

func (e *AmbiguousSymbolError) Error() string {
	shown := e.Candidates
	if len(shown) > 8 {
		shown = shown[:8]
	}
	what, fix := "symbol", "give a full node id"
	if e.Package {
		what, fix = "package", "give more of the import path, or a full one"
	}
	return fmt.Sprintf("%s %q matches %d nodes (%s%s); %s", what, e.Symbol, len(e.Candidates),
		strings.Join(shown, ", "), map[bool]string{true: ", ...", false: ""}[len(e.Candidates) > 8], fix)
}

// NodeInfo is a node as graph queries show it.
type NodeInfo struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Origin string `json:"origin"`
	// File is the file's path relative to its module root (absolute when
	// outside it); "" for nodes without a file.
	File string `json:"file,omitempty"`
	// Line is the 1-based physical start line; 0 when unknown.
	Line int `json:"line,omitempty"`
}

// Relation is one edge with its endpoints described. The graph stores a
// call edge as a relation between declarations, not per call: it has no
// call position, and Src.File and Src.Line are where the caller is declared.
type Relation struct {
	Src     NodeInfo `json:"src"`
	Dst     NodeInfo `json:"dst"`
	Kind    string   `json:"kind"`
	Variant string   `json:"variant"`
}

// DynamicCall is a dynamic call site without a known target.
type DynamicCall struct {
	// Src is the declared function or method the call is in; Src.Line is
	// the line of its declaration, not of the call.
	Src       NodeInfo `json:"src"`
	Mode      string   `json:"mode"`
	Expr      string   `json:"expr"`
	Signature string   `json:"signature,omitempty"`
	// CallFile, CallLine and CallCol are the physical position of the
	// call's opening parenthesis, as dynamic_calls stores it (CallFile as
	// NodeInfo.File; 1-based line, 1-based byte column).
	CallFile string `json:"call_file"`
	CallLine int    `json:"call_line"`
	CallCol  int    `json:"call_col"`
	// Variant is the package variant of Src's package.
	Variant string `json:"variant"`
}

// ResolveSymbol finds the node a user's symbol names: an exact node id;
// else "import/path.Name", "import/path.Type.Method", "import/path.Iface.Method"
// or an import path (base variants, tried as func:, method:, imethod:,
// type:, pkg:); else a unique node whose id ends with "/"+symbol or
// "."+symbol among functions, methods, types and packages of base variants,
// or, when none does, among their closures ("F$1") and fields ("T.f").
// Every comparison is exact and case-sensitive, as Go identifiers are: no
// character of symbol is a wildcard, so Command.Execute never names
// Command.execute. Errors: ErrSymbolNotFound (wrapped); *AmbiguousSymbolError.
func ResolveSymbol(ctx context.Context, db *sql.DB, symbol string) (string, error) {
	if symbol == "" {
		return "", fmt.Errorf("%w: empty symbol", ErrSymbolNotFound)
	}
	for _, id := range []string{symbol, "func:" + symbol, "method:" + symbol, "imethod:" + symbol, "type:" + symbol, "pkg:" + symbol} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM nodes WHERE id = ?", id).Scan(&n); err != nil {
			return "", fmt.Errorf("indexer: resolve %q: %w", symbol, err)
		}
		if n == 1 {
			return id, nil
		}
	}
	// Declarations first; closures and fields only when no declaration
	// ends so (a type and the fields named like it would otherwise make
	// every short type name ambiguous).
	ids, err := symbolsEndingIn(ctx, db, symbol, "'func', 'method', 'interface_method', 'type', 'package'")
	if err == nil && len(ids) == 0 {
		ids, err = symbolsEndingIn(ctx, db, symbol, "'closure', 'field'")
	}
	if err != nil {
		return "", fmt.Errorf("indexer: resolve %q: %w", symbol, err)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%w: %q", ErrSymbolNotFound, symbol)
	case 1:
		return ids[0], nil
	}
	return "", &AmbiguousSymbolError{Symbol: symbol, Candidates: ids}
}

// symbolsEndingIn returns the ids of the nodes of the given kinds (an SQL
// list of quoted literals, never user input) of base package variants whose
// id ends in "/"+symbol or "."+symbol, exactly and case-sensitively, sorted.
func symbolsEndingIn(ctx context.Context, db *sql.DB, symbol, kinds string) ([]string, error) {
	// substr with a negative start counts characters from the right, as
	// length does, and = compares bytes (the columns have no collation).
	rows, err := db.QueryContext(ctx, `SELECT id FROM nodes WHERE kind IN (`+kinds+`)
		AND instr(id, ' [') = 0 AND substr(id, -length(?1) - 1) IN ('/' || ?1, '.' || ?1) ORDER BY id`, symbol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

const nodeInfoCols = `n.id, n.kind, coalesce(n.name, ''), n.origin, coalesce(f.rel_path, f.path, ''), coalesce(n.start_line, 0)`

func scanNodeInfo(dst *NodeInfo) []any {
	return []any{&dst.ID, &dst.Kind, &dst.Name, &dst.Origin, &dst.File, &dst.Line}
}

// Node returns the node id as graph queries show it. Errors:
// ErrSymbolNotFound (wrapped) when the graph has no node id; a wrapped
// SQLite error.
func Node(ctx context.Context, db *sql.DB, id string) (NodeInfo, error) {
	var n NodeInfo
	err := db.QueryRowContext(ctx, `SELECT `+nodeInfoCols+` FROM nodes n LEFT JOIN files f ON f.id = n.file_id WHERE n.id = ?`, id).
		Scan(scanNodeInfo(&n)...)
	if errors.Is(err, sql.ErrNoRows) {
		return NodeInfo{}, fmt.Errorf("%w: %q", ErrSymbolNotFound, id)
	}
	if err != nil {
		return NodeInfo{}, fmt.Errorf("indexer: node %s: %w", id, err)
	}
	return n, nil
}

// TestVariantID returns the id of the same declaration in the test
// variant of id's package ("p [p.test]", the package compiled with its
// _test.go files, which the external test package p_test imports too): a
// separate node, whose callers include the tests. It returns "" when id is
// not declared in a base package or the test variant was not indexed
// (--tests=false, or a package without tests).
func TestVariantID(ctx context.Context, db *sql.DB, id string) (string, error) {
	var path, variant string
	err := db.QueryRowContext(ctx, `SELECT p.import_path, p.variant FROM nodes n JOIN packages p ON p.id = n.package_id
		WHERE n.id = ?`, id).Scan(&path, &variant)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("indexer: package of %s: %w", id, err)
	}
	kind, rest, ok := strings.Cut(id, ":")
	if variant != "base" || !ok || !strings.HasPrefix(rest, path) {
		return "", nil
	}
	cand := kind + ":" + path + " [" + path + ".test]" + rest[len(path):]
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM nodes WHERE id = ?`, cand).Scan(&n); err != nil {
		return "", fmt.Errorf("indexer: test variant of %s: %w", id, err)
	}
	if n == 0 {
		return "", nil
	}
	return cand, nil
}

// Callers returns the static and dynamic call edges into id (calls,
// calls_dynamic), sorted by caller.
func Callers(ctx context.Context, db *sql.DB, id string) ([]Relation, error) {
	return relations(ctx, db, id, "dst", "src")
}

// Callees returns the call edges out of id (calls, calls_dynamic) sorted by
// callee, and the dynamic call sites in id whose target is unknown.
func Callees(ctx context.Context, db *sql.DB, id string) ([]Relation, []DynamicCall, error) {
	rels, err := relations(ctx, db, id, "src", "dst")
	if err != nil {
		return nil, nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT `+nodeInfoCols+`, d.mode, d.expr, coalesce(d.signature, ''),
		coalesce(cf.rel_path, cf.path, ''), d.line, d.col, d.variant
		FROM dynamic_calls d JOIN nodes n ON n.id = d.src LEFT JOIN files f ON f.id = n.file_id
		LEFT JOIN files cf ON cf.id = d.file_id
		WHERE d.src = ? AND d.target IS NULL ORDER BY d.seq`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("indexer: callees of %s: %w", id, err)
	}
	defer rows.Close()
	var dyn []DynamicCall
	for rows.Next() {
		var d DynamicCall
		if err := rows.Scan(append(scanNodeInfo(&d.Src), &d.Mode, &d.Expr, &d.Signature, &d.CallFile, &d.CallLine, &d.CallCol, &d.Variant)...); err != nil {
			return nil, nil, fmt.Errorf("indexer: callees of %s: %w", id, err)
		}
		dyn = append(dyn, d)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("indexer: callees of %s: %w", id, err)
	}
	return rels, dyn, nil
}

func relations(ctx context.Context, db *sql.DB, id, self, other string) ([]Relation, error) {
	q := fmt.Sprintf(`SELECT e.kind, e.variant, %s, %s
		FROM edges e
		JOIN nodes n ON n.id = e.src LEFT JOIN files f ON f.id = n.file_id
		JOIN nodes n2 ON n2.id = e.dst LEFT JOIN files f2 ON f2.id = n2.file_id
		WHERE e.%s = ? AND e.kind IN ('calls', 'calls_dynamic') ORDER BY e.%s, e.kind`,
		nodeInfoCols, strings.NewReplacer("n.", "n2.", "f.", "f2.").Replace(nodeInfoCols), self, other)
	rows, err := db.QueryContext(ctx, q, id)
	if err != nil {
		return nil, fmt.Errorf("indexer: relations of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Relation
	for rows.Next() {
		var r Relation
		if err := rows.Scan(append(append([]any{&r.Kind, &r.Variant}, scanNodeInfo(&r.Src)...), scanNodeInfo(&r.Dst)...)...); err != nil {
			return nil, fmt.Errorf("indexer: relations of %s: %w", id, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("indexer: relations of %s: %w", id, err)
	}
	return out, nil
}

// ImportPath returns a shortest chain of package node ids from the package
// from to the package to, following imports edges. from and to are import
// paths, package node ids, or the last elements of one base package's
// import path; an import path names the base variant. Errors:
// ErrSymbolNotFound (wrapped) for an unknown package; *AmbiguousSymbolError
// for an import path end that several packages share; ErrNoImportPath
// (wrapped) when to is not reachable from from.
func ImportPath(ctx context.Context, db *sql.DB, from, to string) ([]string, error) {
	src, err := packageNode(ctx, db, from)
	if err != nil {
		return nil, err
	}
	dst, err := packageNode(ctx, db, to)
	if err != nil {
		return nil, err
	}
	adj := map[string][]string{}
	rows, err := db.QueryContext(ctx, "SELECT src, dst FROM edges WHERE kind = 'imports' ORDER BY src, dst")
	if err != nil {
		return nil, fmt.Errorf("indexer: import graph: %w", err)
	}
	for rows.Next() {
		var s, d string
		if err := rows.Scan(&s, &d); err != nil {
			rows.Close()
			return nil, fmt.Errorf("indexer: import graph: %w", err)
		}
		adj[s] = append(adj[s], d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("indexer: import graph: %w", err)
	}
	prev := map[string]string{src: ""}
	queue := []string{src}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if v == dst {
			var path []string
			for ; v != ""; v = prev[v] {
				path = append(path, v)
			}
			slices.Reverse(path)
			return path, nil
		}
		for _, w := range adj[v] {
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil, fmt.Errorf("%w from %s to %s", ErrNoImportPath, src, dst)
}

// packageNode resolves a package argument of ImportPath: a package node
// id, an import path (its base variant), or the end of one import path,
// whole path elements only ("lsp/cache" for golang.org/x/tools/gopls/
// internal/lsp/cache), when it ends exactly one base package's import path
// (ErrSymbolNotFound wrapped when none, *AmbiguousSymbolError when several).
func packageNode(ctx context.Context, db *sql.DB, name string) (string, error) {
	for _, id := range []string{name, "pkg:" + name} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM nodes WHERE id = ? AND kind = 'package'", id).Scan(&n); err != nil {
			return "", fmt.Errorf("indexer: resolve package %q: %w", name, err)
		}
		if n == 1 {
			return id, nil
		}
	}
	if name != "" && !strings.HasPrefix(name, "/") && !strings.Contains(name, " ") {
		var ids []string
		rows, err := db.QueryContext(ctx, `SELECT id FROM nodes WHERE kind = 'package' AND instr(id, ' [') = 0
			AND substr(id, -length(?1) - 1) = '/' || ?1 ORDER BY id`, name)
		if err != nil {
			return "", fmt.Errorf("indexer: resolve package %q: %w", name, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return "", fmt.Errorf("indexer: resolve package %q: %w", name, err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return "", fmt.Errorf("indexer: resolve package %q: %w", name, err)
		}
		switch len(ids) {
		case 1:
			return ids[0], nil
		case 0:
		default:
			return "", &AmbiguousSymbolError{Symbol: name, Candidates: ids, Package: true}
		}
	}
	return "", fmt.Errorf("%w: package %q", ErrSymbolNotFound, name)
}

// AmbiguousFileError lists the indexed files a file argument matches when it
// matches more than one: their paths relative to the module root, or their
// absolute paths when those are not unique (files of a workspace's modules).
type AmbiguousFileError struct {
	File       string
	Candidates []string
}

func (e *AmbiguousFileError) Error() string {
	shown := e.Candidates
	if len(shown) > 8 {
		shown = shown[:8]
	}
	return fmt.Sprintf("file %q matches %d indexed files (%s%s); give a longer path suffix", e.File, len(e.Candidates),
		strings.Join(shown, ", "), map[bool]string{true: ", ...", false: ""}[len(e.Candidates) > 8])
}

// FileSymbol is a declaration of a file in one package variant: a file
// compiled by several builds of its package (base and test) has one
// FileSymbol per build for each declaration, with different node ids.
type FileSymbol struct {
	NodeInfo
	// Variant is the variant of the declaration's package (packages.variant):
	// base, test (the package with its _test.go files), xtest (the external
	// test package) or test_dependency.
	Variant string `json:"variant"`
	// Col is the 1-based physical start column (bytes); 0 when unknown.
	Col int `json:"col,omitempty"`
	// Directive is the logical position of the declaration's start under
	// a //line directive of the file (go/token's
	// FileSet.PositionFor(pos, true)), beside the physical File and Line;
	// nil when no directive applies there, or when DirectiveUnknown says
	// why it could not be derived.
	Directive *DirectivePosition `json:"directive_position"`
	// DirectiveUnknown is set when the file on disk could not be read or
	// no longer has the SHA-256 the snapshot recorded: whether a //line
	// directive applies is then unknown (Directive is nil for that reason,
	// not because there is none).
	DirectiveUnknown string `json:"directive_unknown,omitempty"`
}

// DirectivePosition is a position a //line directive assigns: the file it
// names (resolved against the file's directory when relative, as
// go/scanner does, and then shown relative to the module root like
// NodeInfo.File when it lies beside the file) and the 1-based line and
// column (0 when the directive gives no column).
type DirectivePosition struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col,omitempty"`
}

// String is "file:line" or "file:line:col".
func (p DirectivePosition) String() string {
	s := p.File + ":" + strconv.Itoa(p.Line)
	if p.Col > 0 {
		s += ":" + strconv.Itoa(p.Col)
	}
	return s
}

// lineDirectives sets each symbol's Directive from the bytes of the file
// at path, which must still have the SHA-256 the snapshot recorded (sum,
// hex); otherwise every symbol's DirectiveUnknown says why. The file is
// scanned by go/parser, whose scanner applies //line directives; a
// position is logical where PositionFor(pos, true) differs from the
// physical one.
func lineDirectives(path, sum string, syms []FileSymbol) {
	unknown := func(why string) {
		for i := range syms {
			syms[i].DirectiveUnknown = why
		}
	}
	src, err := os.ReadFile(path)
	if err != nil {
		unknown("the file could not be read: " + err.Error())
		return
	}
	if got := sha256.Sum256(src); sum == "" || hex.EncodeToString(got[:]) != sum {
		unknown("the file changed since the index (its SHA-256 differs from the snapshot's)")
		return
	}
	if !bytes.Contains(src, []byte("//line ")) && !bytes.Contains(src, []byte("/*line ")) {
		return
	}
	fset := token.NewFileSet()
	// Errors are ignored: the scanner applies directives up to them, and a
	// file with syntax errors was indexed as far as it parsed.
	_, _ = parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	var tf *token.File
	fset.Iterate(func(f *token.File) bool { tf = f; return false })
	if tf == nil {
		unknown("the file could not be scanned")
		return
	}
	for i := range syms {
		s := &syms[i]
		if s.Line < 1 || s.Line > tf.LineCount() {
			continue
		}
		col := max(s.Col, 1)
		off := tf.Offset(tf.LineStart(s.Line)) + col - 1
		if off > tf.Size() {
			continue
		}
		pos := tf.Pos(off)
		phys, logical := fset.PositionFor(pos, false), fset.PositionFor(pos, true)
		if logical.Filename != phys.Filename || logical.Line != phys.Line || logical.Column != phys.Column {
			name := logical.Filename
			// A directive naming a file beside this one is shown the way
			// File is (relative to the module root).
			if r, err := filepath.Rel(filepath.Dir(path), name); err == nil && filepath.IsAbs(name) && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				name = filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(s.File)), r))
			}
			s.Directive = &DirectivePosition{File: name, Line: logical.Line, Col: logical.Column}
		}
	}
}

// FileSymbols returns the declarations (types, functions, methods, fields,
// interface methods, closures) of the file that file names, in every
// package variant that compiles it, sorted by variant then position.
// file is an absolute path or a path relative to the module root
// (files.rel_path); else a path suffix, whole names only ("main.go",
// "a/main.go"), of exactly one indexed file. Errors: ErrSymbolNotFound
// (wrapped) when no indexed file matches or the file has no declarations;
// *AmbiguousFileError when a suffix matches several files.
//
// Positions are physical (the line and column in the file on disk, as
// the graph stores them); a declaration under a //line directive also
// gets the logical position the directive gives (FileSymbol.Directive),
// derived here from the file's bytes, which must still hash to the
// snapshot's SHA-256 (else FileSymbol.DirectiveUnknown says so).
func FileSymbols(ctx context.Context, db *sql.DB, file string) ([]FileSymbol, error) {
	path, err := matchFile(ctx, db, file)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT `+nodeInfoCols+`, coalesce(p.variant, ''), coalesce(n.start_col, 0), coalesce(f.sha256, '') FROM nodes n JOIN files f ON f.id = n.file_id
		LEFT JOIN packages p ON p.id = n.package_id
		WHERE n.kind NOT IN ('file', 'package', 'module') AND f.path = ?
		ORDER BY n.package_id, n.start_line, n.start_col, n.id`, path)
	if err != nil {
		return nil, fmt.Errorf("indexer: symbols of %s: %w", file, err)
	}
	defer rows.Close()
	var out []FileSymbol
	var sum string
	for rows.Next() {
		var n FileSymbol
		if err := rows.Scan(append(scanNodeInfo(&n.NodeInfo), &n.Variant, &n.Col, &sum)...); err != nil {
			return nil, fmt.Errorf("indexer: symbols of %s: %w", file, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("indexer: symbols of %s: %w", file, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: indexed file %q has no declarations", ErrSymbolNotFound, file)
	}
	lineDirectives(path, sum, out)
	return out, nil
}

// matchFile returns files.path of the one indexed file that file names (see
// FileSymbols): an exact path or module-relative path wins over suffixes.
func matchFile(ctx context.Context, db *sql.DB, file string) (string, error) {
	type candidate struct{ path, rel string }
	abs, _ := filepath.Abs(file)
	want := filepath.ToSlash(filepath.Clean(file))
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT path, coalesce(rel_path, '') FROM files ORDER BY path")
	if err != nil {
		return "", fmt.Errorf("indexer: files matching %s: %w", file, err)
	}
	defer rows.Close()
	var exact, suffix []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.path, &c.rel); err != nil {
			return "", fmt.Errorf("indexer: files matching %s: %w", file, err)
		}
		switch {
		case file == "":
		case c.path == file || c.path == abs || (c.rel != "" && c.rel == want):
			exact = append(exact, c)
		case (c.rel != "" && strings.HasSuffix("/"+c.rel, "/"+want)) || strings.HasSuffix(filepath.ToSlash(c.path), "/"+want):
			suffix = append(suffix, c)
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("indexer: files matching %s: %w", file, err)
	}
	matches := exact
	if len(matches) == 0 {
		matches = suffix
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w: no indexed file %q (give an absolute path, a path relative to the module root, or a unique path suffix)", ErrSymbolNotFound, file)
	case 1:
		return matches[0].path, nil
	}
	names := make([]string, len(matches))
	for i, c := range matches {
		names[i] = c.rel
		if c.rel == "" {
			names[i] = c.path
		}
	}
	slices.Sort(names)
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		for i, c := range matches {
			names[i] = c.path
		}
		slices.Sort(names)
	}
	return "", &AmbiguousFileError{File: file, Candidates: names}
}
