package harness

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/assay-audit/assay/tasks"
)

// matrixFileSchema is the JSON Schema (draft 2020-12) every matrix file is validated against
// before anything else reads it; docs/matrix-file.md documents it.
//
//go:embed schema/matrix-file.schema.json
var matrixFileSchema []byte

// MatrixFileSchema returns the matrix file's JSON Schema (draft 2020-12), as embedded.
func MatrixFileSchema() []byte { return slices.Clone(matrixFileSchema) }

// MatrixFile is a parsed matrix file (docs/matrix-file.md): the axes of a matrix run, each
// optional. An axis the file leaves out comes from Options as given (the command's flags or their
// defaults); the cases are the cross product providers x tasks x languages x profiles (the cells,
// Cells), each cell running its cases Repeat times.
type MatrixFile struct {
	// Path is the file as named.
	Path string
	// Providers are the providers, in file order; none when the file leaves the axis out.
	Providers []MatrixProvider
	// Cases are catalog case names, or the single name "all"; none when left out.
	Cases []string
	// Tasks are task names (built-in) or task files (relative to the matrix file); none when left out.
	Tasks []string
	// Languages and Profiles are artifact languages and task profiles; none when left out.
	Languages []string
	Profiles  []string
	// Repeat is `repeat: N` (N >= 1); 0 when left out (each case runs once, without a repeat index).
	Repeat int
}

// MatrixProvider is one provider entry of a matrix file.
type MatrixProvider struct {
	// Name is recorded in every run's envelope as its provider (Options.ProviderName).
	Name string `json:"name"`
	// Reference marks the embedded reference provider; an entry without BaseURL is one too.
	Reference bool `json:"reference"`
	// BaseURL is the OpenAI-compatible endpoint; "" for the embedded reference provider.
	BaseURL string `json:"base_url"`
	// Model is the model id: required with BaseURL; for the reference provider the id it serves
	// and answers with (default reference.ModelID).
	Model string `json:"model"`
	// KeyEnv is the NAME of the environment variable holding the API key (never the key).
	KeyEnv string `json:"key_env"`
	// Capacity is the admission slots the provider's cases run members through (Options.Capacity,
	// --capacity N: the parallel cases only); 0 when not given.
	Capacity int `json:"capacity"`
	// Stream requests SSE streaming responses.
	Stream bool `json:"stream"`
}

// MatrixFileError is a matrix file that cannot run, refused before anything is written: Path,
// the Field in the file's own terms ("providers[1].model", "repeat"; "" for the whole file) and
// the Problem. It unwraps to ErrBadOptions.
type MatrixFileError struct {
	Path    string
	Field   string
	Problem string
}

func (e *MatrixFileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("matrix file %s: %s", e.Path, e.Problem)
	}
	return fmt.Sprintf("matrix file %s: %s: %s", e.Path, e.Field, e.Problem)
}

// Unwrap returns ErrBadOptions.
func (e *MatrixFileError) Unwrap() error { return ErrBadOptions }

// Matrix file axes, as MatrixFile.Axes names them.
const (
	AxisProviders = "providers"
	AxisCases     = "cases"
	AxisTasks     = "tasks"
	AxisLanguages = "languages"
	AxisProfiles  = "profiles"
	AxisRepeat    = "repeat"
)

// Axes names the axes the file sets, in the order of the constants above.
func (m *MatrixFile) Axes() []string {
	var out []string
	for _, a := range []struct {
		name string
		set  bool
	}{{AxisProviders, len(m.Providers) > 0}, {AxisCases, len(m.Cases) > 0}, {AxisTasks, len(m.Tasks) > 0},
		{AxisLanguages, len(m.Languages) > 0}, {AxisProfiles, len(m.Profiles) > 0}, {AxisRepeat, m.Repeat > 0}} {
		if a.set {
			out = append(out, a.name)
		}
	}
	return out
}

