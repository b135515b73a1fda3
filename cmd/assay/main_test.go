package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/assay-audit/assay/internal/storetest"
	"github.com/assay-audit/assay/internal/testroot"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
)

// TestMain lets the test binary act as a second process: one holding the evidence store's writer
// lock (ASSAY_TEST_HOLD_STORE), or the assay command itself (ASSAY_TEST_CLI, a JSON array of arguments).
func TestMain(m *testing.M) {
	if args := os.Getenv("ASSAY_TEST_CLI"); args != "" {
		// The test binary as the assay command, in its own process (crash tests kill it).
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, "ASSAY_TEST_CLI:", err)
			os.Exit(3)
		}
		// As main: SIGTERM and SIGINT end the command's context (serve commands shut down gracefully).
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, argv, IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
		stop()
		os.Exit(code)
	}
	if path := os.Getenv("ASSAY_TEST_HOLD_STORE"); path != "" {
		s, err := evidence.Open(context.Background(), path, evidence.OpenOptions{Command: "assay-test-holder"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // hold until the parent closes stdin
		s.Close()
		os.Exit(0)
	}
	os.Exit(testroot.Main(m, "assay-cmd-test-", &fixtureRoot))
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIQuiet(args...)
}

// runCLIQuiet is runCLI for a shared fixture, which no one test owns.
func runCLIQuiet(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// oneLine asserts the error output is exactly one line naming want.
func oneLine(t *testing.T, r result, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr should be one line containing %q, got %q", want, r.stderr)
	}
}

func TestMatrixRunAcceptsBothCasesOnTheReferenceProvider(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the end-to-end matrix builds and runs member code (see caseLanguage); skipped with -short")
	}
	// The shared default run: its store is read here, never written (the refused write below
	// checks exactly that).
	m := defaultMatrixRun(t)
	out, r := m.out, m.r
	if r.code != 0 {
		t.Fatalf("matrix run exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// The end-of-run summary on stderr counts the run's cases and its tokens (never "none finished"
	// after cases finished).
	if !strings.Contains(r.stderr, "summary:  2 case(s): 2 accepted;") || !strings.Contains(r.stderr, "tokens:   ") ||
		strings.Contains(r.stderr, "tokens:   unknown") {
		t.Fatalf("end-of-run summary:\n%s", r.stderr)
	}
	for _, f := range []string{"evidence.duckdb", "gateway-usage.db", "report.md"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s missing or empty: %v", f, err)
		}
	}
	if n := strings.Count(r.stdout, "accepted"); n != 2 {
		t.Fatalf("want 2 accepted cases in the table, got %d:\n%s", n, r.stdout)
	}
	for _, col := range []string{"FORMATION", "MEMBERS", "ELAPSED", "FILES", "TESTS", "ORACLE", "SESSIONS", "USAGE", "VERDICT"} {
		if !strings.Contains(r.stdout, col) {
			t.Errorf("table lacks column %s", col)
		}
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(report), "Reference results") || !strings.Contains(string(report), "assay-reference-1") {
		t.Errorf("report.md does not say results came from the reference provider")
	}
	checkInvocationReports(t, out)

	// The evidence verifies, and is queryable read-only.
	if v := runCLI(t, "verify", "--out", out); v.code != 0 {
		t.Fatalf("verify exit %d: %s %s", v.code, v.stdout, v.stderr)
	}
	q := runCLI(t, "sql", "--out", out, "--format", "json", "SELECT verdict FROM verdicts ORDER BY run_id")
	if q.code != 0 {
		t.Fatalf("sql exit %d: %s", q.code, q.stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal(listOf(t, q.stdout, "rows"), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("sql json: %v %q", err, q.stdout)
	}
	for _, row := range rows {
		if row["verdict"] != "accepted" {
			t.Errorf("stored verdict %v, want accepted", row["verdict"])
		}
	}
	// Usage is reconciled for every member session with known totals from all three sources.
	u := runCLI(t, "sql", "--out", out, "--format", "csv", `SELECT count(*) AS n, count(sources->>'$.wire.total_tokens') AS wire,
		count(sources->>'$.store.total_tokens') AS store, count(sources->>'$.gateway.total_tokens') AS gateway,
		count(*) FILTER (WHERE verdict = 'conserved') AS conserved FROM usage_verdicts`)
	if u.code != 0 || !strings.Contains(u.stdout, "4,4,4,4,4") {
		t.Fatalf("usage rows per source: exit %d %q %q", u.code, u.stdout, u.stderr)
	}

	// A write statement is refused, exit 2, and the store is unchanged.
	before := fileDigest(t, filepath.Join(out, "evidence.duckdb"))
	w := runCLI(t, "sql", "--out", out, "DELETE FROM verdicts")
	if w.code != 2 {
		t.Fatalf("write statement: exit %d, want 2 (%s)", w.code, w.stderr)
	}
	oneLine(t, w, "")
	if after := fileDigest(t, filepath.Join(out, "evidence.duckdb")); after != before {
		t.Fatalf("evidence store changed by a refused write")
	}
}

func TestMatrixRunWithoutUsageIsNotAccepted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the end-to-end matrix builds and runs member code (see caseLanguage); skipped with -short")
	}
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "sequential", "--format", "json",
		"--language", caseLanguage(t), "--reference-fault", "exec-2:1:drop_usage")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (case not accepted)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("json summary: %v\n%s", err, r.stdout)
	}
	if len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict != "rejected" {
		t.Fatalf("want one rejected case, got %+v", sum.Cases)
	}
	for _, c := range sum.Cases[0].Checks {
		if c.Name == "usage" && c.Status != "unknown" {
			t.Fatalf("usage check %s (%s), want unknown", c.Status, c.Detail)
		}
		if c.Name == "oracle" && c.Status != "passed" {
			t.Fatalf("the deliverables were fine; oracle %s", c.Status)
		}
	}
	// exec-2's usage is NULL (unknown) in the store and wire sources, never 0.
	q := runCLI(t, "sql", "--out", out, "--format", "csv", `SELECT s.source, sources->>('$.' || s.source || '.state') AS state,
		sources->>('$.' || s.source || '.total_tokens') IS NULL AS is_null
		FROM usage_verdicts, (VALUES ('gateway'), ('store'), ('wire')) s(source) WHERE member_id = 'exec-2' ORDER BY 1`)
	if q.code != 0 {
		t.Fatalf("sql: %s", q.stderr)
	}
	for _, want := range []string{"gateway,partial,true", "store,partial,true", "wire,partial,true"} {
		if !strings.Contains(q.stdout, want) {
			t.Errorf("usage rows lack %q:\n%s", want, q.stdout)
		}
	}
}

func TestBadInputExitsTwoWithOneLineAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
		// notCreated must not exist afterwards.
		notCreated string
	}{
		{"unknown formation", []string{"matrix", "run", "--out", filepath.Join(dir, "o1"), "--formations", "sequential,nosuch"}, `unknown formation "nosuch"`, filepath.Join(dir, "o1")},
		{"out is a file", []string{"matrix", "run", "--out", file}, "is a file", ""},
		{"unknown flag", []string{"matrix", "run", "--no-such-flag"}, "unknown flag", ""},
		{"bad format", []string{"matrix", "run", "--format", "xml", "--out", filepath.Join(dir, "o2")}, "--format", filepath.Join(dir, "o2")},
		{"bad fault", []string{"matrix", "run", "--reference-fault", "exec-1:0:explode", "--out", filepath.Join(dir, "o3")}, "explode", filepath.Join(dir, "o3")},
		{"api key env unset", []string{"matrix", "run", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--api-key-env", "ASSAY_TEST_UNSET_VAR", "--out", filepath.Join(dir, "o4")}, "ASSAY_TEST_UNSET_VAR", filepath.Join(dir, "o4")},
		{"negative request timeout", []string{"matrix", "run", "--request-timeout", "-1s", "--out", filepath.Join(dir, "o6")}, "--request-timeout -1s is negative", filepath.Join(dir, "o6")},
		{"empty out", []string{"matrix", "run", "--out", ""}, "--out is empty", ""},
		{"credential session header", []string{"matrix", "run", "--session-header", "Authorization", "--out", filepath.Join(dir, "o7")}, "carries credentials", filepath.Join(dir, "o7")},
		{"fault on an unknown member", []string{"matrix", "run", "--reference-fault", "exec-9:0:drop_usage", "--out", filepath.Join(dir, "o8")}, `"exec-9"`, filepath.Join(dir, "o8")},
		{"unreachable provider", []string{"matrix", "run", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--out", filepath.Join(dir, "o9")}, "unreachable", filepath.Join(dir, "o9")},
		{"formation option out of range", []string{"matrix", "run", "--formations", "consensus", "--formation-option", "consensus_threshold=0.5", "--out", filepath.Join(dir, "o10")}, "--formation-option invalid formation configuration: option consensus_threshold=\"0.5\"", filepath.Join(dir, "o10")},
		{"formation option not re-derived", []string{"matrix", "run", "--formations", "parallel", "--formation-option", "worktree_cleanup=true", "--out", filepath.Join(dir, "o11")}, "--formation-option worktree_cleanup cannot be set on a matrix case", filepath.Join(dir, "o11")},
		{"concurrency 0", []string{"matrix", "run", "--concurrency", "0", "--out", filepath.Join(dir, "o12")}, "--concurrency 0: at least one case", filepath.Join(dir, "o12")},
		{"unknown progress mode", []string{"matrix", "run", "--progress", "fancy", "--out", filepath.Join(dir, "o13")}, `--progress "fancy" is not one of auto, tty, plain, none`, filepath.Join(dir, "o13")},
		{"unknown progress mode on resume", []string{"resume", "run-x", "--progress", "bar", "--out", filepath.Join(dir, "o14")}, `--progress "bar" is not one of`, filepath.Join(dir, "o14")},
		{"empty progress mode", []string{"matrix", "run", "--progress", "", "--out", filepath.Join(dir, "o15")}, "--progress is empty", filepath.Join(dir, "o15")},
		{"index without packages", []string{"index", "--out", filepath.Join(dir, "o5"), empty}, "", filepath.Join(dir, "o5", "graph.db")},
		{"sql without store", []string{"sql", "--out", filepath.Join(dir, "none"), "SELECT 1"}, "", filepath.Join(dir, "none")},
		{"verify without store", []string{"verify", "--out", filepath.Join(dir, "none2")}, "", filepath.Join(dir, "none2")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			oneLine(t, r, c.want)
			if c.notCreated != "" {
				if _, err := os.Stat(c.notCreated); err == nil {
					t.Fatalf("%s was created by a refused command", c.notCreated)
				}
			}
		})
	}
}

func TestStoreHeldByAnotherProcessIsNamedByPID(t *testing.T) {
	out := t.TempDir()
	store := filepath.Join(out, "evidence.duckdb")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "ASSAY_TEST_HOLD_STORE="+store)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("holder did not get the lock: %q %v", line, err)
	}
	pid := fmt.Sprint(holder.Process.Pid)
	for _, args := range [][]string{
		{"matrix", "run", "--out", out},
		{"sql", "--out", out, "SELECT 1"},
		{"verify", "--out", out},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d, want 2: %s", args, r.code, r.stderr)
		}
		oneLine(t, r, pid)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err == nil {
		t.Fatalf("report.md written although the store was locked")
	}
}

func TestVerifyReportsATamperedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	out := t.TempDir()
	path := filepath.Join(out, "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64)}
	for _, run := range []string{"run-good", "run-bad"} {
		if err := s.OpenRun(ctx, run, env, ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			if _, err := s.AppendEvent(ctx, run, evidence.Event{Type: "step", Time: time.Unix(int64(i), 0).UTC(),
				Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordCheck(ctx, run, evidence.Check{Name: "c", Required: true, Status: "passed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finalize(ctx, run, evidence.Verdict{Verdict: "accepted"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if r := runCLI(t, "verify", "--out", out); r.code != 0 {
		t.Fatalf("untampered store: exit %d %s", r.code, r.stderr)
	}

	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE events SET payload = '{"n":99}' WHERE run_id = 'run-bad' AND seq = 3`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("tamper touched %d rows", n)
	}
	db.Close()

	r := runCLI(t, "verify", "--out", out, "--format", "json")
	if r.code != 1 {
		t.Fatalf("tampered store: exit %d, want 1 (%s)", r.code, r.stderr)
	}
	oneLine(t, r, "run-bad tampered at seq 3")
	var got []evidence.RunVerification
	if err := json.Unmarshal(listOf(t, r.stdout, "runs"), &got); err != nil {
		t.Fatal(err)
	}
	status := map[string]evidence.RunVerification{}
	for _, g := range got {
		status[g.RunID] = g
	}
	if status["run-good"].Status != "ok" || status["run-bad"].Status != "tampered" || status["run-bad"].FirstBadSeq != 3 {
		t.Fatalf("verification %+v", got)
	}
}

// The CLI indexes a module and prints its snapshot, whose db_sha256 is the digest of the graph
// database it wrote. The module is metrics/testdata/fixture (7 packages): indexing a whole real
// repository through the API is the indexer package's test (TestIndexAssayRepository), and the
// CLI's path is the same whatever the module's size.
func TestIndexPrintsTheDigestOfItsDatabase(t *testing.T) {
	t.Parallel()
	// The shared index is this command: `assay index --out DIR --format json` of the fixture.
	out, r := fixtureIndex(t)
	var snap struct {
		DBSHA256 string `json:"db_sha256"`
		Counts   struct {
			Packages int `json:"packages"`
			Funcs    int `json:"funcs"`
			Methods  int `json:"methods"`
		} `json:"counts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &snap); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if snap.Counts.Packages < 5 || snap.Counts.Funcs+snap.Counts.Methods < 50 {
		t.Fatalf("implausible counts for the fixture module: %+v", snap.Counts)
	}
	if got := fileDigest(t, filepath.Join(out, "graph.db")); got != snap.DBSHA256 {
		t.Fatalf("printed sha256 %s, file has %s", snap.DBSHA256, got)
	}
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func TestUnknownSubcommandIsBadInput(t *testing.T) {
	for _, args := range [][]string{{"matrix", "bogus"}, {"matrix", "runn"}, {"bogus"}} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d, want 2 (stdout %q)", args, r.code, r.stdout)
		}
		oneLine(t, r, "unknown command")
	}
}

// TestCommandGroupsRequireASubcommand: every command that only groups subcommands (found by walking
// the command tree, so a new group is covered), the root included, refuses to run without one or
// with an unknown one (exit 2, one line naming the subcommands and the help to read, nothing on
// stdout), and still shows its help with --help (exit 0).
func TestCommandGroupsRequireASubcommand(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		var subs []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				subs = append(subs, sub.Name())
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
		// metrics and tasks run themselves; explain and show are their subcommands
		if len(subs) > 0 && c.Name() != "metrics" && c.Name() != "tasks" {
			groups = append(groups, path)
		}
	}
	walk(NewCmdRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}), nil)
	for _, want := range []string{"", "graph", "matrix", "oracle", "provider", "store", "completion"} {
		if !slices.ContainsFunc(groups, func(g []string) bool { return strings.Join(g, " ") == want }) {
			t.Errorf("command group %q not found in the tree: %q", want, groups)
		}
	}
	for _, g := range groups {
		name := strings.TrimSpace("assay " + strings.Join(g, " "))
		root := NewCmdRoot(IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard})
		c, _, err := root.Find(g)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := runCLI(t, g...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 2 and nothing", name, r.code, r.stdout)
		}
		oneLine(t, r, "required")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !strings.Contains(r.stderr, sub.Name()) {
				t.Errorf("%s: %q does not name the subcommand %s", name, r.stderr, sub.Name())
			}
		}
		if !strings.Contains(r.stderr, "'"+name+" --help'") {
			t.Errorf("%s: %q does not say where the help is", name, r.stderr)
		}
		bad := runCLI(t, append(slices.Clone(g), "no-such-subcommand")...)
		if bad.code != 2 || bad.stdout != "" {
			t.Errorf("%s no-such-subcommand: exit %d, stdout %q; want 2 and nothing", name, bad.code, bad.stdout)
		}
		oneLine(t, bad, "unknown command")
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			// A subcommand after "--" is an argument: say so, not "unknown".
			dash := runCLI(t, append(slices.Clone(g), "--", sub.Name())...)
			if dash.code != 2 || dash.stdout != "" {
				t.Errorf("%s -- %s: exit %d, stdout %q; want 2 and nothing", name, sub.Name(), dash.code, dash.stdout)
			}
			oneLine(t, dash, "after '--' is an argument, not a subcommand")
			break
		}
		help := runCLI(t, append(slices.Clone(g), "--help")...)
		if help.code != 0 || !strings.Contains(help.stdout, "Usage:") || help.stderr != "" {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q; want its help and 0", name, help.code, help.stdout, help.stderr)
		}
	}
	if r := runCLI(t, "graph"); !strings.HasPrefix(r.stderr, "assay: graph: a subcommand is required (callees, callers, errors, path, symbols)") {
		t.Errorf("assay graph: %q", r.stderr)
	}
}

