// Package tasks reads task files: the YAML documents that define what a matrix case asks a team to
// build, how the members' own tests are run, the finite-domain oracle that judges the result, and
// the reference solution the embedded reference provider answers with. The schema is
// schema.json (JSON Schema draft 2020-12, embedded); docs/tasks.md describes every field.
//
// The built-in tasks (double, abs, clamp) are files under builtin/, embedded into the binary; the
// oracle's built-in specs of the same names are the same definitions (TestBuiltinsMatchOracle).
package tasks

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/assay-audit/assay/oracle"
)

// Languages and profiles a task file declares deliverables for.
const (
	LanguageGo     = oracle.LanguageGo
	LanguagePython = oracle.LanguagePython
	// ProfileStandard asks for two files: the function and its test.
	ProfileStandard = "standard"
	// ProfileSingleFile asks for one test file that also holds the function.
	ProfileSingleFile = "single-file"
)

// Test commands (test_command), the only ones assay's bounded independent runner has: go test
// -count=1 in the member's verified copy (with the scaffolded go.mod), and python3 -m pytest.
const (
	TestGo     = "go test"
	TestPytest = "pytest"
)

// Roles a task file gives an assignment text for besides the executor's.
var roleNames = []string{"supervisor", "critic", "judge", "synthesizer"}

// ErrInvalidTask is wrapped by every *Error: the task file cannot be used.
var ErrInvalidTask = errors.New("invalid task file")

// ErrUnknownTask: a name that is neither a built-in task nor an existing file.
var ErrUnknownTask = errors.New("unknown task")

// Error names the task file, the field (dotted path, e.g. "deliverables.go.standard"; "" for the
// document as a whole) and the problem. Its text is "FILE: FIELD: PROBLEM". It unwraps to
// ErrInvalidTask.
type Error struct {
	File, Field, Problem string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.File + ": " + e.Problem
	}
	return e.File + ": " + e.Field + ": " + e.Problem
}

// Unwrap returns ErrInvalidTask.
func (e *Error) Unwrap() error { return ErrInvalidTask }

// Task is one parsed, validated task file. Its fields mirror the file (docs/tasks.md); Bytes and
// SHA256 identify the file exactly as read, and are what a case run binds and stores.
type Task struct {
	Name     string            `json:"name"`
	Doc      string            `json:"doc"`
	TeamTask string            `json:"team_task"`
	Package  string            `json:"package,omitempty"`
	Function map[string]string `json:"function"`
	// Assignment: executor (per language, a text/template over .Files and .Package), supervisor,
	// critic, judge, synthesizer (plain text).
	Assignment struct {
		Executor    map[string]string `json:"executor"`
		Supervisor  string            `json:"supervisor"`
		Critic      string            `json:"critic"`
		Judge       string            `json:"judge"`
		Synthesizer string            `json:"synthesizer"`
	} `json:"assignment"`
	// Deliverables: language -> profile -> file names; the first file is the one the oracle checks.
	Deliverables map[string]map[string][]string `json:"deliverables"`
	// TestCommand: language -> TestGo / TestPytest.
	TestCommand map[string]string `json:"test_command"`
	Oracle      OracleSection     `json:"oracle"`
	// ReferenceSolution: language -> profile -> file name -> content.
	ReferenceSolution map[string]map[string]map[string]string `json:"reference_solution"`

	// File is the name the task was read under (a path, or "builtin:NAME").
	File string `json:"-"`
	// Bytes are the file's bytes; SHA256 their SHA-256 hex (64 chars).
	Bytes  []byte `json:"-"`
	SHA256 string `json:"-"`

	spec oracle.Spec
}

