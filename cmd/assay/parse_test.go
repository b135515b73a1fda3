package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// parse runs args through a root holding only the command build returns (as assay's root parses:
// flag errors and empty flags are bad usage), with a runF that captures the options instead of
// running. It returns the options runF got (nil when parsing refused the arguments) and the exit
// status parsing gave.
func parse[T any](t *testing.T, build func(IOStreams, func(context.Context, *T) error) *cobra.Command, args ...string) (*T, int) {
	t.Helper()
	io := IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}
	var got *T
	root := newRoot(io)
	root.AddCommand(build(io, func(_ context.Context, o *T) error { got = o; return nil }))
	finishTree(root)
	root.SetArgs(append([]string{}, args...))
	return got, exitCode(root.Execute())
}

// same reports, as a cmp diff, how got differs from want, leaving the streams and what
// Normalize fills aside.
func same(t *testing.T, args []string, want, got any) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreTypes(IOStreams{}), cmpopts.IgnoreUnexported(harness.Options{}),
		cmp.AllowUnexported(storeFlags{}, graphFlags{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%q parsed (-want +got):\n%s", args, diff)
	}
}

// matrixDefaults are the options `assay matrix run` parses with no flags.
func matrixDefaults() MatrixRunOptions {
	return MatrixRunOptions{Format: "table", Progress: "auto", Harness: harness.Options{OutDir: "assay-out", Formations: []string{"sequential", "parallel"}, Task: "double",
		Profile: "standard", Language: "go", Concurrency: 1, SessionHeader: "X-Session-Id", Tenant: "local", RequestTimeout: 60 * time.Second,
		Mode: "live", MemberToolCalls: harness.DefaultMemberToolCalls, TeamToolCalls: harness.DefaultTeamToolCalls, ReplayTolerance: "exact"}}
}

func TestParseMatrixRun(t *testing.T) {
	full := matrixDefaults()
	full.Format = "json"
	full.Harness.Formations = []string{"reflection", "parallel+vote"}
	full.Harness.ReferenceFaults = []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultDropUsage},
		{Member: "critic", Turn: -1, Kind: reference.FaultReplaceReply, Reply: "a:b"}}
	full.Harness.ModelAliases = map[string]string{"gpt-4o-mini": "gpt-4o-mini-2025"}
	full.Harness.BaseURL, full.Harness.Model, full.Harness.APIKeyEnv = "http://127.0.0.1:8000/v1", "m", "OPENAI_API_KEY"
	full.Harness.MemberToolCalls, full.Harness.TeamToolCalls, full.Harness.RequestTimeout = 0, 0, 0
	full.AxisFlags = map[string][]string{"cases": {"--formations"}, "providers": {"--base-url", "--model", "--api-key-env"}}
	withFile := matrixDefaults()
	withFile.MatrixFile, withFile.GroupBy, withFile.Harness.Language = "m.yaml", "repeat", "python"
	withFile.AxisFlags = map[string][]string{"languages": {"--language"}}
	for _, c := range []struct {
		args []string
		want MatrixRunOptions
	}{
		{[]string{"matrix", "run"}, matrixDefaults()},
		{[]string{"matrix", "run", "--format", "json", "--formations", "reflection, parallel+vote", "--reference-fault", "exec-1:0:drop_usage",
			"--reference-fault", "critic:-1:replace_reply:a:b", "--model-alias", "gpt-4o-mini = gpt-4o-mini-2025", "--base-url", "http://127.0.0.1:8000/v1",
			"--model", "m", "--api-key-env", "OPENAI_API_KEY", "--member-tool-calls", "0", "--team-tool-calls", "0", "--request-timeout", "0s"}, full},
		{[]string{"matrix", "run", "--matrix", "m.yaml", "--group-by", "repeat", "--language", "python"}, withFile},
	} {
		got, code := parse(t, NewCmdMatrix, c.args...)
		if code != 0 || got == nil {
			t.Fatalf("%q: exit %d", c.args, code)
		}
		same(t, c.args, &c.want, got)
	}
	// What the parser cannot read is bad usage, and nothing runs; values it reads are checked by
	// harness.Normalize, not here (a negative concurrency parses).
	for _, args := range [][]string{
		{"matrix", "run", "--formations", "sequential,,parallel"},
		{"matrix", "run", "--formations", ""},
		{"matrix", "run", "--out", ""},
		{"matrix", "run", "--reference-fault", "exec-1:0:explode"},
		{"matrix", "run", "--model-alias", "no-equals"},
		{"matrix", "run", "--concurrency", "two"},
		{"matrix", "run", "extra"},
	} {
		if got, code := parse(t, NewCmdMatrix, args...); code != 2 || got != nil {
			t.Errorf("%q: exit %d, ran %v; want 2 and nothing run", args, code, got != nil)
		}
	}
	if got, code := parse(t, NewCmdMatrix, "matrix", "run", "--concurrency", "-1"); code != 0 || got.Harness.Concurrency != -1 {
		t.Errorf("--concurrency -1: exit %d; the parser reads it and Normalize refuses it", code)
	}
}

