package main

import (
	"strings"
	"testing"
)

// `assay version` and `assay --version` print one line: the version, the commit and date from the
// build information (or "unknown"); -v is not --version.
func TestVersionPrintsTheBuildAndDashVIsNotVersion(t *testing.T) {
	want := readBuildInfo().String()
	if !strings.HasPrefix(want, "assay "+version+" (commit ") {
		t.Fatalf("version line %q", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, args...)
		if r.code != 0 || r.stdout != want+"\n" {
			t.Errorf("%v: exit %d, stdout %q, want %q", args, r.code, r.stdout, want+"\n")
		}
	}
	r := runCLI(t, "-v")
	if r.code != 2 || r.stdout != "" {
		t.Errorf("-v: exit %d %q, want 2 and nothing printed", r.code, r.stdout)
	}
	b := buildInfo{Version: "1.2.3", Commit: "0123456789abcdef0123456789abcdef01234567", Date: "2026-12-01T00:00:00Z", Modified: true, GoVersion: "go1.26"}
	if got := b.String(); got != "assay 1.2.3 (commit 0123456789abcdef0123456789abcdef01234567, 2026-12-01T00:00:00Z, modified, go1.26)" {
		t.Errorf("String() = %q", got)
	}
}
