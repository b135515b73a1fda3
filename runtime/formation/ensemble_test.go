package formation

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestEnsembleVoteStrictMajority(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), writer("c")), Options{Ensemble: EnsembleOptions{Mode: EnsembleVote}})
	if !res.Success || res.Metadata["selected_member_id"] != "a" || res.Metadata["vote_key"] != "double/go/double.go,double_test.go" {
		t.Fatalf("%+v", res)
	}
	if d := sink.ofType("ensemble_decision"); len(d) != 1 || payload(t, d[0])["mode"] != "vote" {
		t.Fatalf("decision events %v", d)
	}
	for _, m := range res.Members {
		if m.ToolCalls != 2 || !m.Usage.Known() {
			t.Fatalf("candidate deliverables or usage lost: %+v", m)
		}
	}
}

func TestEnsembleVoteFailures(t *testing.T) {
	other := `{"vote_key":"other","answer":"something else"}`
	cases := []struct {
		name    string
		faults  []reference.Fault
		members int
		want    string
	}{
		{"tie", []reference.Fault{replace("b", 1, other)}, 2, "no strict majority"},
		{"three-way split", []reference.Fault{replace("b", 1, other), replace("c", 1, `{"vote_key":"third","answer":"x"}`)}, 3, "no strict majority"},
		{"invalid proposal", []reference.Fault{replace("b", 1, `{"vote_key":"","answer":"x"}`)}, 3, "invalid or missing proposal from b"},
		{"malformed proposal", []reference.Fault{{Member: "c", Turn: 1, Kind: reference.FaultMalformedJSON}}, 3, "invalid or missing proposal from c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _, _ := setup(t, c.faults...)
			ms := []string{"a", "b", "c"}[:c.members]
			tm := build(t, "parallel")
			for _, id := range ms {
				tm.Members = append(tm.Members, build(t, "parallel", writer(id)).Members...)
			}
			res := mustRun(t, e, tm, Options{Ensemble: EnsembleOptions{Mode: EnsembleVote}})
			if res.Success || !strings.Contains(res.Metadata["reason"], c.want) {
				t.Fatalf("%+v", res)
			}
		})
	}
}

func TestEnsembleAnswerLimit(t *testing.T) {
	long := `{"vote_key":"k","answer":"` + strings.Repeat("x", 8193) + `"}`
	e, sink, _ := setup(t, replace("b", 1, long))
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), writer("c")), Options{Ensemble: EnsembleOptions{Mode: EnsembleVote}})
	wantViolation(t, sink, res, "b", "reference to an artifact")
	// Exactly at the limit is fine.
	ok := `{"vote_key":"double/go/double.go,double_test.go","answer":"` + strings.Repeat("é", 8192) + `"}`
	e2, _, _ := setup(t, replace("b", 1, ok))
	if res := mustRun(t, e2, build(t, "parallel", writer("a"), writer("b"), writer("c")), Options{Ensemble: EnsembleOptions{Mode: EnsembleVote}}); !res.Success {
		t.Fatalf("8192-character answer refused: %+v", res)
	}
}

