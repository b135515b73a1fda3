package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/harness/replay"
)

// The flags parse into the options, and the command reaches the replay package only through them.
func TestReplayVerifyParsesItsFlags(t *testing.T) {
	var got *ReplayVerifyOptions
	cmd := NewCmdReplay(IOStreams{}, func(_ context.Context, o *ReplayVerifyOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"verify", "run-a", "run-b", "--policy", "p.yaml", "--mode", "live", "--tenant", "t", "--tolerance", "exact",
		"--checks", "--model-alias", "a=b", "--format", "json", "--out", "o"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || strings.Join(got.Runs, ",") != "run-a,run-b" || got.PolicyFile != "p.yaml" || got.Mode != "live" || got.Tenant != "t" ||
		got.Tolerance != "exact" || !got.Checks || got.ModelAliases[0] != "a=b" || got.Format != "json" || got.Store.path() != filepath.Join("o", "evidence.duckdb") {
		t.Fatalf("parsed %+v", got)
	}
}

// Bad input exits 2 with one line naming it; a replay that is not exact exits 1; an exact one 0,
// with the JSON objects the issue names.
func TestReplayVerifyExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "verify", "--all", "--out", t.TempDir()}, "no evidence store"},
		{[]string{"replay", "verify", "--all", "--tolerance", "loose", "--out", t.TempDir()}, "unknown replay tolerance policy"},
		{[]string{"replay", "verify", "--out", t.TempDir()}, "exactly one"},
		{[]string{"replay", "verify", "--all", "--format", "xml"}, "--format"},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", c.args, r.code, r.stderr)
			continue
		}
		oneLine(t, r, c.want)
	}
	if testing.Short() {
		t.Skip("the end-to-end matrix builds and runs member code (see caseLanguage); skipped with -short")
	}
	// A copy of the shared sequential case, replayed once with --latest --format json; the copy is
	// this test's to replay again.
	rs := replayedSequentialRun(t)
	out, r := rs.out, rs.r
	var res []map[string]json.RawMessage
	if r.code != 0 || json.Unmarshal(listOf(t, r.stdout, "results"), &res) != nil || len(res) != 1 {
		t.Fatalf("replay verify --latest: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, k := range []string{"run_id", "replay_run_id", "verdict", "first_divergence"} {
		if _, ok := res[0][k]; !ok {
			t.Errorf("the JSON object lacks %s: %s", k, r.stdout)
		}
	}
	if string(res[0]["verdict"]) != `"`+replay.Exact+`"` || string(res[0]["first_divergence"]) != "null" {
		t.Errorf("%s", r.stdout)
	}
	r = runCLI(t, "replay", "verify", "--latest", "--out", out, "--tolerance", "volatile")
	if r.code != 1 || !strings.Contains(r.stdout, "refused") {
		t.Fatalf("a wider tolerance: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	oneLine(t, r, "not exact or within tolerance")
	if r := runCLI(t, "verify", "--out", out); r.code != 0 {
		t.Fatalf("assay verify after the replays: exit %d\n%s", r.code, r.stdout)
	}
}
