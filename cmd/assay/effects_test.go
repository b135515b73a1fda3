package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/effectstest"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

// The fixture's run: exec-1's call_1 succeeded, call_2 is unknown, call_3 awaits approval, call_4
// failed (effectstest.Store).
const fixtureRun = effectstest.RunID

// effects runs `assay effects` on the store at path with opts' other fields.
func effects(t *testing.T, path string, opts EffectsOptions) result {
	t.Helper()
	return call(t, "", func(ctx context.Context, io IOStreams) error {
		opts.IO, opts.Store = io, storeFlags{store: path}
		return runEffects(ctx, &opts)
	})
}

// reconcile runs `assay reconcile` on the store at path with opts' other fields.
func reconcile(t *testing.T, path string, opts ReconcileOptions) result {
	t.Helper()
	return call(t, "", func(ctx context.Context, io IOStreams) error {
		opts.IO, opts.Store = io, storeFlags{store: path}
		return runReconcile(ctx, &opts)
	})
}

// approve runs `assay approve` on the store at path with opts' other fields and stdin.
func approve(t *testing.T, path, stdin string, opts ApproveOptions) result {
	t.Helper()
	return call(t, stdin, func(ctx context.Context, io IOStreams) error {
		opts.IO, opts.Store = io, storeFlags{store: path}
		if opts.Expires == 0 {
			opts.Expires = time.Hour
		}
		return runApprove(ctx, &opts)
	})
}

// effectsOf decodes `assay effects --format json` of runID, by tool.
func effectsOf(t *testing.T, path, runID string) map[string][]tool.Effect {
	t.Helper()
	r := effects(t, path, EffectsOptions{Format: "json", Runs: []string{runID}})
	if r.code != 0 {
		t.Fatalf("effects: exit %d %s", r.code, r.stderr)
	}
	var effs []tool.Effect
	if err := json.Unmarshal(listOf(t, r.stdout, "effects"), &effs); err != nil {
		t.Fatal(err)
	}
	byTool := map[string][]tool.Effect{}
	for _, e := range effs {
		byTool[e.Tool] = append(byTool[e.Tool], e)
	}
	return byTool
}

func TestEffectsListsWhatTheEvidenceEstablishes(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true)
	r := effects(t, path, EffectsOptions{Format: "json"})
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var effs []tool.Effect
	if err := json.Unmarshal(listOf(t, r.stdout, "effects"), &effs); err != nil {
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
	r = effects(t, path, EffectsOptions{State: "unknown"})
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "call_2") || !strings.Contains(r.stdout, "required") {
		t.Fatalf("--state unknown: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		name string
		path string
		opts EffectsOptions
		want string
	}{
		{"an unknown run", path, EffectsOptions{Runs: []string{"run-nope"}}, `no such run "run-nope"`},
		{"an unknown state", path, EffectsOptions{State: "lost"}, `--state "lost" is not one of awaiting_approval, pending`},
		{"an unknown format", path, EffectsOptions{Format: "yaml"}, `--format "yaml"`},
		{"no store", filepath.Join(t.TempDir(), "none.duckdb"), EffectsOptions{}, "no evidence store at"},
	} {
		r := effects(t, c.path, c.opts)
		if r.code != 2 || r.stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q", c.name, r.code, r.stdout)
		}
		oneLine(t, r, c.want)
	}
}

