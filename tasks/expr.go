package tasks

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"

	"github.com/assay-audit/assay/oracle"
)

// errDivideByZero is an integer division or remainder by zero, which panics in Go.
var errDivideByZero = errors.New("integer divide by zero")

// ExprReference returns an oracle.Reference whose Int/IntN and Float64/Float64N evaluate the Go
// expression goExpr over params, in the oracle's own process, with Go's semantics: the expression
// is type-checked by go/types with every parameter a variable of the domain's type (int, 64-bit, or
// float64), constant subexpressions take go/types' exact constant values, and the rest is evaluated
// with Go's own int64 and float64 operators (wrapping integer overflow, truncating division, IEEE
// 754 binary64). Allowed: parameters, number literals, parentheses, unary + and -, binary + - * /
// and % (ints), and calls of the builtins min and max. GoExpr is set to goExpr. Errors: a
// syntax error, a type error for a domain type of domains, or anything else.
func ExprReference(goExpr string, params []string, domains []oracle.Domain) (oracle.Reference, error) {
	e, err := parser.ParseExpr(goExpr)
	if err != nil {
		return oracle.Reference{}, fmt.Errorf("%q does not parse as a Go expression: %v", goExpr, err)
	}
	if err := allowed(e); err != nil {
		return oracle.Reference{}, fmt.Errorf("%q: %v", goExpr, err)
	}
	ref := oracle.Reference{GoExpr: goExpr}
	for _, d := range domains {
		switch d.Type {
		case oracle.TypeInt:
			if ref.IntN != nil {
				continue
			}
			ev, err := compile(e, params, types.Typ[types.Int])
			if err != nil {
				return oracle.Reference{}, fmt.Errorf("%q for int: %v", goExpr, err)
			}
			ref.IntN = func(args []int64) int64 {
				v, err := ev.int(e, args)
				if err != nil {
					panic(fmt.Sprintf("reference %q: %v", goExpr, err)) // checkDomains refused such a task
				}
				return v
			}
		case oracle.TypeFloat64:
			if ref.Float64N != nil {
				continue
			}
			ev, err := compile(e, params, types.Typ[types.Float64])
			if err != nil {
				return oracle.Reference{}, fmt.Errorf("%q for float64: %v", goExpr, err)
			}
			ref.Float64N = func(args []float64) float64 { return ev.float(e, args) }
		}
	}
	return ref, nil
}

// allowed refuses any syntax outside the reference expression language.
func allowed(e ast.Expr) error {
	var bad error
	ast.Inspect(e, func(n ast.Node) bool {
		if bad != nil || n == nil {
			return false
		}
		switch x := n.(type) {
		case *ast.Ident, *ast.ParenExpr:
		case *ast.BasicLit:
			if x.Kind != token.INT && x.Kind != token.FLOAT {
				bad = fmt.Errorf("literal %s is not a number", x.Value)
			}
		case *ast.UnaryExpr:
			if x.Op != token.ADD && x.Op != token.SUB {
				bad = fmt.Errorf("operator %s is not allowed (unary + and - are)", x.Op)
			}
		case *ast.BinaryExpr:
			switch x.Op {
			case token.ADD, token.SUB, token.MUL, token.QUO, token.REM:
			default:
				bad = fmt.Errorf("operator %s is not allowed (+ - * / %% are)", x.Op)
			}
		case *ast.CallExpr:
			id, ok := x.Fun.(*ast.Ident)
			if !ok || (id.Name != "min" && id.Name != "max") || x.Ellipsis.IsValid() {
				bad = errors.New("only the builtins min and max may be called")
				return false
			}
			for _, a := range x.Args {
				if err := allowed(a); err != nil {
					bad = err
				}
			}
			return false // the callee identifier is not a parameter
		default:
			bad = fmt.Errorf("%T is not allowed", n)
		}
		return true
	})
	return bad
}

// evaluator evaluates a type-checked expression for one type.
type evaluator struct {
	info   *types.Info
	params map[string]int
}

func compile(e ast.Expr, params []string, typ types.Type) (*evaluator, error) {
	pkg := types.NewPackage("reference", "reference")
	idx := map[string]int{}
	for i, p := range params {
		pkg.Scope().Insert(types.NewVar(token.NoPos, pkg, p, typ))
		idx[p] = i
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}}
	if err := types.CheckExpr(token.NewFileSet(), pkg, token.NoPos, e, info); err != nil {
		return nil, err
	}
	if got := info.Types[e].Type; !types.Identical(got, typ) && !isUntyped(got) {
		return nil, fmt.Errorf("has type %s, want %s", got, typ)
	}
	for id, obj := range info.Uses {
		if _, isParam := idx[id.Name]; !isParam && obj.Parent() != types.Universe {
			return nil, fmt.Errorf("%s is not a parameter", id.Name)
		}
		if v, ok := obj.(*types.Var); ok && v.Pkg() == pkg {
			continue
		}
		if _, ok := obj.(*types.Builtin); !ok {
			return nil, fmt.Errorf("%s is neither a parameter nor min or max", id.Name)
		}
	}
	return &evaluator{info: info, params: idx}, nil
}