// OracleSection is the task file's oracle: the finite domains, the reference (a Go and a Python
// expression over Params; the Go expression is evaluated in the oracle's own process, Reference),
// the signed-zero rule and the allowed imports (nil: oracle.DefaultImports).
type OracleSection struct {
	Doc        string            `json:"doc"`
	Params     []string          `json:"params,omitempty"`
	Domains    []DomainSection   `json:"domains"`
	Reference  map[string]string `json:"reference"`
	SignedZero string            `json:"signed_zero,omitempty"`
	Imports    []string          `json:"imports,omitempty"`
}

// DomainSection is one oracle domain as the file gives it (oracle.Domain in snake_case).
type DomainSection struct {
	Type string         `json:"type"`
	Min  float64        `json:"min,omitempty"`
	Max  float64        `json:"max,omitempty"`
	Step float64        `json:"step,omitempty"`
	Args []RangeSection `json:"args,omitempty"`
}

// RangeSection is one argument's range of a domain of two or more arguments (oracle.Range).
type RangeSection struct {
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Step float64 `json:"step"`
}

//go:embed schema.json
var schemaJSON []byte

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Schema returns the task file's JSON Schema (draft 2020-12), as embedded.
func Schema() []byte { return slices.Clone(schemaJSON) }

var compiled = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		panic("tasks: schema.json: " + err.Error())
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("urn:assay:task-file", doc); err != nil {
		panic("tasks: schema.json: " + err.Error())
	}
	s, err := c.Compile("urn:assay:task-file")
	if err != nil {
		panic("tasks: schema.json: " + err.Error())
	}
	return s
}()

// BuiltinNames returns the built-in task names, sorted.
func BuiltinNames() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(out)
	return out
}

// Builtin returns the built-in task name. Errors: ErrUnknownTask (wrapped) for no such task; a
// built-in that does not parse is a build defect, reported as its *Error.
func Builtin(name string) (*Task, error) {
	b, err := builtinFS.ReadFile("builtin/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("%w %q (built-in: %s; or give a task file's path)", ErrUnknownTask, name, strings.Join(BuiltinNames(), ", "))
	}
	return Parse("builtin:"+name, b)
}

// Default is the task a matrix run uses when none is named.
const Default = "double"

// Load returns the task nameOrPath names: a path to a task file when it looks like one (contains a
// path separator or ends in .yaml/.yml) or, not being a built-in name, names an existing file; else
// a built-in task (a file named "double" in the working directory does not shadow the built-in). Errors:
// *Error (ErrInvalidTask) for a file that does not parse or validate; ErrUnknownTask; the read's
// error naming the path.
func Load(nameOrPath string) (*Task, error) {
	if nameOrPath == "" {
		nameOrPath = Default
	}
	if !LooksLikePath(nameOrPath) {
		if slices.Contains(BuiltinNames(), nameOrPath) {
			return Builtin(nameOrPath)
		}
		if _, err := os.Stat(nameOrPath); err != nil {
			return Builtin(nameOrPath) // says it is unknown
		}
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("task file %s: %w", nameOrPath, err)
	}
	defer f.Close()
	// Read one byte past the limit so that Parse refuses an oversized file without reading all of it.
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("task file %s: %w", nameOrPath, err)
	}
	return Parse(nameOrPath, b)
}

// MaxFileBytes is the largest task file assay reads: 1 MiB (the built-in tasks are under 4 KiB). A
// larger file is refused before it is decoded, so a runaway file cannot exhaust memory.
const MaxFileBytes = 1 << 20

