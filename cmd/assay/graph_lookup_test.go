package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// indexLookupModule writes a module with two main.go files, a test file and
// a dynamic call site, indexes it with the CLI, and returns the output
// directory.
func indexLookupModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":        "module example.com/look\n\ngo 1.22\n",
		"cmd/a/main.go": "package main\n\nfunc main() { run() }\n\nfunc run() {}\n",
		"cmd/b/main.go": "package main\n\nfunc main() {}\n",
		"cobra/command.go": `package cobra

// Command is a command.
type Command struct{}

// Execute runs the command.
func (c *Command) Execute() error { return c.execute() }

func (c *Command) execute() error { return nil }

// Hook runs before a command.
type Hook interface{ Run() }

func (c *Command) runHooks(h Hook, f func()) {
	h.Run()
	f()
}
`,
		"cobra/command_test.go": "package cobra\n\nimport \"testing\"\n\nfunc TestExecute(t *testing.T) { (&Command{}).Execute() }\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	if r := runCLI(t, "index", "--out", out, "--metrics=false", dir); r.code != 0 {
		t.Fatalf("index exit %d: %s", r.code, r.stderr)
	}
	return out
}

func TestGraphSymbolsByPathSuffix(t *testing.T) {
	t.Parallel()
	out := indexLookupModule(t)

	amb := runCLI(t, "graph", "symbols", "--out", out, "main.go")
	if amb.code != 2 {
		t.Fatalf("symbols main.go: exit %d, want 2\n%s%s", amb.code, amb.stdout, amb.stderr)
	}
	oneLine(t, amb, "cmd/a/main.go, cmd/b/main.go")

	for _, file := range []string{"a/main.go", "cmd/a/main.go"} {
		r := runCLI(t, "graph", "symbols", "--out", out, file)
		if r.code != 0 || !strings.Contains(r.stdout, "func:example.com/look/cmd/a.run") || strings.Contains(r.stdout, "cmd/b") {
			t.Errorf("symbols %s: exit %d\n%s%s", file, r.code, r.stdout, r.stderr)
		}
	}
	for _, file := range []string{"ain.go", "d/main.go"} {
		r := runCLI(t, "graph", "symbols", "--out", out, file)
		if r.code != 2 {
			t.Errorf("symbols %s: exit %d, want 2", file, r.code)
		}
		oneLine(t, r, "no indexed file")
	}
}

