package main

import (
	"encoding/json"
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
	commit, date, yes := "0123456789abcdef0123456789abcdef01234567", "2026-12-01T00:00:00Z", true
	b := buildInfo{Version: "1.2.3", Commit: &commit, Date: &date, Modified: &yes, GoVersion: "go1.26"}
	if got := b.String(); got != "assay 1.2.3 (commit 0123456789abcdef0123456789abcdef01234567, committed 2026-12-01T00:00:00Z, modified, go1.26)" {
		t.Errorf("String() = %q", got)
	}
	// Not stamped: the line says unknown and the JSON null, never a clean "modified": false.
	if got := (buildInfo{Version: "1.2.3", GoVersion: "go1.26"}).String(); got != "assay 1.2.3 (commit unknown, committed unknown, go1.26)" {
		t.Errorf("String() of an unstamped build = %q", got)
	}
	raw, err := json.Marshal(buildInfo{Version: "1.2.3", GoVersion: "go1.26"})
	if err != nil || string(raw) != `{"version":"1.2.3","commit":null,"date":null,"modified":null,"go_version":"go1.26"}` {
		t.Errorf("JSON of an unstamped build: %s %v", raw, err)
	}
}