// LoadMatrixFile reads the YAML matrix file at path, validates it against MatrixFileSchema, then
// checks what the schema cannot say (each provider's fields together, unique names, known cases,
// tasks, languages and profiles). It reads nothing else and writes nothing.
//
// Errors: a *MatrixFileError (unwrapping to ErrBadOptions) naming the file, the field and the
// problem, for an unreadable file, malformed YAML, a schema violation or a refused value.
func LoadMatrixFile(path string) (*MatrixFile, error) {
	bad := func(field, format string, args ...any) error {
		return &MatrixFileError{Path: path, Field: field, Problem: oneLine(fmt.Sprintf(format, args...))}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, bad("", "%v", errors.Unwrap(err))
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, bad("", "%s", yamlProblem(err))
	}
	if doc == nil {
		return nil, bad("", "is empty: give at least one of providers, cases, tasks, languages, profiles, repeat")
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, bad("", "not a mapping of string keys: %v", err)
	}
	if err := validateMatrixSchema(js); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			field, problem := leafProblem(ve)
			return nil, bad(field, "%s", problem)
		}
		return nil, bad("", "%v", err)
	}
	var f struct {
		Providers []MatrixProvider `json:"providers"`
		Cases     json.RawMessage  `json:"cases"`
		Tasks     []string         `json:"tasks"`
		Languages []string         `json:"languages"`
		Profiles  []string         `json:"profiles"`
		Repeat    int              `json:"repeat"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, bad("", "%v", err)
	}
	m := &MatrixFile{Path: path, Providers: f.Providers, Tasks: f.Tasks, Languages: f.Languages, Profiles: f.Profiles, Repeat: f.Repeat}
	if len(f.Cases) > 0 {
		var all string
		if json.Unmarshal(f.Cases, &all) == nil {
			m.Cases = []string{all}
		} else if err := json.Unmarshal(f.Cases, &m.Cases); err != nil {
			return nil, bad(AxisCases, "%v", err)
		}
	}
	if err := m.check(bad); err != nil {
		return nil, err
	}
	return m, nil
}

// check refuses what the schema cannot: fields that go together, duplicates, unknown names.
func (m *MatrixFile) check(bad func(field, format string, args ...any) error) error {
	names := map[string]int{}
	for i, p := range m.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		if j, dup := names[p.Name]; dup {
			return bad(at+".name", "%q is also the name of providers[%d]", p.Name, j)
		}
		names[p.Name] = i
		switch {
		case p.Reference && p.BaseURL != "":
			return bad(at+".base_url", "a reference provider (reference: true) is the embedded one and takes no base_url")
		case p.BaseURL != "" && p.Model == "":
			return bad(at+".model", "is required with base_url")
		case p.BaseURL == "" && p.KeyEnv != "":
			return bad(at+".key_env", "the embedded reference provider takes no key; key_env needs base_url")
		case p.BaseURL != "" && p.Name == ReferenceProviderName:
			return bad(at+".name", "%q names the embedded reference provider; a provider with base_url needs another name", p.Name)
		}
	}
	if err := checkNames(bad, AxisCases, m.Cases, func(c string) error {
		if c == "all" {
			if len(m.Cases) > 1 {
				return errors.New(`"all" selects the whole catalog and stands alone`)
			}
			return nil
		}
		_, err := LookupCase(c)
		return err
	}); err != nil {
		return err
	}
	if err := checkNames(bad, AxisTasks, m.Tasks, func(t string) error {
		_, err := loadTask(m.taskRef(t))
		return err
	}); err != nil {
		return err
	}
	if err := checkNames(bad, AxisLanguages, m.Languages, func(l string) error {
		if !slices.Contains(Languages(), l) {
			return fmt.Errorf("%q is unknown (known: %s)", l, strings.Join(Languages(), ", "))
		}
		return nil
	}); err != nil {
		return err
	}
	return checkNames(bad, AxisProfiles, m.Profiles, func(p string) error {
		if _, ok := Profiles()[p]; !ok {
			return fmt.Errorf("%q is unknown (known: %s)", p, strings.Join(ProfileNames(), ", "))
		}
		return nil
	})
}

// checkNames refuses a name of axis that known refuses, and a name given twice.
func checkNames(bad func(field, format string, args ...any) error, axis string, names []string, known func(string) error) error {
	seen := map[string]int{}
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", axis, i)
		if err := known(n); err != nil {
			var oe *OptionError
			if errors.As(err, &oe) {
				return bad(at, "%s", oe.Reason) // the reason alone: the file names no Options field
			}
			return bad(at, "%s", err)
		}
		if j, dup := seen[n]; dup {
			return bad(at, "%q is also %s[%d]: each value runs once per cell (use repeat: N to run cases again)", n, axis, j)
		}
		seen[n] = i
	}
	return nil
}

// validateMatrixSchema validates the JSON form of a matrix file against MatrixFileSchema. No
// loader is configured, so the schema cannot pull anything from the filesystem or the network.
func validateMatrixSchema(js []byte) error {
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(matrixFileSchema))
	if err != nil {
		return fmt.Errorf("the embedded schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "urn:assay:matrix-file"
	if err := c.AddResource(url, schemaDoc); err != nil {
		return fmt.Errorf("the embedded schema: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("the embedded schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// leafProblem is the first innermost failure of a schema validation, as a field in the file's
// own terms ("providers[1].model") and its problem in words.
func leafProblem(ve *jsonschema.ValidationError) (string, string) {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	var field strings.Builder
	for _, tok := range ve.InstanceLocation {
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			field.WriteString("[" + tok + "]")
			continue
		}
		if field.Len() > 0 {
			field.WriteByte('.')
		}
		field.WriteString(tok)
	}
	return field.String(), ve.ErrorKind.LocalizedString(message.NewPrinter(language.English))
}

// fileFieldOf maps the Options fields a matrix file sets to the file's field names, for refusals
// Normalize makes of a cell's values.
var fileFieldOf = map[string]string{"BaseURL": "base_url", "Model": "model", "APIKey": "key_env", "APIKeyEnv": "key_env",
	"ProviderName": "name", "Stream": "stream", "Capacity": "capacity"}

// taskRef is what a tasks entry names for tasks.Load: a name as it is (a built-in task's), a task
// file's path (it has a path separator or a .yaml/.yml suffix, as tasks.Load tells them) relative
// to the matrix file's directory; an absolute path as it is.
func (m *MatrixFile) taskRef(t string) string {
	if !tasks.LooksLikePath(t) || filepath.IsAbs(t) {
		return t // a built-in task's name (tasks.Load says when it is unknown), or an absolute path
	}
	return filepath.Join(filepath.Dir(m.Path), t)
}

// duplicateYAMLKey matches yaml's "line 3: mapping key "x" already defined at line 2".
var duplicateYAMLKey = regexp.MustCompile(`line (\d+): mapping key "(.*)" already defined at line (\d+)`)

// yamlProblem says what yaml refused in the file's terms: a key given twice by its lines, anything
// else as "not valid YAML: ..." without the library's "yaml: unmarshal errors:" wording.
func yamlProblem(err error) string {
	if m := duplicateYAMLKey.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Sprintf("key %q is given twice, at lines %s and %s", m[2], m[3], m[1])
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "unmarshal errors:"))
	return "not valid YAML: " + msg
}

// Cells returns the Options of each cell of the matrix, base overridden by the axes the file sets,
// in order providers x tasks x languages x profiles; every cell runs the file's cases (else
// base.Formations), each Repeat times. Each is normalized here, so a file that cannot run is
// refused before anything is written (it reads the environment variables key_env names).
//
// Errors: a *MatrixFileError naming the file's field for a value Normalize refuses; Normalize's
// own error for an option the file does not set (a flag's).
func (m *MatrixFile) Cells(base Options) ([]Options, error) {
	providers := m.Providers
	if len(providers) == 0 {
		providers = []MatrixProvider{{}} // base's provider
	}
	one := func(xs []string, dflt string) []string {
		if len(xs) == 0 {
			return []string{dflt}
		}
		return xs
	}
	var cells []Options
	for i, p := range providers {
		for _, task := range one(m.Tasks, base.Task) {
			for _, lang := range one(m.Languages, base.Language) {
				for _, prof := range one(m.Profiles, base.Profile) {
					o := base
					if len(m.Providers) > 0 {
						o.ProviderName, o.BaseURL, o.Model, o.APIKeyEnv, o.APIKey, o.Stream = p.Name, p.BaseURL, p.Model, p.KeyEnv, "", p.Stream
						if p.Capacity > 0 {
							o.Capacity = strconv.Itoa(p.Capacity)
						}
					}
					o.Task, o.Language, o.Profile = m.taskRef(task), lang, prof
					if len(m.Cases) > 0 {
						o.Formations = slices.Clone(m.Cases)
					} else {
						o.Formations = slices.Clone(base.Formations)
					}
					if m.Repeat > 0 {
						o.Repeat = m.Repeat
					}
					if err := o.Normalize(); err != nil {
						var oe *OptionError
						if errors.As(err, &oe) {
							if f, ok := fileFieldOf[oe.Field]; ok && len(m.Providers) > 0 {
								return nil, &MatrixFileError{Path: m.Path, Field: fmt.Sprintf("providers[%d].%s", i, f), Problem: oneLine(oe.Reason)}
							}
						}
						return nil, err
					}
					cells = append(cells, o)
				}
			}
		}
	}
	return cells, nil
}

// cellLabels returns, for each cell, the provider, model and task it runs, naming only those of
// the three that differ between cells ("provider b, model m2"): a case's name already says its
// formation, profile, language and repeat. The provider is its name, else "reference" for the
// embedded one, else its base URL.
func cellLabels(cells []Options) []string {
	provider := func(o Options) string {
		switch {
		case o.ProviderName != "":
			return o.ProviderName
		case o.BaseURL == "":
			return ReferenceProviderName
		}
		return o.BaseURL
	}
	axes := []struct {
		name string
		of   func(Options) string
	}{{"provider", provider}, {"model", func(o Options) string { return o.Model }}, {"task", func(o Options) string { return o.Task }}}
	labels := make([]string, len(cells))
	for _, a := range axes {
		varies := false
		for _, c := range cells {
			varies = varies || a.of(c) != a.of(cells[0])
		}
		if !varies {
			continue
		}
		for i, c := range cells {
			v := a.of(c)
			if v == "" {
				v = "default"
			}
			if labels[i] != "" {
				labels[i] += ", "
			}
			labels[i] += a.name + " " + v
		}
	}
	return labels
}

// RunMatrix runs cells (MatrixFile.Cells, or one Options) one after another into the one evidence
// store under their OutDir (every cell must share OutDir, InvocationID and Command) and returns
// the summary of all their cases, in cell order. Every case of every cell is its own run with its
// own verdict; none is re-run. It stops at the first cell whose Run returns an error, returning
// the summary so far with it.
func RunMatrix(ctx context.Context, cells []Options) (sum Summary, err error) {
	if len(cells) == 0 {
		return Summary{}, fmt.Errorf("%w: a matrix of no cells", ErrBadOptions)
	}
	var providers, models []string
	start, planned := time.Now(), 0
	// The totals are the whole matrix's: every cell's cases, planned and finished, and its wall time.
	defer func() { sum.Totals = SummarizeRun(sum.Cases, planned, time.Since(start)) }()
	if len(cells) > 1 {
		// One progress for the whole matrix: case numbers and the ETA run on across cells.
		total := 0
		for _, c := range cells {
			total += len(c.Formations) * max(c.Repeat, 1)
		}
		prog := newProgress(cells[0].Progress, cells[0].ProgressStyle, newRedactor(cells[0], os.Environ()), total, cells[0].Concurrency)
		defer prog.close()
		offset := 0
		labels := cellLabels(cells)
		for i := range cells {
			cells[i].progressShared, cells[i].progressOffset, cells[i].progressLabel = prog, offset, labels[i]
			offset += len(cells[i].Formations) * max(cells[i].Repeat, 1)
		}
	}
	for i, c := range cells {
		if c.OutDir != cells[0].OutDir || c.InvocationID != cells[0].InvocationID {
			return sum, fmt.Errorf("%w: cell %d: every cell shares one out directory and invocation", ErrBadOptions, i)
		}
		s, err := Run(ctx, c)
		if i == 0 {
			sum = Summary{OutDir: s.OutDir, StorePath: s.StorePath, GatewayDB: s.GatewayDB}
		}
		planned += s.Totals.Cases
		sum.Cases = append(sum.Cases, s.Cases...)
		sum.Sealed = append(sum.Sealed, s.Sealed...)
		sum.Reference = sum.Reference || s.Reference
		sum.ReferenceHandlerSeconds += s.ReferenceHandlerSeconds
		if s.Provider != "" && !slices.Contains(providers, s.Provider) {
			providers = append(providers, s.Provider)
		}
		if s.Model != "" && !slices.Contains(models, s.Model) {
			models = append(models, s.Model)
		}
		sum.Provider, sum.Model = strings.Join(providers, "; "), strings.Join(models, ", ")
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}