func isUntyped(t types.Type) bool {
	b, ok := t.(*types.Basic)
	return ok && b.Info()&types.IsUntyped != 0
}

func (ev *evaluator) int(e ast.Expr, args []int64) (int64, error) {
	if tv := ev.info.Types[e]; tv.Value != nil {
		v, ok := constant.Int64Val(constant.ToInt(tv.Value))
		if !ok {
			return 0, fmt.Errorf("constant %s does not fit an int", tv.Value)
		}
		return v, nil
	}
	switch x := e.(type) {
	case *ast.Ident:
		return args[ev.params[x.Name]], nil
	case *ast.ParenExpr:
		return ev.int(x.X, args)
	case *ast.UnaryExpr:
		v, err := ev.int(x.X, args)
		if x.Op == token.SUB {
			v = -v
		}
		return v, err
	case *ast.BinaryExpr:
		a, err := ev.int(x.X, args)
		if err != nil {
			return 0, err
		}
		b, err := ev.int(x.Y, args)
		if err != nil {
			return 0, err
		}
		switch x.Op {
		case token.ADD:
			return a + b, nil
		case token.SUB:
			return a - b, nil
		case token.MUL:
			return a * b, nil
		case token.QUO:
			if b == 0 {
				return 0, errDivideByZero
			}
			return a / b, nil
		case token.REM:
			if b == 0 {
				return 0, errDivideByZero
			}
			return a % b, nil
		}
	case *ast.CallExpr:
		var out int64
		for i, a := range x.Args {
			v, err := ev.int(a, args)
			if err != nil {
				return 0, err
			}
			switch {
			case i == 0:
				out = v
			case x.Fun.(*ast.Ident).Name == "min":
				out = min(out, v)
			default:
				out = max(out, v)
			}
		}
		return out, nil
	}
	return 0, fmt.Errorf("cannot evaluate %T", e)
}

func (ev *evaluator) float(e ast.Expr, args []float64) float64 {
	if tv := ev.info.Types[e]; tv.Value != nil {
		v, _ := constant.Float64Val(constant.ToFloat(tv.Value))
		return v
	}
	switch x := e.(type) {
	case *ast.Ident:
		return args[ev.params[x.Name]]
	case *ast.ParenExpr:
		return ev.float(x.X, args)
	case *ast.UnaryExpr:
		if x.Op == token.SUB {
			return -ev.float(x.X, args)
		}
		return ev.float(x.X, args)
	case *ast.BinaryExpr:
		a, b := ev.float(x.X, args), ev.float(x.Y, args)
		switch x.Op {
		case token.ADD:
			return float64(a + b)
		case token.SUB:
			return float64(a - b)
		case token.MUL:
			return float64(a * b)
		case token.QUO:
			return float64(a / b)
		}
	case *ast.CallExpr:
		var out float64
		for i, a := range x.Args {
			v := ev.float(a, args)
			switch {
			case i == 0:
				out = v
			case x.Fun.(*ast.Ident).Name == "min":
				out = min(out, v)
			default:
				out = max(out, v)
			}
		}
		return out
	}
	panic(fmt.Sprintf("cannot evaluate %T", e)) // compile and allowed admit nothing else
}

// checkDomains evaluates the int reference on every input of the spec's int domains, so a task
// whose reference divides by zero on some input is refused when it is read, not while a case runs.
func checkDomains(s oracle.Spec) (err error) {
	e, perr := parser.ParseExpr(s.Reference.GoExpr)
	if perr != nil {
		return perr
	}
	for _, d := range s.Domains {
		if d.Type != oracle.TypeInt {
			continue
		}
		ev, cerr := compile(e, s.ParamNames(), types.Typ[types.Int])
		if cerr != nil {
			return cerr
		}
		ranges := d.Args
		if len(ranges) == 0 {
			ranges = []oracle.Range{{Min: d.Min, Max: d.Max, Step: d.Step}}
		}
		args := make([]int64, len(ranges))
		var walk func(i int) error
		walk = func(i int) error {
			if i == len(ranges) {
				_, err := ev.int(e, args)
				if err != nil {
					return fmt.Errorf("%v at %v", err, args)
				}
				return nil
			}
			for k := 0; k < ranges[i].Size(); k++ {
				args[i] = ranges[i].IntInput(k)
				if err := walk(i + 1); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(0); err != nil {
			return err
		}
	}
	return nil
}
