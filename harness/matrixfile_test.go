package harness

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

func writeMatrixFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "matrix.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every malformed matrix file is refused with one MatrixFileError naming the file, the field in
// the file's own terms and the problem; nothing is run or written (LoadMatrixFile and Cells read
// only the file and the environment).
func TestMatrixFileRefusals(t *testing.T) {
	t.Setenv("ASSAY_TEST_MATRIX_UNSET", "")
	tests := []struct {
		name, body, field, problem string
	}{
		{"empty", "", "", "is empty"},
		{"not yaml", "providers: [\n", "", "not valid YAML"},
		{"duplicate key", "repeat: 1\nrepeat: 2\n", "", `key "repeat" is given twice, at lines 1 and 2`},
		{"unknown top-level field", "repeats: 2\n", "", "repeats"},
		{"unknown provider field", "providers:\n  - {name: a, api_key: sk-123}\n", "providers[0]", "api_key"},
		{"provider without name", "providers:\n  - {model: m}\n", "providers[0]", "name"},
		{"repeat zero", "repeat: 0\n", "repeat", "minimum"},
		{"repeat not a number", "repeat: twice\n", "repeat", "integer"},
		{"base_url not http", "providers:\n  - {name: a, base_url: ftp://x, model: m}\n", "providers[0].base_url", "pattern"},
		{"base_url without model", "providers:\n  - {name: a, base_url: http://127.0.0.1:1/v1}\n", "providers[0].model", "required with base_url"},
		{"reference with base_url", "providers:\n  - {name: a, reference: true, base_url: http://127.0.0.1:1/v1, model: m}\n", "providers[0].base_url", "takes no base_url"},
		{"key_env without base_url", "providers:\n  - {name: a, key_env: OPENAI_API_KEY}\n", "providers[0].key_env", "takes no key"},
		{"key_env is a key", "providers:\n  - {name: a, base_url: http://127.0.0.1:1/v1, model: m, key_env: sk-live-123}\n", "providers[0].key_env", "pattern"},
		{"a url named reference", "providers:\n  - {name: reference, base_url: http://127.0.0.1:1/v1, model: m}\n", "providers[0].name", "embedded reference"},
		{"duplicate provider names", "providers:\n  - {name: a}\n  - {name: a, model: m2}\n", "providers[1].name", "providers[0]"},
		{"reference model id with a space", "providers:\n  - {name: a, model: \"ref model\"}\n", "providers[0].model", "pattern"},
		{"unknown case", "cases: [sequential, nosuch]\n", "cases[1]", "names unknown formation \"nosuch\""},
		{"all with others", "cases: [all, sequential]\n", "cases[0]", "stands alone"},
		{"cases a string", "cases: sequential\n", "cases", ""},
		{"duplicate case", "cases: [sequential, sequential]\n", "cases[1]", "repeat: N"},
		{"unknown task", "tasks: [double, sort]\n", "tasks[1]", `unknown task "sort"`},
		{"task file that does not parse", "tasks: [double, broken.yaml]\n", "tasks[1]", "broken.yaml"},
		{"capacity on a case it does not apply to", "providers:\n  - {name: a, capacity: 2}\ncases: [sequential]\n", "providers[0].capacity", "cannot be applied"},
		{"unknown language", "languages: [rust]\n", "languages[0]", "rust"},
		{"unknown profile", "profiles: [huge]\n", "profiles[0]", "huge"},
		{"empty list", "languages: []\n", "languages", "minItems"},
		{"key_env unset", "providers:\n  - {name: a, base_url: http://127.0.0.1:1/v1, model: m, key_env: ASSAY_TEST_MATRIX_UNSET}\n", "providers[0].key_env", "ASSAY_TEST_MATRIX_UNSET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeMatrixFile(t, tc.body)
			// A task file beside the matrix file that does not parse (tasks entries are relative to it).
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "broken.yaml"), []byte("name: [\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := LoadMatrixFile(path)
			if err == nil {
				_, err = m.Cells(Options{OutDir: filepath.Join(t.TempDir(), "out")})
			}
			var fe *MatrixFileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrBadOptions) {
				t.Fatalf("err %v, want a *MatrixFileError", err)
			}
			if fe.Path != path || fe.Field != tc.field || !strings.Contains(fe.Problem, tc.problem) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("refusal %q (field %q), want field %q and a problem naming %q on one line", err, fe.Field, tc.field, tc.problem)
			}
			if !strings.HasPrefix(err.Error(), "matrix file "+path) {
				t.Fatalf("refusal %q does not name the file first", err)
			}
		})
	}
	if _, err := LoadMatrixFile(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("a missing file: %v", err)
	}
}

