package oracle

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/version"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// Layout of the Go driver module inside a Check's working directory.
const (
	goModulePath     = "assayoracle"
	goArtifactDir    = "artifact"
	goDefaultFile    = "artifact.go"
	goFallbackLang   = "1.22"
	goDriverBinary   = "driver"
	goBuildLog       = "build.log"
	goVersionLog     = "goversion.log"
	goRunLog         = "run.log"
	goReportFileName = "report.json"
)

// validateGoSpec checks what the Go driver needs beyond Spec.Validate: an
// exported function name it can call from another package, and a reference
// expression it can compile.
func validateGoSpec(spec Spec) error {
	if !token.IsIdentifier(spec.Function) || !token.IsExported(spec.Function) {
		return fmt.Errorf("%w: spec %s: Function %q is not an exported Go identifier", ErrInvalidSpec, spec.Name, spec.Function)
	}
	if _, err := parser.ParseExpr(spec.Reference.GoExpr); err != nil {
		return fmt.Errorf("%w: spec %s: Reference.GoExpr %q: %w", ErrInvalidSpec, spec.Name, spec.Reference.GoExpr, err)
	}
	if spec.File != "" && (filepath.Base(spec.File) != spec.File || !strings.HasSuffix(spec.File, ".go") || strings.HasSuffix(spec.File, "_test.go")) {
		return fmt.Errorf("%w: spec %s: File %q must be a plain .go file name (not _test.go)", ErrInvalidSpec, spec.Name, spec.File)
	}
	return nil
}

