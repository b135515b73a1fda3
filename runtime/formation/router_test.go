package formation

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime"
)

func routerCandidates(t *testing.T) []runtime.MemberSpec {
	res := talker("res")
	res.Name = "Researcher"
	rev := withRoleSpec("rev", "")
	rev.Name, rev.FormationRole = "Reviewer", ""
	ex := writer("ex")
	ex.Name = "Executor"
	return []runtime.MemberSpec{res, rev, ex}
}

func TestRouterDefaultSelectorMatchesDomainRoles(t *testing.T) {
	cases := []struct {
		task, want, method string
	}{
		{"Implement Double and its test.", "ex", "domain_role"},
		{"Review the Double package.", "rev", "domain_role"},
		{"Investigate why Double is slow.", "res", "domain_role"},
		{"Sing a song.", "res", "fallback"},
	}
	for _, c := range cases {
		t.Run(c.task, func(t *testing.T) {
			e, sink, _ := setup(t)
			tm := build(t, "dynamic_router", routerCandidates(t)...)
			tm.Task = c.task
			res := mustRun(t, e, tm, Options{})
			if len(res.Members) != 1 || res.Members[0].MemberID != c.want || res.Metadata["selected_member_id"] != c.want ||
				res.Metadata["selection_method"] != c.method {
				t.Fatalf("%+v", res)
			}
			sel := sink.ofType("router_selected")
			if len(sel) != 1 || payload(t, sel[0])["selected_member_id"] != c.want {
				t.Fatalf("selection events %v", sel)
			}
			started := sink.ofType("member_started")
			if len(started) != 1 || started[0].MemberID != c.want {
				t.Fatalf("exactly the selected member must run, got %d starts", len(started))
			}
			warned := len(sink.ofType("warning")) > 0
			if warned != (c.method == "fallback") {
				t.Fatalf("warning %v for method %s", warned, c.method)
			}
		})
	}
	// The selected executor's structured outcome and tools are preserved.
	e, _, _ := setup(t)
	res := mustRun(t, e, build(t, "dynamic_router", routerCandidates(t)...), Options{})
	if !res.Success || res.Metadata["selected_tools_used"] != "write_file" || res.Metadata["selected_tool_calls"] != "2" ||
		res.FinalOutput != `{"status":"done","files":["double.go","double_test.go"]}` {
		t.Fatalf("%+v", res)
	}
}

func TestRouterExplicitRoutes(t *testing.T) {
	e, sink, _ := setup(t)
	tm := build(t, "dynamic_router", routerCandidates(t)...)
	tm.Task = "Implement the double package."
	res := mustRun(t, e, tm, Options{Router: RouterOptions{Routes: map[string]string{"package": "Researcher", "zzz": "Reviewer"}}})
	if res.Metadata["selected_member_id"] != "res" || res.Metadata["selection_method"] != "route" || res.Metadata["keyword"] != "package" {
		t.Fatalf("%+v", res.Metadata)
	}
	wantConfigError(t, e, sink, tm, Options{Router: RouterOptions{Routes: map[string]string{"x": "Nobody"}}}, "unknown member")
	dup := build(t, "dynamic_router", writer("a"), writer("b"))
	dup.Members[1].Name = dup.Members[0].Name
	wantConfigError(t, e, sink, dup, Options{Router: RouterOptions{Routes: map[string]string{"x": dup.Members[0].Name}}}, "share the name")
}

func TestRouterMember(t *testing.T) {
	e, sink, _ := setup(t)
	members := append(routerCandidates(t), withRoleSpec("r", RoleRouter))
	res := mustRun(t, e, build(t, "dynamic_router", members...), Options{})
	if !res.Success || res.Metadata["selected_member_id"] != "res" || res.Metadata["selection_method"] != "router" || len(res.Members) != 2 {
		t.Fatalf("%+v", res)
	}
	for name, reply := range map[string]string{
		"unknown id":   `{"speaker_id":"nobody"}`,
		"itself":       `{"speaker_id":"r"}`,
		"prose":        `I choose ex`,
		"extra key":    `{"speaker_id":"ex","reason":"x"}`,
		"wrong key":    `{"selected_member_id":"ex"}`,
		"empty":        `{"speaker_id":""}`,
		"malformed":    `{"speaker_id":`,
		"two objects":  `{"speaker_id":"ex"}{"speaker_id":"res"}`,
		"array":        `["ex"]`,
		"number value": `{"speaker_id":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("r", 0, reply))
			res := mustRun(t, e, build(t, "dynamic_router", members...), Options{})
			wantViolation(t, sink, res, "r", "")
			if len(res.Members) != 1 {
				t.Fatal("a member ran after the router failed")
			}
		})
	}
	wantConfigError(t, e, sink, build(t, "dynamic_router", members...), Options{Router: RouterOptions{Routes: map[string]string{"x": "Executor"}}}, "two selectors")
	if !strings.Contains(dynamicRouter.Doc, "never parses model prose") {
		t.Fatal("doc drifted")
	}
}
