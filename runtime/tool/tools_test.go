package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/policy"
)

func builtinCall(dir, id, tool, args string) Call {
	return Call{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: id, Tool: tool, Arguments: args, Root: dir,
		Allowed: []string{"read_file", "write_file", "list_dir", "find", "edit_file", "shell"}}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func invokeOK(t *testing.T, b *Boundary, c Call) Outcome {
	t.Helper()
	o, err := b.Invoke(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestBuiltinSchemasCompileAndDeclareAccess(t *testing.T) {
	tools := Builtins()
	if err := CheckSchemas(tools); err != nil {
		t.Fatal(err)
	}
	want := map[string]AccessMode{"read_file": ReadOnly, "list_dir": ReadOnly, "find": ReadOnly, "write_file": Write,
		"edit_file": Write, "shell": Execute}
	for name, mode := range want {
		if tools[name].Access != mode {
			t.Errorf("%s declares %q, want %q", name, tools[name].Access, mode)
		}
	}
	if len(tools) != len(want) {
		t.Errorf("builtins %d, want %d", len(tools), len(want))
	}
	bad := Tool{Name: "bad", Access: ReadOnly, Parameters: json.RawMessage(`{"type":"nope"}`)}
	if err := CheckSchemas(map[string]Tool{"bad": bad}); err == nil {
		t.Fatal("an invalid schema compiled")
	}
	// A call of a tool whose schema does not compile is refused, never run.
	var ran atomic.Bool
	bad.Run = func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
		ran.Store(true)
		return "", nil
	}
	b := NewBoundary(map[string]Tool{"bad": bad}, &memJournal{})
	c := builtinCall(t.TempDir(), "c1", "bad", `{}`)
	c.Allowed = []string{"bad"}
	if o := invokeOK(t, b, c); o.State != StateFailed || ran.Load() {
		t.Fatalf("%+v ran=%v", o, ran.Load())
	}
}

func TestSchemaValidationComesFirst(t *testing.T) {
	dir := t.TempDir()
	j := &memJournal{}
	var decided atomic.Int32
	e := policy.NewEngine("", 0, policy.Func{PolicyName: "count", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		decided.Add(1)
		return policy.Decision{Effect: policy.Allow, Disclose: true}, nil
	}})
	b := NewBoundary(Builtins(), j, WithPolicy(e))
	cases := []struct{ tool, args string }{
		{"list_dir", `{"path":3}`},
		{"find", `{}`},
		{"find", `{"pattern":"*.go","type":"socket"}`},
		{"find", `{"pattern":"*.go","max_results":100000}`},
		{"edit_file", `{"path":"a.go","operations":[]}`},
		{"edit_file", `{"path":"a.go","operations":[{"op":"rename","old":"a"}]}`},
		{"edit_file", `{"path":"a.go","operations":[{"op":"replace","old":"a"}]}`},
		{"edit_file", `{"path":"a.go","operations":[{"op":"replace","old":"a","new":"b","extra":1}]}`},
		{"shell", `{"argv":[]}`},
		{"shell", `{"argv":"rm -rf /"}`},
		{"shell", `{"argv":["true"],"timeout_seconds":100000}`},
		{"write_file", `{"path":"a.go","content":7}`},
	}
	for i, c := range cases {
		o := invokeOK(t, b, builtinCall(dir, fmt.Sprint("c", i), c.tool, c.args))
		if o.State != StateFailed || !strings.Contains(o.Error, "invalid tool arguments") {
			t.Errorf("%s %s: %+v", c.tool, c.args, o)
		}
	}
	if decided.Load() != 0 {
		t.Fatalf("policy saw %d calls with invalid arguments", decided.Load())
	}
}

func TestListDirAndFind(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "m")
	mustWrite(t, filepath.Join(dir, "a.go"), "package a")
	mustWrite(t, filepath.Join(dir, "pkg", "b.go"), "package pkg")
	mustWrite(t, filepath.Join(dir, "pkg", "b_test.go"), "package pkg")
	mustWrite(t, filepath.Join(dir, "pkg", "deep", "c.txt"), "c")
	mustWrite(t, filepath.Join(parent, "outside.go"), "package outside")
	if err := os.Symlink(parent, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	b := NewBoundary(Builtins(), &memJournal{})
	cases := []struct {
		name, tool, args string
		ok               bool
		want             string
	}{
		{"list root", "list_dir", `{}`, true, "a.go\npkg/\nup\n"},
		{"list sub", "list_dir", `{"path":"pkg"}`, true, "b.go\nb_test.go\ndeep/\n"},
		{"list escape", "list_dir", `{"path":".."}`, false, ""},
		{"list symlink escape", "list_dir", `{"path":"up"}`, false, ""},
		{"list absolute", "list_dir", `{"path":"/etc"}`, false, ""},
		{"find go files", "find", `{"pattern":"**/*.go"}`, true, "a.go\npkg/b.go\npkg/b_test.go\n"},
		{"find tests in pkg", "find", `{"path":"pkg","pattern":"*_test.go"}`, true, "pkg/b_test.go\n"},
		{"find dirs", "find", `{"pattern":"**","type":"dir"}`, true, "pkg\npkg/deep\n"},
		{"find does not follow symlinks out", "find", `{"pattern":"**/outside.go"}`, true, "no matches\n"},
		{"find capped", "find", `{"pattern":"**/*.go","max_results":1}`, true, "a.go\n... stopped at 1 results\n"},
		{"find escape", "find", `{"path":"../","pattern":"*"}`, false, ""},
		{"find bad glob", "find", `{"pattern":"[x"}`, false, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := invokeOK(t, b, builtinCall(dir, fmt.Sprint("c", i), c.tool, c.args))
			if (o.State == StateSucceeded) != c.ok {
				t.Fatalf("%+v", o)
			}
			if c.ok && o.Result != c.want {
				t.Fatalf("result %q, want %q", o.Result, c.want)
			}
		})
	}
}