// executeGo copies the artifact into a fresh module as
// assayoracle/artifact/<spec.File>, generates main.go calling
// <Function>[<type>] over each domain, builds it with the go tool under Run
// (BuildDeadline), and runs the binary under Run (Deadline) with the report
// path, inside a random-named directory, as its only argument. The build
// passes -trimpath so that root, which differs for every check, is not part
// of the compiled packages and the go build cache reuses the compile of an
// identical driver and artifact; build errors name files relative to the
// module either way.
func executeGo(ctx context.Context, spec Spec, artifact []byte, root string, opts Options) execution {
	ex := execution{guarded: map[string]string{}}
	fail := func(verdict, detail string) execution {
		ex.early, ex.detail = verdict, detail
		return ex
	}
	env := MinimalEnv()
	goBin, err := resolveExecutable("go", env)
	if err != nil {
		return fail(VerdictUnavailable, "go tool not found on PATH")
	}
	ex.interpreter = goBin
	if f, err := parser.ParseFile(token.NewFileSet(), "artifact.go", artifact, parser.SkipObjectResolution); err == nil {
		if bad := goImportViolations(spec, f); len(bad) > 0 {
			return fail(VerdictForbiddenImport, forbiddenDetail(spec, bad))
		}
	}
	if detail := checkGoArtifact(spec, artifact); detail != "" {
		return fail(VerdictCrashed, detail)
	}
	buildDeadline := opts.BuildDeadline
	if buildDeadline <= 0 {
		buildDeadline = DefaultBuildDeadline
	}

	// The language version of the generated go.mod is the local toolchain's,
	// so the artifact may use every feature the toolchain has. The answer of
	// one go tool is remembered for the process (goVersionMemo) and written to
	// goversion.log either way.
	versionLog := filepath.Join(root, goVersionLog)
	key := goToolKey(goBin, env)
	if out, ok := goVersionMemo.Load(key); ok && key != "" {
		if err := os.WriteFile(versionLog, out.([]byte), 0o600); err != nil {
			return fail(VerdictUnavailable, fmt.Sprintf("write %s: %v", versionLog, err))
		}
	} else {
		verRun, err := Run(ctx, Command{
			Path: goBin, Args: []string{"env", "GOVERSION"}, Dir: root, Env: env,
			OutputPath: versionLog, Deadline: buildDeadline, Cleanup: opts.Cleanup,
		})
		switch {
		case err != nil:
			return fail(VerdictUnavailable, fmt.Sprintf("go env GOVERSION: %v", err))
		case verRun.Cancelled:
			return fail(VerdictCancelled, "")
		case verRun.TimedOut || verRun.ExitCode != 0:
			return fail(VerdictUnavailable, "go env GOVERSION failed: "+summarizeOutput(versionLog))
		}
		if out, err := os.ReadFile(versionLog); err == nil && key != "" && !verRun.Leftover && !verRun.CleanupFault {
			goVersionMemo.Store(key, out)
		}
	}
	goLang := goLanguageVersion(versionLog)

	moduleDir := filepath.Join(root, "module")
	if err := os.MkdirAll(filepath.Join(moduleDir, goArtifactDir), 0o755); err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create driver module: %v", err))
	}
	driver, err := goDriverSource(spec)
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("generate driver: %v", err))
	}
	file := spec.File
	if file == "" {
		file = goDefaultFile
	}
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(moduleDir, "go.mod"), []byte("module " + goModulePath + "\n\ngo " + goLang + "\n")},
		{filepath.Join(moduleDir, "main.go"), driver},
		{filepath.Join(moduleDir, goArtifactDir, file), artifact},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			return fail(VerdictUnavailable, fmt.Sprintf("write %s: %v", f.path, err))
		}
		ex.guarded[f.path] = sha256Hex(f.data)
	}

	binPath := filepath.Join(root, goDriverBinary)
	buildLog := filepath.Join(root, goBuildLog)
	buildFlags := []string{"-buildvcs=false", "-trimpath"}
	buildArgs := append(append([]string{"build"}, buildFlags...), "-o", binPath, ".")
	inputs := goDriverInputs(goBin, env, buildFlags, files[0].data, files[1].data, file, artifact)
	if reused, err := goDriverMemo.reuse(inputs, binPath, buildLog); err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("write the driver built from identical inputs: %v", err))
	} else if !reused {
		build, err := Run(ctx, Command{
			Path: goBin, Args: buildArgs, Dir: moduleDir, Env: env,
			OutputPath: buildLog, Deadline: buildDeadline, Cleanup: opts.Cleanup,
		})
		switch {
		case err != nil:
			return fail(VerdictUnavailable, fmt.Sprintf("go build: %v", err))
		case build.Cancelled:
			return fail(VerdictCancelled, "")
		case build.TimedOut:
			return fail(VerdictTimeout, fmt.Sprintf("driver build exceeded its %s deadline; the process group was killed", buildDeadline))
		case build.ExitCode != 0:
			return fail(VerdictCrashed, "build failed: "+summarizeOutput(buildLog))
		case build.Leftover || build.CleanupFault:
			return fail(VerdictCleanupFault, "go build left processes behind")
		}
		goDriverMemo.remember(inputs, binPath)
	}

	reportDir, err := os.MkdirTemp(root, "report-*")
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create report directory: %v", err))
	}
	scratch, err := os.MkdirTemp(root, "scratch-*")
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("create scratch directory: %v", err))
	}
	ex.reportPath = filepath.Join(reportDir, goReportFileName)
	ex.outputPath = filepath.Join(root, goRunLog)
	ex.runDeadline = opts.Deadline
	if ex.runDeadline <= 0 {
		ex.runDeadline = DefaultDeadline
	}
	ex.outputLimit = outputLimit(opts)
	run, err := Run(ctx, Command{
		Path: binPath, Args: []string{ex.reportPath}, Dir: scratch, Env: env,
		OutputPath: ex.outputPath, Deadline: ex.runDeadline, Cleanup: opts.Cleanup, OutputLimit: ex.outputLimit,
	})
	if err != nil {
		return fail(VerdictUnavailable, fmt.Sprintf("start driver: %v", err))
	}
	ex.ran = true
	ex.run = run
	return ex
}

// checkGoArtifact parses the artifact and returns why it cannot be the
// library the driver imports (a parse error, package main, no generic
// function named spec.Function), or "" when it can. Any other package name is
// accepted: the driver imports it under an alias.
func checkGoArtifact(spec Spec, artifact []byte) string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "artifact.go", artifact, parser.SkipObjectResolution)
	if err != nil {
		return "artifact does not parse: " + truncate(strings.ReplaceAll(err.Error(), "\n", " | "), summaryLimit)
	}
	if f.Name.Name == "main" {
		return "artifact is package main; the driver must import it as a library package"
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Name.Name != spec.Function {
			continue
		}
		if fn.Type.TypeParams == nil || fn.Type.TypeParams.NumFields() == 0 {
			return fmt.Sprintf("%s is not generic; the spec instantiates it per domain type (%s)", spec.Function, domainTypes(spec))
		}
		return ""
	}
	return fmt.Sprintf("artifact (package %s) declares no function %s", f.Name.Name, spec.Function)
}

// domainTypes lists the spec's domain types, e.g. "int, float64".
func domainTypes(spec Spec) string {
	types := make([]string, len(spec.Domains))
	for i, d := range spec.Domains {
		types[i] = d.Type
	}
	return strings.Join(types, ", ")
}

