package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// call runs a command's runX with fake streams, as its RunE would, and returns what assay shows:
// the exit status decided from the error, stdout, and stderr ending with the error's line.
func call(t *testing.T, stdin string, runX func(ctx context.Context, io IOStreams) error) result {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runX(context.Background(), IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	code := report(&errOut, err)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// The exit status is decided by the error's type, wherever it is in the chain and whatever its
// text: 2 only for bad input, usage, options or a lock; 1 for everything else.
func TestExitCodeIsDecidedByTheErrorType(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", err)) }
	for _, target := range badInput {
		if got := exitCode(wrap(target)); got != 2 {
			t.Errorf("%v, wrapped: exit %d, want 2", target, got)
		}
	}
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"nothing", nil, 0},
		{"bad usage", usageErrorf("--format %q is not one of table, json", "xml"), 2},
		{"an option the harness refuses", fmt.Errorf("case x: %w", (&harness.Options{Concurrency: -1, OutDir: t.TempDir()}).Normalize()), 2},
		{"a lock", &evidence.LockedError{Path: "x", PID: 7}, 2},
		{"a missing store", &evidence.NoStoreError{Path: "x", Err: fs.ErrNotExist}, 2},
		{"an ambiguous symbol", &indexer.AmbiguousSymbolError{Symbol: "F", Candidates: []string{"a.F", "b.F"}}, 2},
		{"an ambiguous file", &indexer.AmbiguousFileError{File: "a.go", Candidates: []string{"x/a.go", "y/a.go"}}, 2},
		{"a failed check", failed("1 of 2 cases not accepted: sequential rejected"), 1},
		{"a failed check whose text says invalid", failed("invalid options: --concurrency"), 1},
		{"an I/O failure", &fs.PathError{Op: "mkdir", Path: "/x/y", Err: errors.New("not a directory")}, 1},
		{"a store failure", fmt.Errorf("evidence: record check: %w", errors.New("disk I/O error")), 1},
		{"no receipt", fmt.Errorf("%w x in db", harness.ErrNoReceipt), 1},
		{"a manifest refused", fmt.Errorf("%w: [run-a tampered]", evidence.ErrManifestRefused), 1},
		{"an interruption", context.Canceled, 1},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s (%v): exit %d, want %d", c.name, c.err, got, c.want)
		}
	}
	// Every sentinel the table names is one of the packages' own, not a copy.
	for _, s := range []error{harness.ErrBadOptions, evidence.ErrLocked, reference.ErrInvalidConfig, policy.ErrInvalidPolicy,
		oracle.ErrInvalidSpec, indexer.ErrNoPackages, metrics.ErrNoMetrics} {
		if exitCode(s) != 2 {
			t.Errorf("%v is not bad input", s)
		}
	}
}

// The one line printed names this command line's flags where the library names option fields
// (the field refused and those its reason names), and adds the fix the command knows.
func TestMessageNamesFlagsForFields(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a refused field", (&harness.Options{OutDir: t.TempDir(), Concurrency: -1}).Normalize(),
			"invalid options: --concurrency -1 is negative"},
		{"a field and the one its reason names", (&harness.Options{OutDir: t.TempDir(), BaseURL: "http://127.0.0.1:1/v1"}).Normalize(),
			"invalid options: --model is required with --base-url"},
		{"a budget", (&harness.Options{OutDir: t.TempDir(), TeamToolCalls: -1}).Normalize(),
			"invalid options: --team-tool-calls -1 is negative (0 means the default, 2000)"},
		{"an evidence field", func() error {
			_, err := evidence.ExportParquet(context.Background(), "x", "", evidence.ExportOptions{})
			return err
		}(),
			"invalid argument: --parquet is required"},
		{"an oracle option", oracle.Options{Deadline: -1}.Validate(), "--deadline -1ns is negative"},
		{"a lock", &evidence.LockedError{Path: "s.duckdb", PID: 7, Command: "assay matrix run"},
			"evidence store s.duckdb is open for writing by pid 7 (assay matrix run); wait for it or pass --wait DURATION"},
		{"an older store", &evidence.SchemaVersionError{Path: "s.duckdb", Found: 1, Supported: 3},
			"upgrade it with: assay store migrate --store s.duckdb"},
		{"a missing store", &evidence.NoStoreError{Path: "o/evidence.duckdb", Err: fs.ErrNotExist},
			"evidence: no evidence store at o/evidence.duckdb; run 'assay matrix run' first, or name one with --out or --store"},
		{"lines joined", errors.New("first\nsecond"), "first second"},
	} {
		msg := message(c.err)
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line containing %q", c.name, msg, c.want)
		}
		for _, field := range []string{"Concurrency", "BaseURL", "TeamToolCalls", "field dir", "Deadline"} {
			if strings.Contains(msg, field) {
				t.Errorf("%s: %q names the field %s, not its flag", c.name, msg, field)
			}
		}
	}
}