// With nothing in the state asked for, the table says so instead of printing a bare header, and
// JSON is an empty array; both exit 0.
func TestEffectsSaysWhenNothingMatches(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true)
	if r := effects(t, path, EffectsOptions{State: "unknown"}); r.code != 0 || !strings.Contains(r.stdout, "call_2") {
		t.Fatalf("before reconciliation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := reconcile(t, path, ReconcileOptions{Run: fixtureRun, Call: "call_2", Outcome: "succeeded", Note: "deploy log shows it", Operator: "ops"}); r.code != 0 {
		t.Fatalf("reconcile: exit %d: %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		opts EffectsOptions
		want string
	}{
		{EffectsOptions{State: "unknown"}, "no effects in state unknown\n"},
		{EffectsOptions{State: "unknown", Format: "json"}, "{\n  \"schema_version\": 1,\n  \"effects\": []\n}\n"},
		{EffectsOptions{State: "cancelled"}, "no effects in state cancelled\n"},
	} {
		r := effects(t, path, c.opts)
		if r.code != 0 || r.stdout != c.want || r.stderr != "" {
			t.Fatalf("%+v: exit %d, stdout %q, stderr %q; want %q", c.opts, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

func TestReconcileRecordsAnOperatorDecisionInACorrectionRun(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true)
	for _, c := range []struct {
		opts ReconcileOptions
		want string
	}{
		{ReconcileOptions{Call: "call_2", Outcome: "maybe", Note: "x"}, `--outcome must be succeeded or failed, got "maybe"`},
		{ReconcileOptions{Call: "call_2", Outcome: "succeeded"}, "--note is required"},
		{ReconcileOptions{Call: "call_2"}, "--outcome is required without --lookup"},
		{ReconcileOptions{Call: "call_2", Lookup: true, Outcome: "failed", Note: "x"}, "--lookup excludes --outcome"},
		{ReconcileOptions{Call: "call_1", Outcome: "failed", Note: "x"}, "is succeeded, not unknown"},
		{ReconcileOptions{Call: "call_9", Outcome: "failed", Note: "x"}, `no tool call "call_9"; list the run's calls with 'assay effects RUN'`},
		{ReconcileOptions{Run: "run-other", Call: "call_2", Outcome: "failed", Note: "x"}, `no such run "run-other"`},
	} {
		c.opts.Operator = "alice"
		if c.opts.Run == "" {
			c.opts.Run = fixtureRun
		}
		r := reconcile(t, path, c.opts)
		if r.code != 2 {
			t.Fatalf("%+v: exit %d %s", c.opts, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
	}
	r := reconcile(t, path, ReconcileOptions{Run: fixtureRun, Call: fixtureRun + ":exec-1:call_2", Outcome: "succeeded", Operator: "alice",
		Note: "backend audit log has the deploy, receipt tx-4411"})
	if r.code != 0 || !strings.HasPrefix(r.stdout, "reconciled "+fixtureRun+":exec-1:call_2: unknown -> succeeded (operator decision), recorded in correction run "+fixtureRun+"-reconcile-") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, e := range effectsOf(t, path, fixtureRun)["deploy"] {
		if e.State != "succeeded" || e.Source != "operator" || !strings.Contains(e.Note, "tx-4411 (operator alice)") {
			t.Fatalf("after reconciliation: %+v", e)
		}
	}
	// A second decision is refused: a terminal outcome is never revised.
	r = reconcile(t, path, ReconcileOptions{Run: fixtureRun, Call: "call_2", Outcome: "failed", Note: "no", Operator: "bob"})
	if r.code != 2 {
		t.Fatalf("second decision: exit %d %s", r.code, r.stdout)
	}
	oneLine(t, r, "not unknown")
	// The original run is untouched and still verifies; the correction is a separate finalized run.
	if r := verify(t, path, VerifyOptions{}); r.code != 0 {
		t.Fatalf("verify after reconciliation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestApproveWritesAnExactSingleUseApproval(t *testing.T) {
	t.Parallel()
	path := effectstest.Store(t, true)
	approvals := filepath.Join(t.TempDir(), "approvals.json")
	opts := ApproveOptions{Run: fixtureRun, Call: "call_3", File: approvals, Approver: "alice"}
	r := approve(t, path, "yes\n", opts)
	if r.code != 2 || !strings.Contains(r.stdout, `"go"`) || !strings.Contains(r.stdout, "payload sha256") {
		t.Fatalf("a vague yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(approvals); err == nil {
		t.Fatal("an approval was written for an answer that is not the hash")
	}
	if r := approve(t, path, "no\n", opts); r.code != 0 || !strings.Contains(r.stdout, "Not approved") {
		t.Fatalf("no: exit %d %s", r.code, r.stdout)
	}
	// Read the hash shown and type its first 12 characters.
	i := strings.Index(r.stdout, "payload sha256  ")
	hash := strings.TrimSpace(r.stdout[i+len("payload sha256  ") : i+len("payload sha256  ")+64])
	r = approve(t, path, hash[:12]+"\n", opts)
	if r.code != 0 || !strings.Contains(r.stdout, "Approved "+fixtureRun+":exec-1:call_3 (payload "+hash[:12]+")") ||
		!strings.Contains(r.stdout, "its result is not disclosed") || !strings.Contains(r.stdout, "Written to "+approvals) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f, err := policy.LoadApprovalFile(approvals)
	if err != nil || len(f.Approvals) != 1 || f.Approvals[0].PayloadSHA256 != hash || f.Approvals[0].Approver != "alice" ||
		!strings.Contains(f.Approvals[0].PolicyScope, effectstest.PolicyDigest) {
		t.Fatalf("%+v %v", f, err)
	}
	// The whole hash, without a prompt, with disclosure.
	r = approve(t, path, "", ApproveOptions{Run: fixtureRun, Call: "call_3", File: approvals, Approver: "alice", PayloadSHA256: hash, Disclose: true})
	if r.code != 0 || !strings.Contains(r.stdout, "may be disclosed") {
		t.Fatalf("--payload-sha256: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		stdin string
		opts  ApproveOptions
		want  string
	}{
		{"", ApproveOptions{Call: "call_1"}, "not awaiting approval"},
		{"", ApproveOptions{Call: "call_3", PayloadSHA256: effectstest.Digest("other")}, "--payload-sha256 " + effectstest.Digest("other") + " is not the pending payload's hash"},
		{"", ApproveOptions{Call: "call_3"}, "no answer"},
		{"", ApproveOptions{Call: "call_3", Expires: -time.Second}, "--expires must be positive"},
		// Where the file cannot be written is bad input said by the flag, never a temporary file's name.
		{"", ApproveOptions{Call: "call_3", PayloadSHA256: hash, File: t.TempDir()}, "is not a regular file: name the approval file to write"},
		{"", ApproveOptions{Call: "call_3", PayloadSHA256: hash, File: filepath.Join(t.TempDir(), "none", "a.json")}, "its directory"},
	} {
		c.opts.Run, c.opts.Approver = fixtureRun, "alice"
		if c.opts.File == "" {
			c.opts.File = approvals
		}
		r := approve(t, path, c.stdin, c.opts)
		if r.code != 2 {
			t.Fatalf("%+v: exit %d", c.opts, r.code)
		}
		oneLine(t, r, c.want)
	}
}

// A call of a finalized run that did not pause (a formation that does not resume, or a completed
// run) can never be dispatched: approving it is refused and nothing is written.
func TestApproveRefusesACallNoRunCanDispatch(t *testing.T) {
	path := effectstest.Store(t, false)
	approvals := filepath.Join(t.TempDir(), "approvals.json")
	r := approve(t, path, "", ApproveOptions{Run: fixtureRun, Call: "call_3", File: approvals, Approver: "alice", PayloadSHA256: strings.Repeat("a", 64)})
	if r.code != 2 || !strings.Contains(r.stderr, "did not pause") {
		t.Fatalf("approve on a run that cannot resume: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(approvals); err == nil {
		t.Fatal("an approval file was written")
	}
}