func TestEnsembleJudge(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), withRoleSpec("j", RoleJudge)), Options{Ensemble: EnsembleOptions{Mode: EnsembleJudge}})
	if !res.Success || res.Metadata["selected_member_id"] != "a" || res.Metadata["judge"] != "j" || len(res.Members) != 3 {
		t.Fatalf("%+v", res)
	}
	if d := sink.ofType("ensemble_decision"); len(d) != 1 || d[0].MemberID != "j" {
		t.Fatalf("decision %v", d)
	}
	for name, reply := range map[string]string{
		"not a candidate":     `{"selected_member_id":"j"}`,
		"unknown id":          `{"selected_member_id":"zz"}`,
		"extra key":           `{"selected_member_id":"a","why":"x"}`,
		"prose":               `I pick {"selected_member_id":"a"}`,
		"missing key":         `{}`,
		"markdown fence":      "```json\n{\"selected_member_id\":\"a\"}\n```",
		"debate-style answer": `{"selected_member_id":"a","verdict":"good"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("j", 0, reply))
			res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), withRoleSpec("j", RoleJudge)), Options{Ensemble: EnsembleOptions{Mode: EnsembleJudge}})
			wantViolation(t, sink, res, "j", "")
		})
	}
}

func TestEnsembleSynthesizer(t *testing.T) {
	e, _, _ := setup(t)
	res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), withRoleSpec("s", RoleSynthesizer)), Options{Ensemble: EnsembleOptions{Mode: EnsembleSynthesizer}})
	if !res.Success || !strings.HasPrefix(res.FinalOutput, "synthesis of a, b") || res.Metadata["synthesizer"] != "s" {
		t.Fatalf("%+v", res)
	}
	for name, reply := range map[string]string{"empty answer": `{"answer":""}`, "wrong key": `{"result":"x"}`} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("s", 0, reply))
			res := mustRun(t, e, build(t, "parallel", writer("a"), writer("b"), withRoleSpec("s", RoleSynthesizer)), Options{Ensemble: EnsembleOptions{Mode: EnsembleSynthesizer}})
			wantViolation(t, sink, res, "s", "")
		})
	}
}

func TestEnsembleConfiguration(t *testing.T) {
	e, sink, _ := setup(t)
	cases := []struct {
		name      string
		formation string
		mode      string
		members   []string // roles; "" is a candidate
		want      string
	}{
		{"unknown mode", "parallel", "poll", []string{"", ""}, "unknown"},
		{"mode of another formation", "sequential", EnsembleVote, []string{"", ""}, "mode of parallel or consensus"},
		{"judge mode without judge", "parallel", EnsembleJudge, []string{"", ""}, "exactly 1 judge"},
		{"synthesizer mode without synthesizer", "parallel", EnsembleSynthesizer, []string{"", ""}, "exactly 0 judge and 1 synthesizer"},
		{"vote with a judge", "parallel", EnsembleVote, []string{"", "", RoleJudge}, "exactly 0 judge"},
		{"two judges", "parallel", EnsembleJudge, []string{"", "", RoleJudge, RoleJudge}, "exactly 1 judge"},
		{"one candidate", "parallel", EnsembleVote, []string{""}, "at least two candidates"},
		{"critic in an ensemble", "parallel", EnsembleVote, []string{"", "", RoleCritic}, "no part in an ensemble"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := build(t, c.formation)
			for i, role := range c.members {
				id := string(rune('a' + i))
				m := writer(id)
				if role != "" {
					m = withRoleSpec(id, role)
				}
				tm.Members = append(tm.Members, build(t, c.formation, m).Members...)
			}
			wantConfigError(t, e, sink, tm, Options{Ensemble: EnsembleOptions{Mode: c.mode}}, c.want)
		})
	}
}

func TestEnsembleOnConsensus(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "consensus", writer("a"), writer("b"), writer("c")), Options{Ensemble: EnsembleOptions{Mode: EnsembleVote}})
	if !res.Success || res.Metadata["consensus_achieved"] != "true" || res.Metadata["selected_member_id"] != "a" {
		t.Fatalf("%+v", res)
	}
	if len(sink.ofType("consensus_round")) != 1 || len(sink.ofType("ensemble_decision")) != 1 {
		t.Fatal("round or decision not recorded")
	}
}

func TestResumeIsRefusedBeforeExecuting(t *testing.T) {
	e, sink, _ := setup(t)
	for _, f := range Registry() {
		t.Run(f.Name, func(t *testing.T) {
			_, err := RunWith(context.Background(), e, build(t, f.Name, writer("a"), writer("b")), Options{Resume: true})
			want := ErrNotDurable
			if f.Durable {
				want = ErrResumeUnavailable
			}
			if !errors.Is(err, want) {
				t.Fatalf("resume of %s: %v, want %v", f.Name, err, want)
			}
		})
	}
	_, err := RunWith(context.Background(), e, build(t, "parallel", writer("a"), writer("b")), Options{Resume: true, Ensemble: EnsembleOptions{Mode: EnsembleVote}})
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("ensemble resume: %v", err)
	}
	if sink.count() != 0 {
		t.Fatalf("%d events for refused resumes", sink.count())
	}
	durable := map[string]bool{}
	for _, f := range Registry() {
		durable[f.Name] = f.Durable
	}
	for _, n := range []string{"sequential", "pipeline", "parallel", "hierarchical", "consensus", "reflection"} {
		if !durable[n] {
			t.Errorf("%s should be declared durable", n)
		}
	}
	for _, n := range []string{"dynamic_router", "multi_level_hierarchy", "adaptive", "group_chat", "debate", "handoff"} {
		if durable[n] {
			t.Errorf("%s should not be declared durable", n)
		}
	}
}