// One test per exit status class, through the commands' runX: bad options and a lock are 2; an
// I/O failure and a failed check are 1.
func TestExitStatusClasses(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("bad option is 2 and writes nothing", func(t *testing.T) {
		out := filepath.Join(dir, "out-bad")
		r := call(t, "", func(ctx context.Context, io IOStreams) error {
			return runMatrixRun(ctx, &MatrixRunOptions{IO: io, Harness: harness.Options{OutDir: out, Concurrency: -2}})
		})
		if r.code != 2 || r.stderr != "assay: invalid options: --concurrency -2 is negative\n" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s was created", out)
		}
	})
	t.Run("an output directory that cannot be created is an I/O failure, 1", func(t *testing.T) {
		r := call(t, "", func(ctx context.Context, io IOStreams) error {
			return runMatrixRun(ctx, &MatrixRunOptions{IO: io, Harness: harness.Options{OutDir: filepath.Join(file, "out"), Formations: []string{"sequential"}}})
		})
		if r.code != 1 || !strings.Contains(r.stderr, "not a directory") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		oneLine(t, r, "create output directory")
	})
	t.Run("an unreadable store path is an I/O failure, 1", func(t *testing.T) {
		for name, runX := range map[string]func(ctx context.Context, io IOStreams) error{
			"verify": func(ctx context.Context, io IOStreams) error {
				return runVerify(ctx, &VerifyOptions{IO: io, Store: storeFlags{store: filepath.Join(file, "evidence.duckdb")}})
			},
			"sql": func(ctx context.Context, io IOStreams) error {
				return runSQL(ctx, &SQLOptions{IO: io, Store: storeFlags{store: filepath.Join(file, "evidence.duckdb")}, Query: "SELECT 1"})
			},
			"effects": func(ctx context.Context, io IOStreams) error {
				return runEffects(ctx, &EffectsOptions{IO: io, Store: storeFlags{store: filepath.Join(file, "evidence.duckdb")}})
			},
		} {
			r := call(t, "", runX)
			if r.code != 1 {
				t.Errorf("%s: exit %d, want 1: %s", name, r.code, r.stderr)
			}
			oneLine(t, r, "not a directory")
		}
	})
	t.Run("a missing store is bad input, 2", func(t *testing.T) {
		r := call(t, "", func(ctx context.Context, io IOStreams) error {
			return runVerify(ctx, &VerifyOptions{IO: io, Store: storeFlags{out: filepath.Join(dir, "none")}})
		})
		if r.code != 2 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		oneLine(t, r, "run 'assay matrix run' first")
	})
	t.Run("a tampered trace is a failed check, 1", func(t *testing.T) {
		path := storeWithRuns(t, t.TempDir(), "run-x")
		rawSQL(t, path, `UPDATE events SET payload = '{"n":99}' WHERE run_id = 'run-x' AND seq = 3`)
		r := call(t, "", func(ctx context.Context, io IOStreams) error {
			return runVerify(ctx, &VerifyOptions{IO: io, Store: storeFlags{store: path}})
		})
		if r.code != 1 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		oneLine(t, r, "run-x tampered at seq 3")
	})
}

// A value a typed flag cannot parse is bad usage whose one line names the flag, the value and what
// it should have been, never the parser's Go text (strconv.ParseInt, invalid syntax, time:): every
// int, uint, float, bool and duration flag of every command is given one.
func TestUnparsableFlagValuesSayWhatTheValueShouldBe(t *testing.T) {
	io := IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	var tried int
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			typ := f.Value.Type()
			var want string
			switch {
			case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"):
				want = "not a whole number"
			case strings.HasPrefix(typ, "float"):
				want = "not a number"
			case typ == "bool":
				want = "not true or false"
			case typ == "duration":
				want = "not a duration"
			default:
				return
			}
			tried++
			path := strings.Fields(c.CommandPath())[1:]
			r := runCLIQuiet(append(path, "--"+f.Name+"=1.5x")...)
			if r.code != 2 || !strings.Contains(r.stderr, `--`+f.Name) || !strings.Contains(r.stderr, `"1.5x"`) ||
				!strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s --%s=1.5x (%s): exit %d, stderr %q, want one line with %q", c.CommandPath(), f.Name, typ, r.code, r.stderr, want)
			}
			for _, leak := range []string{"strconv", "Parse", "invalid syntax", "time: ", "invalid argument"} {
				if strings.Contains(r.stderr, leak) {
					t.Errorf("%s --%s: %q shows the parser's text %q", c.CommandPath(), f.Name, r.stderr, leak)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewCmdRoot(io))
	if tried < 10 {
		t.Fatalf("only %d typed flags found: the walk does not reach the commands", tried)
	}
	// An integer out of its type's range says so.
	r := runCLIQuiet("matrix", "run", "--repeat", "99999999999999999999")
	oneLine(t, r, `--repeat "99999999999999999999": out of range for a whole number`)
}