// secretProvider is an OpenAI-compatible endpoint that leaks secrets the way real ones do: its
// first reply to each member is a write_file call whose arguments carry envSecret, its second is
// an HTTP 500 whose error body echoes the API key it was sent. It also checks that the key arrives.
func secretProvider(t *testing.T, apiKey, envSecret string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiKey {
			http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"leaky-model","object":"model"}]}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"role":"tool"`) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"error":{"message":"upstream rejected key %s while deploying with %s","type":"server_error"}}`, apiKey, envSecret)
			return
		}
		args, _ := json.Marshal(map[string]string{"path": "notes.txt", "content": "deploy with " + envSecret + "\n"})
		reply, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": "leaky-model",
			"choices": []map[string]any{{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil,
				"tool_calls": []map[string]any{{"id": "call_1", "type": "function", "function": map[string]string{"name": "write_file", "arguments": string(args)}}}}}},
			"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// A secret in an environment variable, in a tool argument and in a provider error appears nowhere
// in evidence.duckdb (its bytes, every table's rows, file-backed artifacts), gateway-usage.db,
// report.md, stdout or stderr. Only the file the member's tool wrote holds it: that is the world the
// tool acted on, not a record.
func TestMatrixRunRedactsSecretsEverywhereItRecords(t *testing.T) {
	apiKey := "sk-assay-e2e-" + strings.Repeat("k", 24)
	envSecret := "tok-assay-e2e-" + strings.Repeat("t", 24)
	t.Setenv("ASSAY_E2E_PROVIDER_KEY", apiKey)
	t.Setenv("ASSAY_E2E_DEPLOY_TOKEN", envSecret)
	base := secretProvider(t, apiKey, envSecret)
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "sequential", "--base-url", base, "--model", "leaky-model",
		"--api-key-env", "ASSAY_E2E_PROVIDER_KEY", "--request-timeout", "10s")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (the case is rejected); stderr %s", r.code, r.stderr)
	}
	secrets := []string{apiKey, envSecret}
	for _, s := range secrets {
		if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
			t.Fatalf("secret %q printed", s)
		}
	}
	// The secrets did reach the places they would have leaked from.
	wrote := 0
	searched := 0
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if d.Name() == "notes.txt" {
			if strings.Contains(string(data), envSecret) {
				wrote++
			}
			return nil
		}
		searched++
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Errorf("secret %q found in %s", s, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if wrote == 0 {
		t.Fatal("the tool call carrying the secret never ran; the test proves nothing")
	}
	for _, f := range []string{"evidence.duckdb", "gateway-usage.db", "report.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	// DuckDB may compress what it stores: read every row of every table back as text too.
	var sawError, sawArgs bool
	storetest.EachValue(t, filepath.Join(out, "evidence.duckdb"), func(table, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("secret %q in table %s: %.300s", s, table, text)
			}
		}
		if strings.Contains(text, "upstream rejected key [REDACTED]") {
			sawError = true
		}
		if strings.Contains(text, "deploy with [REDACTED]") {
			sawArgs = true
		}
	})
	if !sawError || !sawArgs {
		t.Fatalf("the masked provider error (%v) and masked tool arguments (%v) should both be in the store", sawError, sawArgs)
	}
}