// LooksLikePath reports whether Load takes nameOrPath for a task file's path rather than a
// built-in task's name: it has a path separator or a .yaml/.yml suffix.
func LooksLikePath(nameOrPath string) bool {
	return strings.ContainsAny(nameOrPath, `/\`) || strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
}

// Parse decodes and validates a task file's bytes; file names it in errors. Validation: YAML syntax,
// the JSON Schema (unknown keys, missing fields, wrong types), then what a schema cannot say: a
// reference solution for every declared deliverable (and no other file), executor templates that
// execute, and an oracle spec that oracle.Spec.Validate accepts and whose reference expression
// evaluates on every input of its domains. Errors: *Error naming file and field.
func Parse(file string, data []byte) (*Task, error) {
	bad := func(field, format string, args ...any) error {
		return &Error{File: file, Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileBytes {
		return nil, bad("", "larger than %d bytes (the task file limit)", MaxFileBytes)
	}
	var doc any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, bad("", "not YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, bad("", "holds more than one YAML document")
	}
	js, err := json.Marshal(jsonable(doc))
	if err != nil {
		return nil, bad("", "not representable as JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, bad("", "not representable as JSON: %v", err)
	}
	if err := compiled.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			field, problem := schemaProblem(ve)
			return nil, bad(field, "%s", problem)
		}
		return nil, bad("", "%v", err)
	}
	t := &Task{File: file, Bytes: slices.Clone(data)}
	jd := json.NewDecoder(bytes.NewReader(js))
	jd.DisallowUnknownFields()
	if err := jd.Decode(t); err != nil {
		return nil, bad("", "%v", err)
	}
	sum := sha256.Sum256(data)
	t.SHA256 = hex.EncodeToString(sum[:])
	if err := t.check(bad); err != nil {
		return nil, err
	}
	return t, nil
}

// jsonable turns YAML's decoded maps (map[string]any; map[any]any for non-string keys) into values
// encoding/json can marshal.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

var printer = message.NewPrinter(language.English)

// schemaProblem picks the most specific cause of a schema violation and says it as a dotted field
// and a problem: a missing required key is "FIELD.KEY: missing", an unknown one "FIELD.KEY: unknown
// key".
func schemaProblem(ve *jsonschema.ValidationError) (string, string) {
	for len(ve.Causes) > 0 {
		if _, ok := ve.ErrorKind.(*kind.OneOf); ok {
			break // the alternatives' own causes do not name one problem
		}
		ve = ve.Causes[0]
	}
	field := strings.Join(ve.InstanceLocation, ".")
	join := func(k string) string {
		if field == "" {
			return k
		}
		return field + "." + k
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		return join(k.Missing[0]), "missing"
	case *kind.AdditionalProperties:
		return join(k.Properties[0]), "unknown key"
	case *kind.OneOf:
		return field, "give either min, max and step (one argument) or args (two or more), not both"
	}
	return field, ve.ErrorKind.LocalizedString(printer)
}

// check validates what the schema cannot say, and builds the oracle spec.
func (t *Task) check(bad func(field, format string, args ...any) error) error {
	pkgField := "package"
	if t.Package == "" {
		t.Package, pkgField = t.Name, "name"
	}
	// The package is imported by the oracle's Go driver (example.com/PACKAGE), so it can be neither a
	// Go keyword (no file could declare it) nor main (a main package cannot be imported).
	if token.IsKeyword(t.Package) || t.Package == "main" {
		return bad(pkgField, "%q cannot be a Go package that the oracle imports (a Go keyword, or main); set package", t.Package)
	}
	if oracle.IsPythonKeyword(t.Function[LanguagePython]) {
		return bad("function.python", "%q is a Python keyword", t.Function[LanguagePython])
	}
	for _, lang := range []string{LanguageGo, LanguagePython} {
		for _, prof := range []string{ProfileStandard, ProfileSingleFile} {
			files := t.Deliverables[lang][prof]
			field := "deliverables." + lang + "." + prof
			for _, f := range files {
				if lang == LanguageGo && !strings.HasSuffix(f, ".go") || lang == LanguagePython && !strings.HasSuffix(f, ".py") {
					return bad(field, "file %q is not a %s file", f, map[string]string{LanguageGo: ".go", LanguagePython: ".py"}[lang])
				}
			}
			if lang == LanguageGo && prof == ProfileSingleFile && !strings.HasSuffix(files[0], "_test.go") {
				return bad(field, "the single file %q must be a _test.go file (it holds the function and its test)", files[0])
			}
			if err := checkFileRoles(lang, prof, files); err != "" {
				return bad(field, "%s", err)
			}
			sol, ok := t.ReferenceSolution[lang][prof]
			sfield := "reference_solution." + lang + "." + prof
			if !ok {
				return bad(sfield, "missing")
			}
			for _, f := range files {
				if _, ok := sol[f]; !ok {
					return bad(sfield+"."+f, "missing (every deliverable needs its reference content)")
				}
			}
			for f := range sol {
				if !slices.Contains(files, f) {
					return bad(sfield+"."+f, "is not a deliverable of %s", field)
				}
			}
		}
		if _, err := t.ExecutorAssignment(lang, t.Deliverables[lang][ProfileStandard]); err != nil {
			return bad("assignment.executor."+lang, "%v", err)
		}
	}
	for i, imp := range t.Oracle.Imports {
		if !slices.Contains(pureImports, imp) {
			return bad(fmt.Sprintf("oracle.imports.%d", i), "%q is not one of the imports an artifact may be allowed (%s): anything else could reach files, the process or state kept across calls, and rewrite the oracle driver's report",
				imp, strings.Join(pureImports, ", "))
		}
	}
	spec, err := t.buildSpec()
	if err != nil {
		return bad("oracle", "%v", err)
	}
	t.spec = spec
	return nil
}

// pureImports are the imports (Go import paths and Python modules) a task file's oracle.imports may
// allow the artifact: computation only, with no way to files, the process, the interpreter or state
// kept across calls. The oracle's import check is what keeps its driver's report the driver's own
// (oracle.VerdictForbiddenImport); a task file may narrow it, never open it (os, unsafe, reflect,
// sync, functools' caches ...).
var pureImports = []string{"math", "math/bits", "math/cmplx", "cmath", "operator"}

// checkFileRoles says what is wrong ("" for nothing) with the roles of a profile's deliverables: the
// test file must be one the test command collects (go test: *_test.go; pytest's default discovery:
// test_*.py or *_test.py), else the members' tests would run nothing; the standard Go function file
// must not be a _test.go file (go build and the oracle's driver never compile one); a Python file the
// oracle imports must be an importable module name.
func checkFileRoles(lang, prof string, files []string) string {
	if len(files) == 0 {
		return ""
	}
	test := files[len(files)-1]
	switch lang {
	case LanguageGo:
		if !strings.HasSuffix(test, "_test.go") {
			return fmt.Sprintf("the test file %q must end _test.go (go test compiles no other file as a test)", test)
		}
		if prof == ProfileStandard && strings.HasSuffix(files[0], "_test.go") {
			return fmt.Sprintf("the function file %q must not be a _test.go file (only go test compiles one)", files[0])
		}
	case LanguagePython:
		if !strings.HasPrefix(test, "test_") && !strings.HasSuffix(test, "_test.py") {
			return fmt.Sprintf("the test file %q must be named test_*.py or *_test.py (pytest collects no other file)", test)
		}
		mod := strings.TrimSuffix(files[0], ".py")
		if !token.IsIdentifier(mod) || oracle.IsPythonKeyword(mod) {
			return fmt.Sprintf("the file %q is not an importable Python module name", files[0])
		}
	}
	return ""
}

// ExecutorAssignment is the executor's assignment text in language for files: the task file's
// template executed over .Files (the names joined with ", ") and .Package.
func (t *Task) ExecutorAssignment(language string, files []string) (string, error) {
	src, ok := t.Assignment.Executor[language]
	if !ok {
		return "", fmt.Errorf("no executor assignment in %s", language)
	}
	tmpl, err := template.New("executor").Option("missingkey=error").Parse(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, struct{ Files, Package string }{strings.Join(files, ", "), t.Package}); err != nil {
		return "", err
	}
	return b.String(), nil
}

// RoleAssignment is the assignment text of a member that does not implement, by formation role
// (supervisor, critic, judge, synthesizer); false for other roles.
func (t *Task) RoleAssignment(role string) (string, bool) {
	switch role {
	case "supervisor":
		return t.Assignment.Supervisor, true
	case "critic":
		return t.Assignment.Critic, true
	case "judge":
		return t.Assignment.Judge, true
	case "synthesizer":
		return t.Assignment.Synthesizer, true
	}
	return "", false
}

// Files returns the deliverables of profile in language (a fresh slice; nil when the task declares
// none); the first is the oracle's artifact.
func (t *Task) Files(language, profile string) []string {
	return slices.Clone(t.Deliverables[language][profile])
}

// Artifact returns the file the oracle checks for profile in language: the first deliverable.
func (t *Task) Artifact(language, profile string) string {
	if f := t.Deliverables[language][profile]; len(f) > 0 {
		return f[0]
	}
	return ""
}

// GoModule is the go.mod the harness scaffolds in each implementing Go member's directory:
// "module example.com/PACKAGE\n\ngo 1.21\n".
func (t *Task) GoModule() string { return "module example.com/" + t.Package + "\n\ngo 1.21\n" }

// Solution returns the reference solution for language and profile: file name -> content.
func (t *Task) Solution(language, profile string) map[string]string {
	out := map[string]string{}
	for k, v := range t.ReferenceSolution[language][profile] {
		out[k] = v
	}
	return out
}

// Spec returns the task's oracle spec set up for language (oracle.Spec.ForLanguage); its targets
// name each language's function and standard-profile artifact file.
func (t *Task) Spec(language string) (oracle.Spec, error) { return t.spec.ForLanguage(language) }

// Profiles and languages a task declares, in a fixed order.
var (
	Profiles  = []string{ProfileStandard, ProfileSingleFile}
	Languages = []string{LanguageGo, LanguagePython}
)

func (t *Task) buildSpec() (oracle.Spec, error) {
	o := t.Oracle
	s := oracle.Spec{Name: t.Name, Doc: o.Doc, Language: LanguageGo, File: t.Artifact(LanguageGo, ProfileStandard),
		Function: t.Function[LanguageGo], Params: slices.Clone(o.Params), SignedZero: o.SignedZero, Imports: slices.Clone(o.Imports)}
	for _, lang := range Languages {
		s.Targets = append(s.Targets, oracle.Target{Language: lang, File: t.Artifact(lang, ProfileStandard), Function: t.Function[lang]})
	}
	for _, d := range o.Domains {
		dom := oracle.Domain{Type: d.Type, Min: d.Min, Max: d.Max, Step: d.Step}
		for _, r := range d.Args {
			dom.Args = append(dom.Args, oracle.Range{Min: r.Min, Max: r.Max, Step: r.Step})
		}
		s.Domains = append(s.Domains, dom)
	}
	ref, err := ExprReference(o.Reference[LanguageGo], s.ParamNames(), s.Domains)
	if err != nil {
		return oracle.Spec{}, fmt.Errorf("reference.go: %w", err)
	}
	ref.PyExpr = o.Reference[LanguagePython]
	s.Reference = ref
	if err := s.Validate(); err != nil {
		return oracle.Spec{}, err
	}
	if err := checkDomains(s); err != nil {
		return oracle.Spec{}, fmt.Errorf("reference.go: %w", err)
	}
	return s, nil
}

// Summary is a task's description for listings: name, doc, SHA-256 of the file, where it comes from.
type Summary struct {
	Name   string `json:"name"`
	Doc    string `json:"doc"`
	Source string `json:"source"`
	SHA256 string `json:"sha256"`
	Checks int    `json:"oracle_checks"`
}

// Summarize returns t's Summary.
func (t *Task) Summarize() Summary {
	return Summary{Name: t.Name, Doc: t.Doc, Source: t.File, SHA256: t.SHA256, Checks: t.spec.Expected()}
}

// BaseName is the file's base name, for messages.
func (t *Task) BaseName() string { return path.Base(t.File) }