// A command given the wrong number of arguments says so once, in one line that does not repeat the
// program's name ("assay: assay sql takes ..."), with the count in words that agree with it.
func TestWrongArgumentCountsAreSaidOnce(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sql"}, "assay: sql takes exactly one QUERY, got 0 arguments (see 'assay sql --help')"},
		{[]string{"approve", "r"}, "assay: approve takes RUN and CALL, got 1 argument (see 'assay approve --help')"},
		{[]string{"reconcile", "a", "b", "c"}, "assay: reconcile takes RUN and CALL, got 3 arguments"},
		{[]string{"resume", "a", "b"}, "assay: resume takes one RUN, got 2 arguments"},
		{[]string{"index", "a", "b"}, "assay: index takes at most one PATH, got 2 arguments"},
		{[]string{"oracle", "check"}, "assay: oracle check takes exactly one FILE, got 0 arguments"},
		{[]string{"metrics", "explain"}, "assay: metrics explain takes exactly one METRIC (metrics: "},
		{[]string{"graph", "callers"}, "assay: graph callers takes one argument, got 0 arguments (see 'assay graph callers --help')"},
		{[]string{"graph", "path", "a"}, "assay: graph path takes 2 arguments, got 1 argument"},
		{[]string{"metrics", "foo"}, `assay: metrics takes no arguments, got "foo" (see 'assay metrics --help')`},
	} {
		r := runCLIQuiet(c.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "assay: assay") {
			t.Errorf("%q: exit %d, stderr %q, want one line starting %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// A value a flag names that cannot be used is said once, under the flag, without the package
// prefixes of the library that refused it ("reference: invalid config", "attest:") and with exit 2;
// so is a build context the go command does not support, and a directory named as a database.
func TestRefusedFlagValuesNameTheFlagWithoutPackagePrefixes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "not-a-key")
	if err := os.WriteFile(key, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	goFile := filepath.Join(dir, "double.go")
	if err := os.WriteFile(goFile, []byte("package double\n\nfunc Double[T int | float64](x T) T { return 2 * x }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	claimsFile := filepath.Join(dir, "claims.jsonl")
	if err := os.WriteFile(claimsFile, []byte(`{"session_id":"a","total_tokens":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"matrix", "run", "--reference-fault", "garbage"}, `assay: --reference-fault fault "garbage": want MEMBER:TURN:KIND[:ARG]`},
		{[]string{"matrix", "run", "--sign-key", key}, "assay: --sign-key: unusable key: " + key},
		{[]string{"usage", "reconcile", "--gateway-db", key, "--claims", dir}, "assay: --claims " + dir + " is a directory"},
		{[]string{"index", "--goos", "plan10", "--db", filepath.Join(dir, "g.db"), filepath.Join("..", "..", "internal", "jsonkeys")},
			"assay: indexer: invalid options: unsupported GOOS/GOARCH pair plan10/"},
		{[]string{"graph", "symbols", "--db", dir, "F"}, "assay: indexer: not a graph database: " + dir + " is a directory"},
		{[]string{"metrics", "--db", dir}, "assay: indexer: not a graph database: " + dir + " is a directory"},
		{[]string{"usage", "reconcile", "--gateway-db", key, "--claims", key, "--wait", "-1s"}, "assay: --wait -1s is negative (0 means not to wait)"},
		{[]string{"usage", "reconcile", "--gateway-db", key, "--claims", claimsFile}, "assay: --gateway-db: not a gateway usage database: " + key},
		{[]string{"oracle", "check", "--keep", filepath.Join(dir, "none"), goFile}, "assay: --keep " + filepath.Join(dir, "none") + " is not a directory"},
	} {
		r := runCLIQuiet(c.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q, want one line starting %q", c.args, r.code, r.stderr, c.want)
		}
		for _, leak := range []string{"invalid config", "attest:", "reference:", "exit status", "disk I/O error", "gateway: "} {
			if strings.Contains(r.stderr, leak) {
				t.Errorf("%q: %q says %q", c.args, r.stderr, leak)
			}
		}
	}
}

// A refused reconciliation writes nothing: naming a store that does not exist creates none (no
// database, no lock file, no directory), and an unknown run in a store that exists leaves its
// bytes as they were.
func TestARefusedReconciliationWritesNothing(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	r := runCLIQuiet("reconcile", "run-x", "exec-1:c", "--out", none, "--outcome", "succeeded", "--note", "n", "--operator", "me")
	if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("reconcile on no store: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(none); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused reconcile created %s (%v)", none, err)
	}
	path := storeWithRuns(t, dir, "run-a")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLIQuiet("reconcile", "run-x", "exec-1:c", "--store", path, "--outcome", "succeeded", "--note", "n", "--operator", "me")
	after, _ := os.ReadFile(path)
	if r.code != 2 || !strings.Contains(r.stderr, `"run-x"`) || !bytes.Equal(before, after) {
		t.Fatalf("reconcile of an unknown run: exit %d %q, store changed %v", r.code, r.stderr, !bytes.Equal(before, after))
	}
	if _, err := os.Stat(path + ".lock"); err == nil {
		if b, _ := os.ReadFile(path + ".lock"); len(b) > 0 {
			t.Fatalf("a refused reconcile left a held lock file: %q", b)
		}
	}
}
