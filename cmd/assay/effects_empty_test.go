package main

import (
	"strings"
	"testing"
)

// With nothing in the state asked for, the table says so instead of printing a bare header, and
// JSON is an empty array; both exit 0.
func TestEffectsSaysWhenNothingMatches(t *testing.T) {
	path, runID := effectsFixture(t)
	if r := runCLI(t, "effects", "--store", path, "--state", "unknown"); r.code != 0 || !strings.Contains(r.stdout, "call_2") {
		t.Fatalf("before reconciliation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "reconcile", "--store", path, runID, "call_2", "--outcome", "succeeded", "--note", "deploy log shows it", "--operator", "ops"); r.code != 0 {
		t.Fatalf("reconcile: exit %d: %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--state", "unknown"}, "no effects in state unknown\n"},
		{[]string{"--state", "unknown", "--format", "json"}, "[]\n"},
		{[]string{"--state", "cancelled"}, "no effects in state cancelled\n"},
	} {
		r := runCLI(t, append([]string{"effects", "--store", path}, c.args...)...)
		if r.code != 0 || r.stdout != c.want || r.stderr != "" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}
