package formation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// reflectionTeam is a generator writing in its directory and a critic reading the same directory;
// satisfiedAt is the iteration at which the reference critic is satisfied.
func reflectionTeam(t *testing.T, satisfiedAt int) runtime.Team {
	tm := build(t, "reflection", writer("gen"))
	critic := withRoleSpec("critic", RoleCritic)
	critic.Dir = tm.Members[0].Dir
	critic.Task = "Review the generator's files.\n" + reference.FormatAssignment(reference.Assignment{Task: "double", Language: "go",
		Package: "double", Files: []string{"double.go", "double_test.go"}, SatisfiedAt: satisfiedAt})
	tm.Members = append(tm.Members, critic)
	return tm
}

func TestReflectionLoopsUntilTheCriticIsSatisfied(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, reflectionTeam(t, 2), Options{})
	m := byID(res)
	if !res.Success || res.Metadata["iterations"] != "2" || res.Metadata["satisfied"] != "true" || res.Metadata["verdict"] != "satisfied" {
		t.Fatalf("%+v", res)
	}
	if m["gen"].Turns != 2 || m["critic"].Turns != 2 || !m["gen"].Usage.Known() || !m["critic"].Usage.Known() {
		t.Fatalf("member results are not the real accumulated ones: %+v", res.Members)
	}
	if m["critic"].ToolCalls != 4 || strings.Join(m["critic"].ToolsUsed, ",") != "read_file" {
		t.Fatalf("the critic should have read both files each iteration with read_file only: %+v", m["critic"])
	}
	verdicts := sink.ofType("critic_verdict")
	if len(verdicts) != 2 || payload(t, verdicts[0])["verdict"] != "needs_work" || payload(t, verdicts[1])["verdict"] != "satisfied" {
		t.Fatalf("verdicts %v", verdicts)
	}
	var attempts []map[string]any
	if err := json.Unmarshal([]byte(m["gen"].Metadata["attempts"]), &attempts); err != nil || len(attempts) != 2 || attempts[0]["verdict"] != "needs_work" {
		t.Fatalf("attempts %q: %v", m["gen"].Metadata["attempts"], err)
	}
	if res.FinalOutput != m["gen"].Output {
		t.Fatalf("final output %q is not the generated solution %q", res.FinalOutput, m["gen"].Output)
	}
	// The generator's second attempt was shown the critic's feedback.
	var req map[string]any
	if err := json.Unmarshal(sink.artifacts["provider/run-test-gen/2/request.json"], &req); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := json.Marshal(req["messages"]); !strings.Contains(string(msgs), "The critic's feedback") {
		t.Fatalf("feedback not passed to the generator: %s", msgs)
	}
}

func TestReflectionMalformedVerdictFailsWithoutAnotherGeneration(t *testing.T) {
	cases := map[string]reference.Fault{
		"malformed JSON":  {Member: "critic", Turn: 1, Kind: reference.FaultMalformedJSON},
		"unknown verdict": replace("critic", 1, `{"verdict":"maybe","feedback":"x"}`),
		"empty feedback":  replace("critic", 1, `{"verdict":"needs_work","feedback":""}`),
		"extra key":       replace("critic", 1, `{"verdict":"satisfied","feedback":"ok","score":1}`),
		"missing key":     replace("critic", 1, `{"verdict":"satisfied"}`),
		"prose":           replace("critic", 1, `Looks good! {"verdict":"satisfied","feedback":"ok"}`),
		"fenced":          replace("critic", 1, "```json\n{\"verdict\":\"satisfied\",\"feedback\":\"ok\"}\n```"),
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, fault)
			res := mustRun(t, e, reflectionTeam(t, 2), Options{})
			wantViolation(t, sink, res, "critic", "")
			if g := byID(res)["gen"]; g.Turns != 1 || len(sink.ofType("critic_verdict")) != 0 {
				t.Fatalf("a malformed verdict led to another generation or a recorded verdict: %+v", g)
			}
		})
	}
}

func TestReflectionIterationLimitAndConfiguration(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, reflectionTeam(t, 5), Options{Reflection: ReflectionOptions{MaxIterations: 2}})
	if res.Success || res.Metadata["iterations"] != "2" || res.Metadata["satisfied"] != "false" {
		t.Fatalf("%+v", res)
	}
	tm := reflectionTeam(t, 1)
	wantConfigError(t, e, sink, tm, Options{Reflection: ReflectionOptions{VerdictFormat: "text"}}, "verdict_format")
	wantConfigError(t, e, sink, build(t, "reflection", writer("a"), writer("b")), Options{}, "formation role critic")
	wantConfigError(t, e, sink, build(t, "reflection", writer("a"), withRoleSpec("c", RoleCritic), writer("b")), Options{}, "exactly a generator and a critic")
	critic := withRoleSpec("c", RoleCritic)
	critic.AllowedTools = []string{"write_file"}
	wantConfigError(t, e, sink, build(t, "reflection", writer("a"), critic), Options{}, "readonly")
}