func TestEditFile(t *testing.T) {
	dir := t.TempDir()
	orig := "package a\n\nfunc A() int { return 1 }\n\nfunc B() int { return 1 }\n"
	mustWrite(t, filepath.Join(dir, "a.go"), orig)
	b := NewBoundary(Builtins(), &memJournal{})
	edit := func(id, ops string) Outcome {
		return invokeOK(t, b, builtinCall(dir, id, "edit_file", `{"path":"a.go","operations":`+ops+`}`))
	}
	read := func() string {
		data, err := os.ReadFile(filepath.Join(dir, "a.go"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// An ambiguous replace (two matches, count defaults to 1) changes nothing, and neither does a
	// list whose second operation does not match: all or nothing.
	if o := edit("c1", `[{"op":"replace","old":"return 1","new":"return 2"}]`); o.State != StateFailed || !strings.Contains(o.Error, "occurs 2 times") {
		t.Fatalf("%+v", o)
	}
	if o := edit("c2", `[{"op":"append","text":"// x\n"},{"op":"delete","old":"not there"}]`); o.State != StateFailed {
		t.Fatalf("%+v", o)
	}
	if read() != orig {
		t.Fatal("a failed edit changed the file")
	}
	o := edit("c3", `[{"op":"replace","old":"return 1","new":"return 2","count":2},`+
		`{"op":"insert_after","anchor":"package a\n","text":"\nimport \"fmt\"\n"},`+
		`{"op":"insert_before","anchor":"func B","text":"// B doubles.\n"},`+
		`{"op":"delete","old":"\nimport \"fmt\"\n"},{"op":"prepend","text":"// Code.\n"},{"op":"append","text":"var _ = fmt.Sprint\n"}]`)
	if o.State != StateSucceeded {
		t.Fatalf("%+v", o)
	}
	want := "// Code.\npackage a\n\nfunc A() int { return 2 }\n\n// B doubles.\nfunc B() int { return 2 }\nvar _ = fmt.Sprint\n"
	if got := read(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if o := invokeOK(t, b, builtinCall(dir, "c4", "edit_file", `{"path":"missing.go","operations":[{"op":"append","text":"x"}]}`)); o.State != StateFailed {
		t.Fatalf("editing a missing file: %+v", o)
	}
	if o := invokeOK(t, b, builtinCall(dir, "c5", "edit_file", `{"path":"../a.go","operations":[{"op":"append","text":"x"}]}`)); o.State != StateFailed {
		t.Fatalf("editing outside: %+v", o)
	}
	if _, err := ApplyEdits("abc", []EditOp{{Op: "insert_after", Anchor: "z", Text: "x"}}); !errors.Is(err, ErrEditMismatch) {
		t.Fatalf("%v", err)
	}
}

func TestShellIsBoundedAndRooted(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "member")
	mustWrite(t, filepath.Join(dir, "sub", "f.txt"), "x")
	secret := "sk-test-4f1c9a7e5d3b2a10"
	t.Setenv("ASSAY_TEST_PROVIDER_KEY", secret)
	cfg := DefaultShellConfig()
	cfg.MaxOutputBytes = 64
	cfg.DefaultTimeout = time.Minute
	tools := Builtins()
	tools["shell"] = Shell(cfg)
	j := &memJournal{}
	b := NewBoundary(tools, j)

	o := invokeOK(t, b, builtinCall(dir, "c1", "shell", `{"argv":["pwd"],"dir":"sub"}`))
	var res ShellResult
	if o.State != StateSucceeded || json.Unmarshal([]byte(o.Result), &res) != nil {
		t.Fatalf("%+v", o)
	}
	if got, _ := filepath.EvalSymlinks(strings.TrimSpace(res.Stdout)); got != filepath.Join(dir, "sub") {
		if want, _ := filepath.EvalSymlinks(filepath.Join(dir, "sub")); got != want {
			t.Fatalf("cwd %q, want the member's sub directory", res.Stdout)
		}
	}
	o = invokeOK(t, b, builtinCall(dir, "c2", "shell", `{"argv":["printenv","ASSAY_TEST_PROVIDER_KEY"]}`))
	if strings.Contains(o.Result, secret) || !strings.Contains(o.Result, `"exit_code":1`) {
		t.Fatalf("the parent's credential reached the command: %s", o.Result)
	}
	o = invokeOK(t, b, builtinCall(dir, "c3", "shell", `{"argv":["sh","-c","exit 3"]}`))
	if o.State != StateSucceeded || !strings.Contains(o.Result, `"exit_code":3`) {
		t.Fatalf("non-zero exit: %+v", o)
	}
	o = invokeOK(t, b, builtinCall(dir, "c4", "shell", `{"argv":["sh","-c","yes | head -c 100000"]}`))
	if err := json.Unmarshal([]byte(o.Result), &res); err != nil || !res.Truncated || len(res.Stdout) != 64 {
		t.Fatalf("output not capped: %+v", o)
	}
	for i, args := range []string{`{"argv":["pwd"],"dir":".."}`, `{"argv":["pwd"],"dir":"/tmp"}`, `{"argv":["pwd"],"dir":"f.txt"}`,
		`{"argv":["/nonexistent/program"]}`} {
		if o := invokeOK(t, b, builtinCall(dir, fmt.Sprint("bad", i), "shell", args)); o.State != StateFailed {
			t.Fatalf("%s: %+v", args, o)
		}
	}
	// Killed at its limit: it may have acted, so the outcome is unknown and never retried.
	o = invokeOK(t, b, builtinCall(dir, "c5", "shell", `{"argv":["sh","-c","sleep 30 & echo $! > child; wait"],"timeout_seconds":1}`))
	if o.State != StateUnknown || !o.ReconciliationRequired || o.Retryable || o.Attempts != 1 {
		t.Fatalf("timed-out command: %+v", o)
	}
	data, err := os.ReadFile(filepath.Join(dir, "child"))
	if err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The whole process group is killed at the limit: the command's child does not outlive it.
	eventually(t, "the command's child to be killed", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || isZombie(pid)
	})
}

func TestReadOnlyMembers(t *testing.T) {
	tools := Builtins()
	if got := DefaultAllowedTools(tools, "reviewer", ""); !slices.Equal(got, []string{"find", "list_dir", "read_file"}) {
		t.Fatalf("reviewer defaults %v", got)
	}
	if got := DefaultAllowedTools(tools, "executor", "critic"); !slices.Equal(got, []string{"find", "list_dir", "read_file"}) {
		t.Fatalf("critic defaults %v", got)
	}
	if got := DefaultAllowedTools(tools, "executor", ""); slices.Contains(got, "shell") || !slices.Contains(got, "write_file") {
		t.Fatalf("executor defaults %v", got)
	}
	dir := t.TempDir()
	b := NewBoundary(tools, &memJournal{})
	c := builtinCall(dir, "c1", "write_file", `{"path":"a.go","content":"x"}`)
	c.ReadOnly = true // a reviewer whose allowed_tools names write_file anyway
	if o := invokeOK(t, b, c); o.State != StateFailed || !strings.Contains(o.Error, "read-only") {
		t.Fatalf("%+v", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.go")); err == nil {
		t.Fatal("a read-only member wrote a file")
	}
	for _, d := range b.DefinitionsFor(c.Allowed, true) {
		if d.Access != ReadOnly {
			t.Fatalf("a read-only member is shown %s", d.Name)
		}
	}
}

func TestOnlyReadonlyToolsAreRetried(t *testing.T) {
	var reads, writes atomic.Int32
	flaky := func(name string, mode AccessMode, n *atomic.Int32) Tool {
		return Tool{Name: name, Access: mode, Parameters: json.RawMessage(`{"type":"object"}`),
			Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
				if n.Add(1) < 3 {
					return "", fmt.Errorf("%w: resource busy (retry safe)", ErrTransient)
				}
				return "ok", nil
			}}
	}
	budget, _ := policy.NewBudget(policy.Limits{}, policy.Limits{ToolCalls: 100})
	b := NewBoundary(map[string]Tool{"peek": flaky("peek", ReadOnly, &reads), "poke": flaky("poke", Write, &writes)},
		&memJournal{}, WithReadonlyRetries(5), WithBudget(budget))
	c := builtinCall(t.TempDir(), "r1", "peek", `{}`)
	c.Allowed = []string{"peek", "poke"}
	if o := invokeOK(t, b, c); o.State != StateSucceeded || o.Attempts != 3 || reads.Load() != 3 {
		t.Fatalf("readonly: %+v after %d reads", o, reads.Load())
	}
	c.CallID, c.Tool = "w1", "poke"
	o := invokeOK(t, b, c)
	if o.State != StateFailed || o.Retryable || writes.Load() != 1 {
		t.Fatalf("write retried: %+v after %d writes", o, writes.Load())
	}
	// Retries are charged: 3 reads + 1 write.
	if u := budget.Member("m1"); u.ToolCalls != 4 {
		t.Fatalf("charged %d tool calls, want 4", u.ToolCalls)
	}
}

func TestDryRunSimulatesEffectsAndLabelsEverything(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "r.txt"), "hello")
	j := &memJournal{}
	b := NewBoundary(Builtins(), j, WithMode(DryRun))
	o := invokeOK(t, b, builtinCall(dir, "c1", "write_file", `{"path":"a.go","content":"x"}`))
	if o.State != StateSucceeded || !o.Simulated || o.Mode != DryRun || !strings.HasPrefix(o.Result, "dry_run:") {
		t.Fatalf("%+v", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.go")); err == nil {
		t.Fatal("dry_run wrote a file")
	}
	o = invokeOK(t, b, builtinCall(dir, "c2", "shell", `{"argv":["touch","ran"]}`))
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil || !o.Simulated {
		t.Fatalf("dry_run executed a command: %+v", o)
	}
	o = invokeOK(t, b, builtinCall(dir, "c3", "read_file", `{"path":"r.txt"}`))
	if o.Result != "hello" || o.Simulated || o.Mode != DryRun {
		t.Fatalf("readonly in dry_run: %+v", o)
	}
	for _, in := range j.intents {
		if in.Mode != DryRun {
			t.Fatalf("intent not labelled: %+v", in)
		}
	}
}

func TestObserveRecordsAskWithoutEnforcingIt(t *testing.T) {
	dir := t.TempDir()
	g := &gatedEffect{}
	e := policy.NewEngine("", 0, policy.Func{PolicyName: "p", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		if r.CallID == "deny" {
			return policy.Decision{Effect: policy.Deny, Reason: "never"}, nil
		}
		return policy.Decision{Effect: policy.Ask, Reason: "would ask"}, nil
	}})
	b := NewBoundary(map[string]Tool{"effect": g.tool()}, &memJournal{}, WithMode(Observe), WithPolicy(e))
	o := invokeOK(t, b, effectCall(dir, "c1", `{}`))
	if o.State != StateSucceeded || o.Mode != Observe || o.PolicyNotEnforced != "ask" {
		t.Fatalf("%+v", o)
	}
	if o := invokeOK(t, b, effectCall(dir, "deny", `{}`)); o.State != StateFailed || g.n.Load() != 1 {
		t.Fatalf("observe mode did not enforce a deny: %+v", o)
	}
}