// The cells are the cross product providers x tasks x languages x profiles, each running the
// file's cases with its repeat count; a provider's name, URL, model, key variable and stream
// setting are the cell's, and an axis the file leaves out is base's.
func TestMatrixFileCells(t *testing.T) {
	t.Setenv("ASSAY_TEST_MATRIX_KEY", "sk-test-not-real")
	path := writeMatrixFile(t, `
providers:
  - {name: ref-a, reference: true, model: ref-model-a}
  - {name: ref-b, model: ref-model-b}
  - {name: remote, base_url: "http://127.0.0.1:1/v1", model: gpt-x, key_env: ASSAY_TEST_MATRIX_KEY, stream: true}
cases: [sequential, pipeline, parallel]
tasks: [double]
languages: [go, python]
repeat: 2
`)
	m, err := LoadMatrixFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Axes(), ","); got != "providers,cases,tasks,languages,repeat" {
		t.Fatalf("axes %s", got)
	}
	cells, err := m.Cells(Options{OutDir: filepath.Join(t.TempDir(), "out"), Profile: "single-file", Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 6 {
		t.Fatalf("%d cells, want 3 providers x 2 languages", len(cells))
	}
	want := []struct{ name, model, base, lang string }{
		{"ref-a", "ref-model-a", "", "go"}, {"ref-a", "ref-model-a", "", "python"},
		{"ref-b", "ref-model-b", "", "go"}, {"ref-b", "ref-model-b", "", "python"},
		{"remote", "gpt-x", "http://127.0.0.1:1/v1", "go"}, {"remote", "gpt-x", "http://127.0.0.1:1/v1", "python"},
	}
	for i, c := range cells {
		w := want[i]
		if c.ProviderName != w.name || c.Model != w.model || c.BaseURL != w.base || c.Language != w.lang || c.Profile != "single-file" ||
			c.Task != BuiltinTask || c.Repeat != 2 || strings.Join(c.Formations, ",") != "sequential,pipeline,parallel" || c.Concurrency != 2 {
			t.Fatalf("cell %d = %s %s %s %s %s %s %d %v", i, c.ProviderName, c.Model, c.BaseURL, c.Language, c.Profile, c.Task, c.Repeat, c.Formations)
		}
	}
	if cells[4].APIKey != "sk-test-not-real" || !cells[4].Stream || cells[0].APIKey != "" || cells[0].Stream {
		t.Fatal("the provider's key variable and stream setting are not the cell's alone")
	}
	// A file without providers runs base's provider, with base's name (none).
	m, err = LoadMatrixFile(writeMatrixFile(t, "repeat: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	cells, err = m.Cells(Options{OutDir: filepath.Join(t.TempDir(), "out"), Formations: []string{"reflection"}})
	if err != nil || len(cells) != 1 || cells[0].ProviderName != "" || cells[0].Repeat != 3 || cells[0].Formations[0] != "reflection" {
		t.Fatalf("cells %+v %v", cells, err)
	}
}

// An unknown task and a negative repeat are refused, whoever sets them.
func TestOptionsTaskAndRepeat(t *testing.T) {
	for _, tc := range []struct {
		o     Options
		field string
	}{
		{Options{Task: "sort"}, "Task"},
		{Options{Repeat: -1}, "Repeat"},
		{Options{ProviderName: ReferenceProviderName, BaseURL: "http://127.0.0.1:1/v1", Model: "m"}, "ProviderName"},
		{Options{Model: "has space"}, "Model"},
	} {
		tc.o.OutDir = filepath.Join(t.TempDir(), "out")
		var oe *OptionError
		if err := tc.o.Normalize(); !errors.As(err, &oe) || oe.Field != tc.field {
			t.Fatalf("Normalize(%+v) = %v, want an OptionError naming %s", tc.o, err, tc.field)
		}
	}
	o := Options{OutDir: filepath.Join(t.TempDir(), "out")}
	if err := o.Normalize(); err != nil || o.task == nil || o.task.Name != BuiltinTask || o.Repeat != 0 {
		t.Fatalf("defaults: task %q repeat %d %v", o.Task, o.Repeat, err)
	}
}

// Resume and replay re-apply a run's recorded provider name and task: the default labels map back
// to no name and a matrix name to itself (the task is the run's stored task file: recordedTask).
func TestRecordedProviderName(t *testing.T) {
	for _, tc := range []struct {
		e    evidence.Envelope
		name string
	}{
		{evidence.Envelope{Provider: "reference"}, ""},
		{evidence.Envelope{Provider: "http://127.0.0.1:1/v1", BaseURL: "http://127.0.0.1:1/v1", Task: "double"}, ""},
		{evidence.Envelope{Provider: "ref-b", Model: "ref-model-b", Task: "double", Repeat: 2}, "ref-b"},
		{evidence.Envelope{Provider: "openai", BaseURL: "https://api.openai.com/v1"}, "openai"},
	} {
		if n := recordedProviderName(tc.e); n != tc.name {
			t.Errorf("%+v: name %q, want %q", tc.e, n, tc.name)
		}
		o := Options{BaseURL: tc.e.BaseURL, ProviderName: recordedProviderName(tc.e)}
		if got := providerName(o); got != tc.e.Provider {
			t.Errorf("%+v: the re-applied envelope names provider %q", tc.e, got)
		}
	}
}
