package formation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// goAssignment is the standard assignment line: Double in Go, two files.
var goAssignment = reference.FormatAssignment(reference.Assignment{Task: "double", Language: "go", Package: "double",
	Files: []string{"double.go", "double_test.go"}})

// writer is an implementing member: write and read tools, the Go assignment, its own directory
// (set by build), idempotent.
func writer(id string) runtime.MemberSpec {
	return runtime.MemberSpec{ID: id, Name: "Exec " + id, DomainRole: "executor", Goal: "executor",
		Task: "Write double.go.\n" + goAssignment, AllowedTools: []string{"write_file", "read_file"}, Idempotent: true}
}

// talker is a member with no assignment and no tools: its every turn is a structured reply.
func talker(id string) runtime.MemberSpec {
	return runtime.MemberSpec{ID: id, Name: "Talker " + id, DomainRole: "researcher", Goal: "talker", Task: "Discuss the task.", Idempotent: true}
}

// withRoleSpec is a non-implementing member with a formation role and only read_file.
func withRoleSpec(id, role string) runtime.MemberSpec {
	return runtime.MemberSpec{ID: id, Name: role + " " + id, DomainRole: "reviewer", FormationRole: role, Goal: role,
		Task: "Do your part.", AllowedTools: []string{"read_file"}, Idempotent: true}
}

// build makes a team; members without a directory get their own under t.TempDir().
func build(t *testing.T, formation string, members ...runtime.MemberSpec) runtime.Team {
	t.Helper()
	tm := runtime.Team{RunID: "run-test", Formation: formation, Task: "Implement Double and its test."}
	root := t.TempDir()
	for _, m := range members {
		if m.Dir == "" {
			m.Dir = filepath.Join(root, m.ID)
			if err := os.MkdirAll(m.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		tm.Members = append(tm.Members, m)
	}
	return tm
}

// replace scripts member's reply at turn as text (replace_reply fault).
func replace(member string, turn int, text string) reference.Fault {
	return reference.Fault{Member: member, Turn: turn, Kind: reference.FaultReplaceReply, Reply: text}
}

func byID(res runtime.TeamResult) map[string]runtime.MemberResult {
	m := map[string]runtime.MemberResult{}
	for _, r := range res.Members {
		m[r.MemberID] = r
	}
	return m
}

// mustRun runs the team with opts and fails the test on a coordinator error.
func mustRun(t *testing.T, e *runtime.Engine, tm runtime.Team, opts Options) runtime.TeamResult {
	t.Helper()
	res, err := RunWith(context.Background(), e, tm, opts)
	if err != nil {
		t.Fatalf("RunWith: %v", err)
	}
	return res
}

// wantConfigError asserts the run is refused as an invalid configuration before any event.
func wantConfigError(t *testing.T, e *runtime.Engine, sink *memSink, tm runtime.Team, opts Options, contains string) {
	t.Helper()
	before := sink.count()
	_, err := RunWith(context.Background(), e, tm, opts)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("err %v, want ErrInvalidConfig containing %q", err, contains)
	}
	if sink.count() != before {
		t.Fatalf("%d event(s) emitted for a refused configuration", sink.count()-before)
	}
}

// wantViolation asserts a member failed with a contract violation recorded as a warning.
func wantViolation(t *testing.T, sink *memSink, res runtime.TeamResult, member, contains string) {
	t.Helper()
	if res.Success {
		t.Fatalf("team succeeded despite %s's contract violation: %+v", member, res)
	}
	r, ok := byID(res)[member]
	if !ok || r.Success || !strings.Contains(r.Error, "malformed structured reply") || !strings.Contains(r.Error, contains) {
		t.Fatalf("member %s: %+v, want a malformed-reply failure containing %q", member, r, contains)
	}
	for _, w := range sink.ofType("warning") {
		if w.MemberID == member && strings.Contains(string(w.Payload), "malformed structured reply") {
			return
		}
	}
	t.Fatalf("no warning event for %s's violation", member)
}
