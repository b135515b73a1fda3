package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

// storeJournal records a boundary's intents and outcomes as tool_call and tool_result events in a
// real evidence store, as the runtime's sink does.
type storeJournal struct {
	s     *evidence.Store
	runID string
}

func (j storeJournal) emit(ctx context.Context, member, session string, p event.Payload) error {
	ev, err := runtime.NewEvent(member, session, p)
	if err != nil {
		return err
	}
	_, err = j.s.AppendEvent(ctx, j.runID, evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: ev.SessionID, Payload: ev.Payload})
	return err
}

func (j storeJournal) Intent(ctx context.Context, in tool.Intent) error {
	return j.emit(ctx, in.MemberID, in.SessionID, event.ToolCall{Intent: in})
}

func (j storeJournal) Outcome(ctx context.Context, o tool.Outcome) error {
	return j.emit(ctx, o.MemberID, o.SessionID, event.ToolResult{Outcome: o})
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// effectsFixture writes a finalized run whose member made four calls through a real boundary: one
// succeeded, one lost its response after the write (unknown), one awaits approval, one was refused.
// It returns the store path and the run id.
func effectsFixture(t *testing.T) (string, string) {
	t.Helper()
	return effectsFixtureWith(t, true)
}

// effectsFixtureWith builds the fixture; paused says whether the run paused with a checkpoint before
// it was finalized.
func effectsFixtureWith(t *testing.T, paused bool) (string, string) {
	t.Helper()
	ctx := context.Background()
	out := t.TempDir()
	path := filepath.Join(out, "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runID := "run-20261130t101500-0a1b2c3d4e5f"
	env := evidence.Envelope{Tenant: "local", ManifestDigest: digest("m"), Mode: "live", EnvironmentFingerprint: digest("env"),
		ReplayTolerance: "exact", Provider: "reference", BaseURL: "http://127.0.0.1:0/v1", Model: "assay-reference-1",
		Formation: "sequential", TaskProfile: "standard", Language: "go"}
	if err := s.OpenRun(ctx, runID, env, ""); err != nil {
		t.Fatal(err)
	}
	lost := tool.Tool{Name: "deploy", Access: tool.Network, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			return "", tool.ErrIndeterminate // the backend committed; the response was lost
		}}
	tools := tool.Builtins()
	tools["deploy"] = lost
	e := policy.NewEngine(digest("policy"), 0, policy.Func{PolicyName: "policy.yaml", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		if r.Tool == "shell" {
			return policy.Decision{Effect: policy.Ask, Rule: "commands", Reason: "commands need an operator"}, nil
		}
		return policy.Decision{Effect: policy.Allow, Rule: "rest", Disclose: true}, nil
	}})
	b := tool.NewBoundary(tools, storeJournal{s: s, runID: runID}, tool.WithPolicy(e))
	dir := t.TempDir()
	for _, c := range []struct{ id, tool, args string }{
		{"call_1", "write_file", `{"path":"a.go","content":"package a"}`},
		{"call_2", "deploy", `{"target":"staging"}`},
		{"call_3", "shell", `{"argv":["go","test","./..."]}`},
		{"call_4", "no_such_tool", `{}`},
	} {
		if _, err := b.Invoke(ctx, tool.Call{RunID: runID, MemberID: "exec-1", SessionID: runID + "-exec-1", CallID: c.id,
			Tool: c.tool, Arguments: c.args, Root: dir, Allowed: []string{"write_file", "deploy", "shell", "no_such_tool"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The run paused at call_3, as a durable run does: a checkpoint saying so, then finalized.
	if !paused {
		if _, err := s.Finalize(ctx, runID, evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"effect unknown"}}); err != nil {
			t.Fatal(err)
		}
		return path, runID
	}
	ev, err := s.AppendEvent(ctx, runID, evidence.Event{Type: "checkpoint", Time: time.Now(),
		Payload: json.RawMessage(`{"paused":true,"state_sha256":"` + digest("state") + `","turns":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(ctx, runID, ev.Seq, json.RawMessage(`{"paused":true,"version":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, runID, evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"effect unknown"}}); err != nil {
		t.Fatal(err)
	}
	return path, runID
}

func TestEffectsListsWhatTheEvidenceEstablishes(t *testing.T) {
	path, runID := effectsFixture(t)
	r := runCLI(t, "effects", "--store", path, "--format", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var effs []tool.Effect
	if err := json.Unmarshal([]byte(r.stdout), &effs); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range effs {
		states[e.CallID] = string(e.State)
	}
	want := map[string]string{"call_1": "succeeded", "call_2": "unknown", "call_3": "awaiting_approval", "call_4": "failed"}
	for k, v := range want {
		if states[k] != v {
			t.Fatalf("states %v, want %v", states, want)
		}
	}
	r = runCLI(t, "effects", "--store", path, "--state", "unknown")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "call_2") || !strings.Contains(r.stdout, "required") {
		t.Fatalf("--state unknown: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"effects", "--store", path, "run-nope"}, {"effects", "--store", path, "--state", "lost"},
		{"effects", "--store", path, "--format", "yaml"}, {"effects", "--store", filepath.Join(t.TempDir(), "none.duckdb")}} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d", args, r.code)
		}
		oneLine(t, r, "")
	}
	_ = runID
}

func TestReconcileRecordsAnOperatorDecisionInACorrectionRun(t *testing.T) {
	path, runID := effectsFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reconcile", "--operator", "alice", "--store", path, runID, "call_2", "--outcome", "maybe", "--note", "x"}, "--outcome"},
		{[]string{"reconcile", "--operator", "alice", "--store", path, runID, "call_2", "--outcome", "succeeded"}, "--note"},
		{[]string{"reconcile", "--operator", "alice", "--store", path, runID, "call_1", "--outcome", "failed", "--note", "x"}, "not unknown"},
		{[]string{"reconcile", "--operator", "alice", "--store", path, runID, "call_9", "--outcome", "failed", "--note", "x"}, "no tool call"},
		{[]string{"reconcile", "--operator", "alice", "--store", path, "run-other", "call_2", "--outcome", "failed", "--note", "x"}, `no such run "run-other"`},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d %s", c.args, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
	}
	r := runCLI(t, "reconcile", "--store", path, "--operator", "alice", runID, runID+":exec-1:call_2", "--outcome", "succeeded",
		"--note", "backend audit log has the deploy, receipt tx-4411")
	if r.code != 0 || !strings.Contains(r.stdout, "unknown -> succeeded") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "effects", "--store", path, "--format", "json", runID)
	var effs []tool.Effect
	if err := json.Unmarshal([]byte(r.stdout), &effs); err != nil {
		t.Fatal(err)
	}
	for _, e := range effs {
		if e.CallID == "call_2" && (e.State != "succeeded" || e.Source != "operator" || !strings.Contains(e.Note, "tx-4411 (operator alice)")) {
			t.Fatalf("after reconciliation: %+v", e)
		}
	}
	// A second decision is refused: a terminal outcome is never revised.
	r = runCLI(t, "reconcile", "--store", path, "--operator", "bob", runID, "call_2", "--outcome", "failed", "--note", "no")
	if r.code != 2 {
		t.Fatalf("second decision: exit %d %s", r.code, r.stdout)
	}
	oneLine(t, r, "not unknown")
	// The original run is untouched and still verifies; the correction is a separate finalized run.
	r = runCLI(t, "verify", "--store", path)
	if r.code != 0 {
		t.Fatalf("verify after reconciliation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "sql", "--store", path, "--format", "csv", "SELECT count(*) FROM runs WHERE corrects_run_id = '"+runID+"'")
	if !strings.Contains(r.stdout, "\n1\n") {
		t.Fatalf("correction runs: %s %s", r.stdout, r.stderr)
	}
}

func TestApproveWritesAnExactSingleUseApproval(t *testing.T) {
	path, runID := effectsFixture(t)
	approvals := filepath.Join(t.TempDir(), "approvals.json")
	runIn := func(stdin string, args ...string) result {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	}
	base := []string{"approve", "--store", path, "--approvals", approvals, "--approver", "alice", runID, "call_3"}
	r := runIn("yes\n", base...)
	if r.code != 2 || !strings.Contains(r.stdout, `"go"`) || !strings.Contains(r.stdout, "payload sha256") {
		t.Fatalf("a vague yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(approvals); err == nil {
		t.Fatal("an approval was written for an answer that is not the hash")
	}
	if r := runIn("no\n", base...); r.code != 0 || !strings.Contains(r.stdout, "Not approved") {
		t.Fatalf("no: exit %d %s", r.code, r.stdout)
	}
	// Read the hash shown and type its first 12 characters.
	i := strings.Index(r.stdout, "payload sha256  ")
	hash := strings.TrimSpace(r.stdout[i+len("payload sha256  ") : i+len("payload sha256  ")+64])
	r = runIn(hash[:12]+"\n", base...)
	if r.code != 0 || !strings.Contains(r.stdout, "Approved") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := policy.LoadApprovalFile(approvals)
	if err != nil || len(f.Approvals) != 1 {
		t.Fatalf("%+v %v", f, err)
	}
	a := f.Approvals[0]
	if a.RunID != runID || a.SessionID != runID+"-exec-1" || a.CallID != "call_3" || a.PayloadSHA256 != hash || a.Access != "execute" ||
		a.Disclose || !strings.Contains(a.PolicyScope, digest("policy")) || time.Until(a.ExpiresAt) <= 0 {
		t.Fatalf("approval %+v", a)
	}
	// The approval binds the exact call: preloaded into a boundary for that run, it covers exactly it.
	ap := policy.NewApprovals(nil)
	if n := ap.Preload(f, runID, func(m string) string { return runID + "-" + m }); n != 1 {
		t.Fatalf("preloaded %d", n)
	}
	if _, err := ap.Check(policy.Binding{RunID: runID, MemberID: "exec-1", SessionID: runID + "-exec-1", CallID: "call_3", Tool: "shell",
		PayloadSHA256: hash, SchemaSHA256: a.SchemaSHA256, Access: "execute", Scope: a.PolicyScope}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"approve", "--store", path, "--approvals", approvals, "--approver", "alice", runID, "call_1"}, "not awaiting approval"},
		{"", []string{"approve", "--store", path, "--approvals", approvals, "--approver", "alice", "--payload-sha256", digest("other"), runID, "call_3"}, "not the pending payload"},
		{"", []string{"approve", "--store", path, "--approvals", approvals, "--approver", "alice", runID, "call_3"}, "no answer"},
		{"", []string{"approve", "--store", path, "--approvals", approvals, "--approver", "alice", "--expires", "0s", runID, "call_3"}, "--expires"},
	} {
		r := runIn(c.stdin, c.args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d", c.args, r.code)
		}
		oneLine(t, r, c.want)
	}
}

// A call of a finalized run that did not pause (a formation that does not resume, or a completed
// run) can never be dispatched: approving it is refused and nothing is written.
func TestApproveRefusesACallNoRunCanDispatch(t *testing.T) {
	path, runID := effectsFixtureWith(t, false)
	approvals := filepath.Join(t.TempDir(), "approvals.json")
	r := runCLI(t, "approve", "--store", path, "--approvals", approvals, "--approver", "alice", "--payload-sha256", strings.Repeat("a", 64), runID, "call_3")
	if r.code != 2 || !strings.Contains(r.stderr, "did not pause") {
		t.Fatalf("approve on a run that cannot resume: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(approvals); err == nil {
		t.Fatal("an approval file was written")
	}
}
