package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// jsonCommands returns the path ("assay graph callers") of every runnable command under root that
// has a --format flag: each must print JSON with --format json (docs/json.md).
func jsonCommands(root *cobra.Command) []string {
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.Flags().Lookup("format") != nil {
			paths = append(paths, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return paths
}

// jsonWorld is what the commands of TestEveryJSONOutputFollowsTheConvention run against: a copy
// of the default matrix run's output directory (so that commands that write, such as store migrate
// or attest, change no shared fixture), with the metrics fixture module's index (fixtureIndex)
// copied into it.
type jsonWorld struct {
	out   string // evidence.duckdb, gateway-usage.db, graph.db
	index result // assay index --format json of the fixture module (fixtureIndex), its files copied into out
}

// jsonInvocations are the arguments (after the command path, before --format json) a command needs
// to print its JSON against the world; a command with none gets --out when it has that flag. A
// command whose output needs a run of its own returns it whole. A new command that needs more
// than --out fails the test until it has an entry here.
var jsonInvocations = map[string]func(t *testing.T, w jsonWorld) ([]string, *result){
	// A matrix run's JSON: the shared paused run's (exit 1), which also has a paused case's keys.
	"assay matrix run": func(t *testing.T, w jsonWorld) ([]string, *result) {
		r := approvedResumeRun(t).paused
		return nil, &r
	},
	"assay resume": func(t *testing.T, w jsonWorld) ([]string, *result) {
		r := approvedResumeRun(t).r
		return nil, &r
	},
	"assay index":      func(t *testing.T, w jsonWorld) ([]string, *result) { return nil, &w.index },
	"assay tasks show": func(t *testing.T, w jsonWorld) ([]string, *result) { return []string{"clamp"}, nil },
	"assay sql": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "SELECT run_id, verdict, '<&>' AS escaped FROM verdicts ORDER BY run_id"}, nil
	},
	"assay attest": func(t *testing.T, w jsonWorld) ([]string, *result) {
		key := filepath.Join(t.TempDir(), "assay.key")
		if r := runCLI(t, "keygen", "--out", key); r.code != 0 {
			t.Fatalf("keygen: exit %d: %s", r.code, r.stderr)
		}
		return []string{"--out", w.out, "--key", key, "--dir", t.TempDir()}, nil
	},
	"assay export": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "--parquet", filepath.Join(t.TempDir(), "parquet")}, nil
	},
	"assay graph callers": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "example.com/mx/cx.Fact"}, nil
	},
	"assay graph callees": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "example.com/mx/app.Run"}, nil
	},
	"assay graph path": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "example.com/mx/app", "example.com/mx/impl"}, nil
	},
	"assay graph symbols": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{"--out", w.out, "cx/cx.go"}, nil
	},
	"assay oracle check": func(t *testing.T, w jsonWorld) ([]string, *result) {
		return []string{writeOracleFile(t, "double.go", "package anything\n\nfunc Double[T ~int | ~float64](x T) T { return 2 * x }\n")}, nil
	},
	// A replay's JSON: the shared replay of the sequential case (replay verify --latest --format json).
	"assay replay verify": func(t *testing.T, w jsonWorld) ([]string, *result) {
		r := replayedSequentialRun(t).r
		return nil, &r
	},
	"assay gateway serve": func(t *testing.T, w jsonWorld) ([]string, *result) {
		r := serveUntilFirstValue(t, "gateway", "serve", "--upstream", "http://127.0.0.1:9/v1", "--addr", "127.0.0.1:0",
			"--db", filepath.Join(t.TempDir(), "gw.db"), "--format", "json")
		return nil, &r
	},
	"assay usage reconcile": func(t *testing.T, w jsonWorld) ([]string, *result) {
		claims := filepath.Join(t.TempDir(), "claims.jsonl")
		if err := os.WriteFile(claims, []byte(`{"session_id":"<&>","total_tokens":1}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"--gateway-db", filepath.Join(w.out, "gateway-usage.db"), "--claims", claims}, nil
	},
	"assay provider serve": func(t *testing.T, w jsonWorld) ([]string, *result) {
		r := serveUntilFirstValue(t, "provider", "serve", "--addr", "127.0.0.1:0", "--format", "json")
		return nil, &r
	},
}

// serveUntilFirstValue runs a command that serves until interrupted, and interrupts it once it
// printed its first JSON value; the result's stdout is that value.
func serveUntilFirstValue(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var errOut bytes.Buffer
	code := make(chan int, 1)
	go func() {
		c := run(ctx, args, IOStreams{In: strings.NewReader(""), Out: outW, ErrOut: &errOut})
		outW.Close()
		code <- c
	}()
	var first json.RawMessage
	dec := json.NewDecoder(outR)
	err := dec.Decode(&first)
	cancel()
	go io.Copy(io.Discard, io.MultiReader(dec.Buffered(), outR))
	c := <-code
	if err != nil {
		t.Fatalf("%v printed no JSON value: %v (exit %d: %s)", args, err, c, errOut.String())
	}
	return result{code: c, stdout: string(first), stderr: errOut.String()}
}

// TestEveryJSONOutputFollowsTheConvention runs every command of the tree that has --format with
// --format json and checks the output convention of docs/json.md on what it prints: one JSON
// object, a top-level schema_version, snake_case keys everywhere, no \u003c \u003e \u0026 escapes.
func TestEveryJSONOutputFollowsTheConvention(t *testing.T) {
	t.Parallel()
	m := defaultMatrixRun(t)
	w := jsonWorld{out: filepath.Join(t.TempDir(), "out")}
	copyTree(t, m.out, w.out)
	// The shared index of the fixture module (assay index --format json), its files copied in.
	var index string
	index, w.index = fixtureIndex(t)
	copyTree(t, index, w.out)

	paths := jsonCommands(NewCmdRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}))
	if len(paths) < 15 {
		t.Fatalf("only %d commands with --format in the tree: %v", len(paths), paths)
	}
	for _, path := range paths {
		t.Run(strings.ReplaceAll(strings.TrimPrefix(path, "assay "), " ", "_"), func(t *testing.T) {
			var r result
			args, whole := []string(nil), (*result)(nil)
			if inv, ok := jsonInvocations[path]; ok {
				args, whole = inv(t, w)
			} else if c, _, err := NewCmdRoot(IOStreams{}).Find(strings.Fields(path)[1:]); err == nil && c.Flags().Lookup("out") != nil {
				args = []string{"--out", w.out}
			}
			if whole != nil {
				r = *whole
			} else {
				r = runCLI(t, append(append(strings.Fields(path)[1:], args...), "--format", "json")...)
			}
			// Exit 1 is an outcome the JSON reports (a rejected case, a run that does not verify).
			if r.code != 0 && r.code != 1 {
				t.Fatalf("%s --format json: exit %d: %s\n(if it needs arguments, add them to jsonInvocations)", path, r.code, r.stderr)
			}
			for _, problem := range jsonConventionProblems(r.stdout) {
				t.Errorf("%s --format json: %s", path, problem)
			}
		})
	}
}

// jsonConventionProblems lists how out breaks the output convention; none when it keeps it.
func jsonConventionProblems(out string) []string {
	var problems []string
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
		if strings.Contains(out, esc) {
			problems = append(problems, "prints the HTML escape "+esc)
		}
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return append(problems, "is not JSON: "+err.Error())
	}
	if dec.More() {
		problems = append(problems, "prints more than one JSON value")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return append(problems, "is not one JSON object")
	}
	if v, ok := obj["schema_version"].(json.Number); !ok || v.String() != "1" {
		problems = append(problems, "has no top-level schema_version 1")
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snakeKey.MatchString(k) {
					problems = append(problems, "key "+at+"/"+k+" is not snake_case")
				}
				if k == "duration" || k == "elapsed" || k == "latency" || strings.HasSuffix(k, "_ms") || strings.HasSuffix(k, "_ns") || strings.HasSuffix(k, "_us") {
					problems = append(problems, "key "+at+"/"+k+": durations are seconds with the unit in the key (_seconds)")
				}
				if h, ok := x.(string); ok && strings.HasSuffix(k, "sha256") && h != "" && !fullSHA256.MatchString(h) {
					problems = append(problems, "key "+at+"/"+k+": "+h+" is not a full SHA-256 (64 hex digits)")
				}
				walk(x, at+"/"+k)
			}
		case []any:
			for _, x := range v {
				walk(x, at+"[]")
			}
		}
	}
	walk(doc, "")
	return problems
}

// fullSHA256 is a whole SHA-256 digest in hex: the convention never prints a shortened one.
var fullSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// The convention check itself fails on each thing it is there to catch.
func TestJSONConventionProblemsCatchEachBreach(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"list", `[{"a": 1}]`, "not one JSON object"},
		{"no version", `{"a": 1}`, "schema_version"},
		{"Go field name", `{"schema_version": 1, "x": [{"ExitCode": 0}]}`, "/x[]/ExitCode is not snake_case"},
		{"data key", `{"schema_version": 1, "x": {"exec-1": 0}}`, "/x/exec-1 is not snake_case"},
		{"escape", `{"schema_version": 1, "x": "a \u003e b"}`, `\u003e`},
		{"two values", `{"schema_version": 1} {}`, "more than one"},
		{"milliseconds", `{"schema_version": 1, "duration_ms": 3}`, "durations are seconds"},
		{"short hash", `{"schema_version": 1, "payload_sha256": "3f68340"}`, "not a full SHA-256"},
	} {
		got := strings.Join(jsonConventionProblems(tc.out), "; ")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q, want one naming %q", tc.name, got, tc.want)
		}
	}
	if p := jsonConventionProblems(`{"schema_version": 1, "a_b": [{"c2": "<&>"}]}`); len(p) != 0 {
		t.Errorf("a conventional output has problems: %v", p)
	}
}

// Recorded check evidence is re-presented, not re-recorded: Go field names in snake_case, a
// duration in seconds, objects keyed by data as key/value lists; the recorded bytes are untouched.
func TestConventionalEvidence(t *testing.T) {
	raw := json.RawMessage(`{"exec-1":{"ArtifactSHA256":"ab","Duration":1500000000,"ExitCode":0,"FirstFailures":[]},"files":{"a/b.go":"cd"},"observed_only":null}`)
	before := string(raw)
	got, err := conventionalEvidence(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"key":"exec-1","value":{"artifact_sha256":"ab","duration_seconds":1.5,"exit_code":0,"first_failures":[]}},{"key":"files","value":[{"key":"a/b.go","value":"cd"}]},{"key":"observed_only","value":null}]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if string(raw) != before {
		t.Error("the recorded bytes changed")
	}
	for in, want := range map[string]string{"ArtifactSHA256After": "artifact_sha256_after", "RunID": "run_id", "WorkDir": "work_dir", "Spec": "spec"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%s) = %s, want %s", in, got, want)
		}
	}
}