func TestSecretsAppearNowhereInTheRecords(t *testing.T) {
	dir := t.TempDir()
	secret := "sk-live-9f8e7d6c5b4a3210"
	t.Setenv("ASSAY_PROVIDER_API_KEY", secret)
	r := policy.NewRedactor(policy.SecretsFromEnv(os.Environ(), "ASSAY_PROVIDER_API_KEY")...)
	failing := Tool{Name: "call_api", Access: Network, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			return "", fmt.Errorf("provider said 401: invalid key %s", secret)
		}}
	tools := Builtins()
	tools["call_api"] = failing
	j := &memJournal{}
	b := NewBoundary(tools, j, WithRedactor(r))
	c := builtinCall(dir, "c1", "write_file", `{"path":"conf.txt","content":"key=`+secret+`"}`)
	if o := invokeOK(t, b, c); o.State != StateSucceeded {
		t.Fatalf("%+v", o)
	}
	c = builtinCall(dir, "c2", "read_file", `{"path":"conf.txt"}`)
	o1 := invokeOK(t, b, c)
	c = builtinCall(dir, "c3", "call_api", `{"api_key":"`+secret+`","q":"x"}`)
	c.Allowed = append(c.Allowed, "call_api")
	o2 := invokeOK(t, b, c)
	records, _ := json.Marshal(map[string]any{"intents": j.intents, "outcomes": j.outcomes, "returned": []Outcome{o1, o2}})
	if strings.Contains(string(records), secret) {
		t.Fatalf("the secret reached the records: %s", records)
	}
	if !strings.Contains(string(records), policy.Mask) {
		t.Fatal("nothing was masked")
	}
}

// isZombie reports whether pid has exited and waits only to be reaped by its new parent.
func isZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}