func TestGraphSymbolsVariant(t *testing.T) {
	t.Parallel()
	out := indexLookupModule(t)
	const base, test = "method:example.com/look/cobra.Command.Execute", "method:example.com/look/cobra [example.com/look/cobra.test].Command.Execute"

	def := runCLI(t, "graph", "symbols", "--out", out, "cobra/command.go")
	if def.code != 0 || strings.Count(def.stdout, base+" ") != 1 || strings.Contains(def.stdout, test) {
		t.Fatalf("symbols (base variants): exit %d, want %s once and no test variant\n%s%s", def.code, base, def.stdout, def.stderr)
	}
	if header := strings.Fields(strings.SplitN(def.stdout, "\n", 2)[0]); !slices.Contains(header, "VARIANT") {
		t.Errorf("symbols header = %v, want a VARIANT column", header)
	}

	var all []struct{ ID, Variant string }
	r := runCLI(t, "graph", "symbols", "--out", out, "--variant", "all", "--format", "json", "cobra/command.go")
	if err := json.Unmarshal(listOf(t, r.stdout, "symbols"), &all); err != nil || r.code != 0 {
		t.Fatalf("symbols --variant all json: exit %d %v %q", r.code, err, r.stdout)
	}
	got := map[string]string{}
	for _, s := range all {
		got[s.ID] = s.Variant
	}
	if got[base] != "base" || got[test] != "test" {
		t.Errorf("variants = %v; want %s base and %s test", got, base, test)
	}

	testFile := runCLI(t, "graph", "symbols", "--out", out, "command_test.go")
	if testFile.code != 2 {
		t.Fatalf("symbols of a _test.go file without --variant all: exit %d, want 2", testFile.code)
	}
	oneLine(t, testFile, "--variant all")
	if r := runCLI(t, "graph", "symbols", "--out", out, "--variant", "all", "command_test.go"); r.code != 0 || !strings.Contains(r.stdout, "TestExecute") {
		t.Errorf("symbols --variant all command_test.go: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "graph", "symbols", "--out", out, "--variant", "test", "cobra/command.go"); r.code != 2 {
		t.Errorf("--variant test: exit %d, want 2", r.code)
	}
}

func TestGraphCallsNameDeclarationAndCallSite(t *testing.T) {
	out := indexLookupModule(t)

	r := runCLI(t, "graph", "callees", "--out", out, "cobra.Command.runHooks")
	if r.code != 0 {
		t.Fatalf("callees: exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if header := strings.Fields(lines[0]); !slices.Equal(header, []string{"KIND", "CALLER", "CALLEE", "VARIANT", "CALLER_DECL", "CALL_SITE"}) {
		t.Fatalf("callees header = %v", header)
	}
	var edge, site []string
	for _, l := range lines[1:] {
		switch f := strings.Fields(l); f[0] {
		case "calls_dynamic":
			edge = f
		case "dynamic_site":
			site = f
		}
	}
	// runHooks is declared at line 14; h.Run() is at 15:2 (an edge, whose
	// call position the graph does not store) and f() at 16:2, whose
	// opening parenthesis, the position recorded, is at 16:3.
	if len(edge) == 0 || edge[len(edge)-2] != "cobra/command.go:14" || edge[len(edge)-1] != "-" {
		t.Errorf("calls_dynamic row = %q; want CALLER_DECL cobra/command.go:14 and no call site\n%s", edge, r.stdout)
	}
	if len(site) == 0 || site[len(site)-2] != "cobra/command.go:14" || site[len(site)-1] != "cobra/command.go:16:3" {
		t.Errorf("dynamic_site row = %q; want CALLER_DECL cobra/command.go:14 and CALL_SITE cobra/command.go:16:3\n%s", site, r.stdout)
	}

	j := runCLI(t, "graph", "callees", "--out", out, "--format", "json", "cobra.Command.runHooks")
	var got struct {
		DynamicSites []struct {
			Src      struct{ Line int }
			CallFile string `json:"call_file"`
			CallLine int    `json:"call_line"`
			CallCol  int    `json:"call_col"`
		} `json:"dynamic_sites"`
	}
	if err := json.Unmarshal([]byte(j.stdout), &got); err != nil || j.code != 0 {
		t.Fatalf("callees json: exit %d %v %q", j.code, err, j.stdout)
	}
	if len(got.DynamicSites) != 1 || got.DynamicSites[0].Src.Line != 14 || got.DynamicSites[0].CallFile != "cobra/command.go" ||
		got.DynamicSites[0].CallLine != 16 || got.DynamicSites[0].CallCol != 3 {
		t.Errorf("dynamic sites = %+v; want the declaration at 14 and the call at cobra/command.go:16:3", got.DynamicSites)
	}
}

func TestGraphSubcommandHelpSaysWhatArgumentsMayBe(t *testing.T) {
	for _, q := range []string{"symbols", "callers", "callees"} {
		r := runCLI(t, "graph", q, "--help")
		for _, want := range []string{"a FILE is", "--variant all", "A SYMBOL is", "case-sensitively", "CALL_SITE", "docs/cli.md"} {
			if r.code != 0 || !strings.Contains(r.stdout, want) {
				t.Errorf("graph %s --help: exit %d, want %q in\n%s", q, r.code, want, r.stdout)
			}
		}
	}
	ref := oneSpaced(cliReference(t, "## assay graph"))
	for _, want := range []string{"A FILE is", "A SYMBOL is", "case-sensitively", "CALL_SITE (file:line:col", "a _test.go file needs `--variant all`"} {
		if !strings.Contains(ref, want) {
			t.Errorf("docs/cli.md, assay graph, lacks %q", want)
		}
	}
}