// goLanguageVersion reads `go env GOVERSION` output and returns its language
// version without the "go" prefix ("1.26"); for an unparsable version (a
// development toolchain) it falls back to the oracle's own toolchain, then to
// goFallbackLang.
func goLanguageVersion(path string) string {
	data, _ := os.ReadFile(path)
	fields := strings.Fields(string(data))
	for _, v := range append(fields, runtime.Version()) {
		if lang := version.Lang(v); lang != "" {
			return strings.TrimPrefix(lang, "go")
		}
	}
	return goFallbackLang
}

// goVersionMemo holds the output of `go env GOVERSION` in this process, by
// goToolKey: every Go check otherwise starts a go command for the same answer.
var goVersionMemo sync.Map // string -> []byte

// goToolKey identifies what `go env GOVERSION` depends on that can be seen
// without running anything: the go tool's path, its symlink target, size,
// modification time and inode, and the GOROOT of env. It is "" (never
// remembered) when the tool cannot be described.
func goToolKey(goBin string, env []string) string {
	id := fileIdentity(goBin)
	if id == "" {
		return ""
	}
	return id + "\x00GOROOT=" + envValue(env, "GOROOT")
}

// goDriverTemplate is the generated driver. It checks every domain in spec
// order, carries every output in the report for the oracle to re-evaluate,
// and writes the report once, at the end, through a rename so that a reader
// never sees half of it. It instantiates the function only with the types the
// spec's domains use. Each domain has its own check function with its ranges
// as constants; the flat input index is split into one index per argument,
// the last argument varying fastest (as Domain.IntArgs does).
const goDriverTemplate = `// Code generated by the assay oracle; DO NOT EDIT.

package main

import (
	"encoding/json"
	"fmt"
{{- if .HasFloat64}}
	"math"
{{- end}}
	"os"
	"strconv"
	"strings"
	"time"

	artifact "{{.Module}}/{{.ArtifactDir}}"
)

type failure struct {
	Type     string ` + "`json:\"type\"`" + `
	Input    string ` + "`json:\"input\"`" + `
	Expected string ` + "`json:\"expected\"`" + `
	Actual   string ` + "`json:\"actual\"`" + `
}

type domainReport struct {
	Type        string   ` + "`json:\"type\"`" + `
	Size        int      ` + "`json:\"size\"`" + `
	Checks      int      ` + "`json:\"checks\"`" + `
	Failures    int      ` + "`json:\"failures\"`" + `
	Int         []int64  ` + "`json:\"int,omitempty\"`" + `
	Float64Bits []uint64 ` + "`json:\"float64_bits,omitempty\"`" + `
}

type report struct {
	Format        string         ` + "`json:\"format\"`" + `
	Spec          string         ` + "`json:\"spec\"`" + `
	Domains       []domainReport ` + "`json:\"domains\"`" + `
	Checks        int            ` + "`json:\"checks\"`" + `
	Failures      int            ` + "`json:\"failures\"`" + `
	FirstFailures []failure      ` + "`json:\"first_failures\"`" + `
	DurationNS    int64          ` + "`json:\"duration_ns\"`" + `
	Complete      bool           ` + "`json:\"complete\"`" + `
}

func (r *report) fail(d *domainReport, f failure) {
	d.Failures++
	r.Failures++
	if len(r.FirstFailures) < {{.MaxFirstFailures}} {
		r.FirstFailures = append(r.FirstFailures, f)
	}
}

// tuple renders one argument alone and several as "(a, b)".
func tuple(parts ...string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
{{if .HasInt}}
func refInt({{.Params}} int) int { return {{.Expr}} }
{{end}}
{{- if .HasFloat64}}
func refFloat64({{.Params}} float64) float64 { return {{.Expr}} }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func sameFloat64(got, want float64) bool {
	return math.Float64bits(got) == math.Float64bits(want){{if .ZeroEqual}} || (got == 0 && want == 0){{end}}
}
{{end}}
{{- range $i, $d := .Domains}}
func checkDomain{{$i}}(r *report) {
	d := domainReport{Type: "{{$d.Type}}", Size: {{$d.Size}}, {{if eq $d.Type "int"}}Int: make([]int64, 0, {{$d.Size}}){{else}}Float64Bits: make([]uint64, 0, {{$d.Size}}){{end}}}
	for i := 0; i < {{$d.Size}}; i++ {
		rem := i
{{- range $d.Decode}}
		{{.}}
{{- end}}
		got := artifact.{{$.Function}}[{{$d.Type}}]({{$d.Args}})
{{- if eq $d.Type "int"}}
		want := refInt({{$d.Args}})
		d.Checks++
		d.Int = append(d.Int, int64(got))
		if got != want {
			r.fail(&d, failure{Type: "int", Input: tuple({{$d.Format}}), Expected: strconv.Itoa(want), Actual: strconv.Itoa(got)})
		}
{{- else}}
		want := refFloat64({{$d.Args}})
		d.Checks++
		d.Float64Bits = append(d.Float64Bits, math.Float64bits(got))
		if !sameFloat64(got, want) {
			r.fail(&d, failure{Type: "float64", Input: tuple({{$d.Format}}), Expected: ftoa(want), Actual: ftoa(got)})
		}
{{- end}}
	}
	r.Domains = append(r.Domains, d)
	r.Checks += d.Checks
}
{{end}}
func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "assay oracle driver: want one argument, the report path")
		os.Exit(2)
	}
	path := os.Args[1]
	start := time.Now()
	r := report{Format: {{printf "%q" .Format}}, Spec: {{printf "%q" .Spec}}, Domains: []domainReport{}, FirstFailures: []failure{}}
{{- range $i, $d := .Domains}}
	checkDomain{{$i}}(&r)
{{- end}}
	r.DurationNS = time.Since(start).Nanoseconds()
	r.Complete = true
	data, err := json.Marshal(&r)
	if err != nil {
		fmt.Fprintln(os.Stderr, "assay oracle driver: encode report:", err)
		os.Exit(3)
	}
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "assay oracle driver: write report:", err)
		os.Exit(3)
	}
	if err := os.Rename(tmp, path); err != nil {
		fmt.Fprintln(os.Stderr, "assay oracle driver: write report:", err)
		os.Exit(3)
	}
}
`