func TestParseResume(t *testing.T) {
	args := []string{"resume", "run-1", "--out", "o", "--policy", "p.yaml", "--approvals", "a.json", "--reference-fault", "exec-1:0:slow:2s", "--format", "json"}
	got, code := parse(t, NewCmdResume, args...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := &ResumeOptions{Run: "run-1", Format: "json", Progress: "auto", Harness: harness.Options{OutDir: "o", PolicyFile: "p.yaml", ApprovalsFile: "a.json",
		SessionHeader: "X-Session-Id", RequestTimeout: 60 * time.Second,
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultSlow, Delay: 2 * time.Second}}}}
	same(t, args, want, got)
	for _, args := range [][]string{{"resume"}, {"resume", "a", "b"}, {"resume", "r", "--reference-fault", "x"}} {
		if got, code := parse(t, NewCmdResume, args...); code != 2 || got != nil {
			t.Errorf("%q: exit %d", args, code)
		}
	}
}

func TestParseEffectCommands(t *testing.T) {
	t.Setenv("USER", "alice")
	{
		args := []string{"reconcile", "run-1", "exec-1:call_2", "--lookup", "--store", "s.duckdb", "--effects-db", "e.db", "--wait", "3s"}
		got, code := parse(t, NewCmdReconcile, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d", args, code)
		}
		same(t, args, &ReconcileOptions{Store: storeFlags{out: "assay-out", store: "s.duckdb"}, Run: "run-1", Call: "exec-1:call_2",
			Lookup: true, EffectsDB: "e.db", Operator: "alice", Wait: 3 * time.Second}, got)
	}
	{
		args := []string{"reconcile", "run-1", "call_2", "--outcome", "failed", "--note", "no trace", "--operator", "bob"}
		got, _ := parse(t, NewCmdReconcile, args...)
		same(t, args, &ReconcileOptions{Store: storeFlags{out: "assay-out"}, Run: "run-1", Call: "call_2", Outcome: "failed",
			Note: "no trace", Operator: "bob"}, got)
	}
	{
		args := []string{"approve", "run-1", "call_3", "--payload-sha256", "abc", "--expires", "30m", "--disclose", "--approvals", "a.json", "--out", "o"}
		got, code := parse(t, NewCmdApprove, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d", args, code)
		}
		same(t, args, &ApproveOptions{Store: storeFlags{out: "o"}, Run: "run-1", Call: "call_3", File: "a.json", Expires: 30 * time.Minute,
			Disclose: true, PayloadSHA256: "abc", Approver: "alice"}, got)
	}
	{
		args := []string{"effects", "--state", "unknown", "--format", "json", "run-1", "run-2"}
		got, _ := parse(t, NewCmdEffects, args...)
		same(t, args, &EffectsOptions{Store: storeFlags{out: "assay-out"}, Format: "json", State: "unknown", Runs: []string{"run-1", "run-2"}}, got)
	}
	for _, c := range []struct {
		build func(t *testing.T, args ...string) int
		args  []string
	}{
		{func(t *testing.T, a ...string) int { _, c := parse(t, NewCmdReconcile, a...); return c }, []string{"reconcile", "run-1"}},
		{func(t *testing.T, a ...string) int { _, c := parse(t, NewCmdReconcile, a...); return c }, []string{"reconcile", "r", "c", "--note", ""}},
		{func(t *testing.T, a ...string) int { _, c := parse(t, NewCmdApprove, a...); return c }, []string{"approve", "r"}},
		{func(t *testing.T, a ...string) int { _, c := parse(t, NewCmdApprove, a...); return c }, []string{"approve", "r", "c", "--expires", "soon"}},
		{func(t *testing.T, a ...string) int { _, c := parse(t, NewCmdEffects, a...); return c }, []string{"effects", "--store", ""}},
	} {
		if code := c.build(t, c.args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", c.args, code)
		}
	}
}

