package oracle

import (
	"context"
	"fmt"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// VerdictForbiddenImport is the verdict for an artifact that uses an import (or, in Python, a
// builtin or dunder attribute) outside its spec's allowance. The artifact runs inside the driver's
// process, so anything that can touch files, the environment, the process or the interpreter could
// find the report path, write a report of its choosing and exit before the function is ever
// checked. A finite-domain spec's function is pure arithmetic: restricting what its source may
// reach, before anything runs, is what keeps the report the driver's own.
const VerdictForbiddenImport = "forbidden_import"

// DefaultImports returns the import allowance of the built-in specs, a new slice on every call: the
// math module, in both Go and Python. Nothing else is needed to compute a numeric function.
func DefaultImports() []string { return []string{"math"} }

// pythonForbiddenNames are the Python builtins through which source can reach files, code objects or
// the interpreter without an import statement.
var pythonForbiddenNames = []string{
	"__import__", "__builtins__", "__loader__", "__spec__", "breakpoint", "compile", "delattr", "eval", "exec",
	"exit", "getattr", "globals", "help", "input", "locals", "memoryview", "open", "quit", "setattr", "vars",
}

// allowedImports returns the spec's import allowance (DefaultImports when nil).
func (s Spec) allowedImports() []string {
	if s.Imports == nil {
		return DefaultImports()
	}
	return s.Imports
}

// goImportViolations lists what a parsed Go artifact may not contain: imports outside the spec's
// allowance (cgo's "C" included), package-level variables and init functions. The last two are
// state that outlives a call: a function that counts its calls can be right for exactly as many
// calls as the oracle makes and wrong afterwards, and no finite test tells. It is empty when the
// spec lifts the restriction (AnyImport).
func goImportViolations(spec Spec, f *ast.File) []string {
	if spec.AnyImport {
		return nil
	}
	allowed := spec.allowedImports()
	var bad []string
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || !slices.Contains(allowed, path) {
			bad = append(bad, "import "+imp.Path.Value)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok == token.VAR {
				for _, sp := range d.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						bad = append(bad, "package-level var "+n.Name)
					}
				}
			}
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" {
				bad = append(bad, "func init")
			}
		}
	}
	return bad
}

// pyRestrictChecker reads an artifact's source (never imports it) and prints one line per construct
// outside the allowance. It is an allow-list where it can be: attributes may only be read from an
// allowed module bound by an import (math.sqrt) — every other attribute is a way into frames,
// globals and the interpreter (a generator's gi_frame.f_back.f_globals reaches the driver); no name
// may contain "__"; the forbidden builtins are refused by name. State that outlives a call is
// refused too: module-level statements other than imports, function definitions, docstrings and
// constant assignments; global and nonlocal; default argument values that are not constants; class
// definitions. A syntax error prints nothing: the driver reports it as a crash.
const pyRestrictChecker = `import ast, sys
allowed = set(a for a in sys.argv[2].split(",") if a)
forbidden = set(a for a in sys.argv[3].split(",") if a)
with open(sys.argv[1], "rb") as f:
    src = f.read()
try:
    tree = ast.parse(src, "artifact")
except (SyntaxError, ValueError):
    sys.exit(0)
bad = []
modules = set()
def constant(v):
    if isinstance(v, ast.Constant):
        return True
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, (ast.USub, ast.UAdd)):
        return constant(v.operand)
    if isinstance(v, ast.Tuple):
        return all(constant(e) for e in v.elts)
    return False
for node in tree.body:
    line = getattr(node, "lineno", 0)
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)):
        continue
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        continue
    if isinstance(node, ast.Assign) and constant(node.value) and all(isinstance(t, ast.Name) for t in node.targets):
        continue
    if isinstance(node, ast.AnnAssign) and node.value is not None and constant(node.value) and isinstance(node.target, ast.Name):
        continue
    bad.append("line %d: module-level %s (state or code outside a function)" % (line, type(node).__name__))
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in allowed and "." not in alias.name:
                modules.add(alias.asname or alias.name)
for node in ast.walk(tree):
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name not in allowed:
                bad.append("line %d: import %s" % (line, alias.name))
    elif isinstance(node, ast.ImportFrom):
        if node.level or node.module not in allowed:
            bad.append("line %d: from %s%s import" % (line, "." * node.level, node.module or ""))
    elif isinstance(node, ast.Name) and (node.id in forbidden or "__" in node.id):
        bad.append("line %d: name %s" % (line, node.id))
    elif isinstance(node, ast.Attribute):
        if not (isinstance(node.value, ast.Name) and node.value.id in modules) or "__" in node.attr:
            bad.append("line %d: attribute .%s (only attributes of an allowed module may be read)" % (line, node.attr))
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        bad.append("line %d: %s statement (state kept across calls)" % (line, type(node).__name__.lower()))
    elif isinstance(node, ast.ClassDef):
        bad.append("line %d: class %s" % (line, node.name))
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        for d in list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]:
            if not constant(d):
                bad.append("line %d: default argument that is not a constant (state kept across calls)" % line)
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
`

// pythonImportViolations runs pyRestrictChecker on the artifact under the same bounded runner and
// interpreter as the driver. The returned verdict is "" when the check ran; otherwise it is the
// verdict the check itself ended in (cancelled, timeout, unavailable) with a detail.
func pythonImportViolations(ctx context.Context, spec Spec, py Python, env []string, artifactPath, root string, opts Options) (bad []string, verdict, detail string) {
	if spec.AnyImport {
		return nil, "", ""
	}
	out := filepath.Join(root, "restrict.log")
	run, err := Run(ctx, Command{
		Path: py.Path, Args: []string{"-I", "-S", "-B", "-c", pyRestrictChecker, artifactPath,
			strings.Join(spec.allowedImports(), ","), strings.Join(pythonForbiddenNames, ",")},
		Dir: root, Env: env, OutputPath: out, Deadline: opts.Deadline, Cleanup: opts.Cleanup,
	})
	switch {
	case err != nil:
		return nil, VerdictUnavailable, fmt.Sprintf("run the import check: %v", err)
	case run.Cancelled:
		return nil, VerdictCancelled, ""
	case run.TimedOut:
		return nil, VerdictTimeout, "the import check exceeded its deadline"
	case run.ExitCode != 0 && run.ExitCode != 1:
		return nil, VerdictUnavailable, "the import check failed: " + summarizeOutput(out)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, VerdictUnavailable, fmt.Sprintf("read the import check's output: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line != "" {
			bad = append(bad, line)
		}
	}
	if run.ExitCode == 1 && len(bad) == 0 {
		return nil, VerdictUnavailable, "the import check failed without naming a construct"
	}
	return bad, "", ""
}

// forbiddenDetail is the one-line detail of a forbidden_import verdict.
func forbiddenDetail(spec Spec, bad []string) string {
	const most = 5
	shown := bad
	if len(shown) > most {
		shown = shown[:most]
	}
	d := fmt.Sprintf("the artifact uses %s, outside the spec's allowance (imports: %s; no state kept across calls): "+
		"code running inside the driver could rewrite its report or behave differently under test",
		strings.Join(shown, "; "), strings.Join(spec.allowedImports(), ", "))
	if len(bad) > most {
		d += fmt.Sprintf(" (+%d more)", len(bad)-most)
	}
	return d
}