// goDriverDomain is one domain as Go source fragments for the driver
// template: Decode holds the statements that turn the flat index rem into
// the arguments a0, a1, ...; Args lists them for a call; Format renders them
// as strings for a failure.
type goDriverDomain struct {
	Type         string
	Size         int
	Decode       []string
	Args, Format string
}

// goDriverSource renders and gofmt-formats the driver for spec.
func goDriverSource(spec Spec) ([]byte, error) {
	data := struct {
		Module, ArtifactDir, Function, Expr, Format, Spec, Params string
		MaxFirstFailures                                          int
		HasInt, HasFloat64, ZeroEqual                             bool
		Domains                                                   []goDriverDomain
	}{
		Module: goModulePath, ArtifactDir: goArtifactDir, Function: spec.Function, Expr: spec.Reference.GoExpr,
		Format: reportFormat, Spec: spec.Name, MaxFirstFailures: maxFirstFailures,
		Params: strings.Join(spec.ParamNames(), ", "), ZeroEqual: spec.zeroEqual(),
	}
	for _, d := range spec.Domains {
		gd := goDriverDomain{Type: d.Type, Size: d.Size()}
		data.HasInt = data.HasInt || d.Type == TypeInt
		data.HasFloat64 = data.HasFloat64 || d.Type == TypeFloat64
		ranges := d.Ranges()
		args := make([]string, len(ranges))
		format := make([]string, len(ranges))
		decode := make([]string, len(ranges))
		for k := len(ranges) - 1; k >= 0; k-- {
			r := ranges[k]
			arg := "a" + strconv.Itoa(k)
			args[k] = arg
			index := "rem"
			if k > 0 {
				index = "rem % " + strconv.Itoa(r.Size())
			}
			var stmt string
			if d.Type == TypeInt {
				stmt = fmt.Sprintf("%s := %d + (%s)*%d", arg, int64(r.Min), index, int64(r.Step))
				format[k] = "strconv.Itoa(" + arg + ")"
			} else {
				stmt = fmt.Sprintf("%s := float64(%s) + float64(float64(%s)*%s)", arg,
					strconv.FormatFloat(r.Min, 'g', -1, 64), index, strconv.FormatFloat(r.Step, 'g', -1, 64))
				format[k] = "ftoa(" + arg + ")"
			}
			if k > 0 {
				stmt += "\n\t\trem /= " + strconv.Itoa(r.Size())
			}
			decode[len(ranges)-1-k] = stmt
		}
		gd.Decode = decode
		gd.Args = strings.Join(args, ", ")
		gd.Format = strings.Join(format, ", ")
		data.Domains = append(data.Domains, gd)
	}
	tmpl, err := template.New("driver").Parse(goDriverTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse driver template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render driver for spec %s: %w", spec.Name, err)
	}
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format driver for spec %s: %w", spec.Name, err)
	}
	return src, nil
}