func TestParseStoreCommands(t *testing.T) {
	{
		args := []string{"verify", "--manifest", "m.json", "--write", "--wait", "1m", "run-1"}
		got, _ := parse(t, NewCmdVerify, args...)
		same(t, args, &VerifyOptions{Store: storeFlags{out: "assay-out"}, Format: "table", Runs: []string{"run-1"}, Wait: time.Minute,
			Manifest: "m.json", Write: true}, got)
	}
	{
		args := []string{"sql", "--format", "csv", "--store", "s.duckdb", "SELECT 1"}
		got, _ := parse(t, NewCmdSQL, args...)
		same(t, args, &SQLOptions{Store: storeFlags{out: "assay-out", store: "s.duckdb"}, Format: "csv", Query: "SELECT 1"}, got)
	}
	{
		args := []string{"export", "--parquet", "dir", "run-1"}
		got, _ := parse(t, NewCmdExport, args...)
		same(t, args, &ExportOptions{Store: storeFlags{out: "assay-out"}, Parquet: "dir", Runs: []string{"run-1"}, Format: "table"}, got)
	}
	{
		args := []string{"store", "migrate", "--store", "s.duckdb", "--wait", "30s", "--format", "json"}
		got, _ := parse(t, NewCmdStore, args...)
		same(t, args, &StoreMigrateOptions{Store: storeFlags{out: "assay-out", store: "s.duckdb"}, Format: "json", Wait: 30 * time.Second}, got)
	}
	for _, args := range [][]string{{"sql"}, {"sql", "a", "b"}, {"sql", "--wait", "x", "SELECT 1"}} {
		if _, code := parse(t, NewCmdSQL, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestParseOtherCommands(t *testing.T) {
	{
		args := []string{"provider", "serve", "--addr", "127.0.0.1:0", "--faults", "a:1:http_500", "--parallel-capacity", "0", "--effects-db", "e.db"}
		got, code := parse(t, NewCmdProvider, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d", args, code)
		}
		same(t, args, &ProviderServeOptions{Addr: "127.0.0.1:0", Faults: []reference.Fault{{Member: "a", Turn: 1, Kind: reference.FaultHTTP500}},
			SessionHeader: reference.DefaultSessionHeader, Capacity: 0, Format: "text", EffectsDB: "e.db", Model: reference.ModelID}, got)
		if _, code := parse(t, NewCmdProvider, "provider", "serve", "--faults", "a:zero:drop_usage"); code != 2 {
			t.Errorf("a fault that does not parse: exit %d, want 2", code)
		}
	}
	{
		args := []string{"formations", "--format", "json"}
		got, _ := parse(t, NewCmdFormations, args...)
		same(t, args, &FormationsOptions{Format: "json"}, got)
	}
	{
		args := []string{"oracle", "check", "--spec", "clamp", "--deadline", "0s", "f.go"}
		got, _ := parse(t, func(io IOStreams, runF func(context.Context, *OracleCheckOptions) error) *cobra.Command {
			c := &cobra.Command{Use: "oracle"}
			c.AddCommand(NewCmdOracleCheck(io, runF))
			return c
		}, args...)
		same(t, args, &OracleCheckOptions{Spec: "clamp", File: "f.go", Format: "table", Deadline: 0, Cleanup: got.Cleanup}, got)
	}
	{
		args := []string{"index", "--tags", "a,b", "--goos", "linux", "--metrics=false", "dir"}
		got, _ := parse(t, NewCmdIndex, args...)
		same(t, args, &IndexOptions{Dir: "dir", Out: "assay-out", Tests: true, Patterns: []string{"./..."}, Format: "table", Tags: []string{"a", "b"},
			GOOS: "linux", Reuse: true, Metrics: false}, got)
	}
	{
		args := []string{"metrics", "--scope", "func", "--sort", "cognitive", "--top", "3", "--db", "g.db"}
		got, _ := parse(t, NewCmdMetrics, args...)
		same(t, args, &MetricsOptions{Graph: graphFlags{out: "assay-out", db: "g.db"}, Scope: "func", Sort: "cognitive", Top: 3, Format: "table", Variant: "base"}, got)
	}
	{
		args := []string{"graph", "callers", "p.F", "--format", "dot"}
		got, _ := parse(t, NewCmdGraph, args...)
		same(t, args, &GraphOptions{Graph: graphFlags{out: "assay-out"}, Format: "dot", Variant: "base", Query: "callers", Args: []string{"p.F"}}, got)
	}
	for _, args := range [][]string{{"index", "a", "b"}, {"index", "--pattern", ""}, {"metrics", "--sort", ""}, {"graph", "path", "a"}} {
		var code int
		switch args[0] {
		case "index":
			_, code = parse(t, NewCmdIndex, args...)
		case "metrics":
			_, code = parse(t, NewCmdMetrics, args...)
		default:
			_, code = parse(t, NewCmdGraph, args...)
		}
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