// Bad boundary input is one line on stderr, exit 2, and nothing is written.
func TestMatrixRunRefusesBadBoundaryFiles(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("version: 1\ndefault: allow\nrules:\n  - id: x\n    tools: [write_file]\n    decision: perhaps\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badApprovals := filepath.Join(dir, "approvals.yaml")
	if err := os.WriteFile(badApprovals, []byte("version: 1\napprovals:\n  - member_id: exec-1\n    surprise: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"policy":         {[]string{"--policy", badPolicy}, "--policy"},
		"missing policy": {[]string{"--policy", filepath.Join(dir, "none.yaml")}, "--policy"},
		"approvals":      {[]string{"--approvals", badApprovals}, "--approvals"},
		"mode":           {[]string{"--mode", "rehearsal"}, "--mode"},
		"budget":         {[]string{"--team-tool-calls", "-1"}, "--team-tool-calls -1 is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(name, " ", "-"))
			r := runCLI(t, append([]string{"matrix", "run", "--out", out}, c.args...)...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", r.code, r.stderr)
			}
			oneLine(t, r, c.want)
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("%s was created", out)
			}
		})
	}
}

// A dry run exits 1 (not accepted), and the table, the JSON and the report all say non_certifiable
// and dry_run.
func TestMatrixRunDryRunSaysNonCertifiableEverywhere(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	out := t.TempDir()
	r := runCLI(t, "matrix", "run", "--out", out, "--formations", "sequential", "--mode", "dry_run")
	if r.code != 1 || !strings.Contains(r.stdout, "non_certifiable") {
		t.Fatalf("exit %d, stdout %s; want 1 and the table saying non_certifiable", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "mode dry_run") {
		t.Fatalf("progress does not name the mode: %s", r.stderr)
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), "non_certifiable") || !strings.Contains(string(report), "dry_run") {
		t.Fatalf("report.md does not say non_certifiable and dry_run:\n%s", report)
	}
}

// TestHelpOfAnUnknownTopicIsBadInput: `assay help X` for an X that names no
// command exits 2 with one line; a real topic prints its help and exits 0.
func TestHelpOfAnUnknownTopicIsBadInput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "bogus"}, {"help", "graph", "bogus"}} {
		r := runCLI(t, args...)
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, r.code, r.stdout)
		}
		oneLine(t, r, "unknown help topic")
	}
	for _, args := range [][]string{{"help"}, {"help", "graph", "errors"}, {"help", "index"}} {
		if r := runCLI(t, args...); r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
}
