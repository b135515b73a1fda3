package indexer_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/assay-audit/assay/indexer"
)

// lookupModule has identifiers that differ only in case (Execute, execute),
// identifiers that LIKE's wildcards would confuse (do_it, doXit), two files
// named main.go, and a test file, so that symbol and file lookups are
// exercised where a loose match gives a wrong answer.
var lookupModule = map[string]string{
	"go.mod": "module example.com/look\n\ngo 1.22\n",
	"cobra/command.go": `package cobra

// Command is a command.
type Command struct{ hooks []func() }

// Execute runs the command.
func (c *Command) Execute() error { _, err := c.ExecuteC(); return err }

func (c *Command) execute() error { return nil }

// ExecuteC runs the command and returns it.
func (c *Command) ExecuteC() (*Command, error) { return c, c.execute() }

func do_it() {}

func doXit() { do_it() }
`,
	"cobra/hooks.go": `package cobra

// Hook runs before a command.
type Hook interface{ Run() }

func (c *Command) runHooks(h Hook, f func()) {
	h.Run()
	f()
}
`,
	"cobra/command_test.go": `package cobra

import "testing"

func TestExecute(t *testing.T) {
	if err := (&Command{}).Execute(); err != nil {
		t.Fatal(err)
	}
}
`,
	"cmd/a/main.go": "package main\n\nfunc main() { run() }\n\nfunc run() {}\n",
	"cmd/b/main.go": "package main\n\nfunc main() {}\n",
}

func lookupDB(t *testing.T) *sql.DB {
	t.Helper()
	// Indexed once for the five query tests that read it.
	snap := sharedIndexOf(t, "lookup", lookupModule, indexer.Options{Dir: ".", Tests: true, Env: []string{"GOPROXY=off"}})
	db, err := indexer.OpenDatabase(context.Background(), snap.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestQueryResolveSymbolIsExactAndCaseSensitive(t *testing.T) {
	db := lookupDB(t)
	const p = "example.com/look/cobra"
	for _, tc := range []struct {
		name, symbol, want string
	}{
		{"unique suffix", "Command.ExecuteC", "method:" + p + ".Command.ExecuteC"},
		{"exported name beside an unexported one differing in case", "Command.Execute", "method:" + p + ".Command.Execute"},
		{"unexported name beside an exported one", "cobra.Command.execute", "method:" + p + ".Command.execute"},
		{"full node id", "method:" + p + ".Command.ExecuteC", "method:" + p + ".Command.ExecuteC"},
		{"id without prefix", p + ".Command.Execute", "method:" + p + ".Command.Execute"},
		{"underscore is a letter, not a wildcard", "cobra.do_it", "func:" + p + ".do_it"},
		{"package by path suffix", "look/cobra", "pkg:" + p},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := indexer.ResolveSymbol(context.Background(), db, tc.symbol)
			if err != nil || got != tc.want {
				t.Fatalf("ResolveSymbol(%q) = %q, %v; want %q", tc.symbol, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, symbol string }{
		{"other case", "command.executec"},
		{"all capitals", "Command.EXECUTE"},
		{"underscore wildcard", "Command.E_ecuteC"},
		{"percent wildcard", "Command.%C"},
		{"percent alone", "%"},
		{"empty", ""},
		{"suffix inside a name", "ommand.ExecuteC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := indexer.ResolveSymbol(context.Background(), db, tc.symbol)
			if !errors.Is(err, indexer.ErrSymbolNotFound) {
				t.Fatalf("ResolveSymbol(%q) = %q, %v; want ErrSymbolNotFound", tc.symbol, got, err)
			}
		})
	}
	_, err := indexer.ResolveSymbol(context.Background(), db, "main")
	var amb *indexer.AmbiguousSymbolError
	if !errors.As(err, &amb) || !cmp.Equal(amb.Candidates, []string{"func:example.com/look/cmd/a.main", "func:example.com/look/cmd/b.main"}) {
		t.Fatalf("ResolveSymbol(main) = %v; want both main funcs as candidates", err)
	}
}
