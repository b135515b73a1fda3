package formation

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestHierarchicalSupervisorSynthesizesDelegatedOutcomes(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor), writer("a"), writer("b")), Options{})
	if !res.Success || res.FinalOutput != "synthesis of a, b" || res.Metadata["supervisor"] != "boss" || len(res.Members) != 3 {
		t.Fatalf("%+v", res)
	}
	// The supervisor starts only after both workers completed.
	var order []string
	for _, ev := range sink.events {
		if ev.Type == "member_started" || ev.Type == "member_completed" {
			order = append(order, ev.Type+":"+ev.MemberID)
		}
	}
	if got := strings.Join(order, ","); !strings.HasSuffix(got, "member_started:boss,member_completed:boss") {
		t.Fatalf("order %s", got)
	}
}

func TestHierarchicalFailedWorkerStaysFailed(t *testing.T) {
	e, _, _ := setup(t, reference.Fault{Member: "b", Turn: -1, Kind: reference.FaultHTTP500})
	res := mustRun(t, e, build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor), writer("a"), writer("b")), Options{})
	m := byID(res)
	if res.Success || m["b"].Success || !m["boss"].Success || !strings.Contains(res.FinalOutput, "failed members:\n- b: ") {
		t.Fatalf("a failed worker must fail the team although the supervisor synthesized: %+v", res)
	}
}

func TestHierarchicalContractViolationsAndConfiguration(t *testing.T) {
	for name, reply := range map[string]string{
		"empty answer":     `{"answer":" "}`,
		"completion reply": `{"status":"done","files":[]}`,
		"malformed":        `{"answer":"x"`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("boss", 0, reply))
			res := mustRun(t, e, build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor), writer("a"), writer("b")), Options{})
			wantViolation(t, sink, res, "boss", "")
		})
	}
	e, sink, _ := setup(t)
	boss := withRoleSpec("boss", RoleSupervisor)
	boss.AllowedTools = []string{"write_file"}
	wantConfigError(t, e, sink, build(t, "hierarchical", boss, writer("a")), Options{}, "readonly")
	wantConfigError(t, e, sink, build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor)), Options{}, "no member to delegate")
	wantConfigError(t, e, sink, build(t, "hierarchical", withRoleSpec("x", RoleSupervisor), withRoleSpec("y", RoleSupervisor), writer("a")), Options{}, "at most one")
	a, b := writer("a"), writer("b")
	a.Dir, b.Dir = "/tmp/shared-x", "/tmp/shared-x"
	wantConfigError(t, e, sink, build(t, "hierarchical", withRoleSpec("boss", RoleSupervisor), a, b), Options{}, "share working directory")
}
