package formation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func spoke(t *testing.T, s *memSink) []string {
	var out []string
	for _, ev := range s.ofType("member_spoke") {
		out = append(out, ev.MemberID)
	}
	return out
}

func TestGroupChatRoundRobinUntilDone(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "group_chat", writer("a"), writer("b")), Options{})
	if !res.Success || res.Metadata["ended_by"] != "done" || res.Metadata["turns"] != "2" || strings.Join(spoke(t, sink), ",") != "a,b" {
		t.Fatalf("%+v spoke %v", res, spoke(t, sink))
	}
	for i, ev := range sink.ofType("member_spoke") {
		if payload(t, ev)["sequence"] != float64(i+1) {
			t.Fatalf("sequence %v", payload(t, ev))
		}
	}
	// Members wrote their deliverables in their first turn.
	for _, m := range res.Members {
		if m.ToolCalls != 2 {
			t.Fatalf("%s made %d tool calls", m.MemberID, m.ToolCalls)
		}
	}
}

func TestGroupChatSelectionAndTermination(t *testing.T) {
	t.Run("selector", func(t *testing.T) {
		e, sink, _ := setup(t)
		res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b"), talker("c")), Options{Conversation: ConversationOptions{
			Selector: func(tr Transcript, c []string) (string, error) { return "c", nil }}})
		if got := strings.Join(spoke(t, sink), ","); got != "c,c,c" || res.Metadata["ended_by"] != "done" {
			t.Fatalf("spoke %s meta %v", got, res.Metadata)
		}
	})
	t.Run("candidate filter", func(t *testing.T) {
		e, sink, _ := setup(t)
		mustRun(t, e, build(t, "group_chat", talker("a"), talker("b"), talker("c")), Options{Conversation: ConversationOptions{
			CandidateFilter: func(tr Transcript) ([]string, error) { return []string{"b", "c"}, nil }}})
		if got := strings.Join(spoke(t, sink), ","); got != "b,c,b" {
			t.Fatalf("spoke %s", got)
		}
	})
	t.Run("termination predicate sees an immutable snapshot", func(t *testing.T) {
		e, sink, _ := setup(t)
		res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b"), talker("c")), Options{Conversation: ConversationOptions{
			Terminate: func(tr Transcript) (bool, error) {
				tr[0].Content = "tampered"
				return len(tr) == 2, nil
			}}})
		if res.Metadata["ended_by"] != "termination" || res.Metadata["turns"] != "2" || strings.Contains(res.FinalOutput, "tampered") {
			t.Fatalf("%+v", res)
		}
		if c := payload(t, sink.ofType("member_spoke")[0])["content"]; c == "tampered" {
			t.Fatal("a callback changed the conversation")
		}
	})
	t.Run("router member", func(t *testing.T) {
		e, sink, _ := setup(t)
		res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b"), withRoleSpec("r", RoleRouter)), Options{})
		if got := strings.Join(spoke(t, sink), ","); got != "a,b" || !res.Success || byID(res)["r"].Turns != 2 {
			t.Fatalf("spoke %s %+v", got, res)
		}
	})
	t.Run("max turns ends the chat", func(t *testing.T) {
		e, _, _ := setup(t)
		res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b"), talker("c")), Options{Conversation: ConversationOptions{MaxTurns: 2}})
		if !res.Success || res.Metadata["ended_by"] != "max_turns" || res.Metadata["turns"] != "2" {
			t.Fatalf("%+v", res)
		}
	})
}

func TestGroupChatFailures(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		opts ConversationOptions
		want string
	}{
		{"filter error", ConversationOptions{CandidateFilter: func(Transcript) ([]string, error) { return nil, boom }}, "candidate filter callback failed: boom"},
		{"filter duplicates", ConversationOptions{CandidateFilter: func(Transcript) ([]string, error) { return []string{"a", "a"}, nil }}, "listed twice"},
		{"filter unknown id", ConversationOptions{CandidateFilter: func(Transcript) ([]string, error) { return []string{"zz"}, nil }}, "unknown speaker"},
		{"filter empty", ConversationOptions{CandidateFilter: func(Transcript) ([]string, error) { return nil, nil }}, "no eligible speaker"},
		{"selector error", ConversationOptions{Selector: func(Transcript, []string) (string, error) { return "", boom }}, "selector callback failed"},
		{"selector outside candidates", ConversationOptions{Selector: func(Transcript, []string) (string, error) { return "zz", nil }}, "not one of"},
		{"termination error", ConversationOptions{Terminate: func(Transcript) (bool, error) { return false, boom }}, "termination predicate callback failed"},
		// A panicking callback fails the run like an erring one; it never escapes RunWith (issue 22, 7).
		{"filter panics", ConversationOptions{CandidateFilter: func(Transcript) ([]string, error) { panic("filter bug") }}, "candidate filter callback failed: panicked: filter bug"},
		{"selector panics", ConversationOptions{Selector: func(Transcript, []string) (string, error) { panic("selector bug") }}, "selector callback failed: panicked: selector bug"},
		{"termination panics", ConversationOptions{Terminate: func(Transcript) (bool, error) { panic("terminate bug") }}, "termination predicate callback failed: panicked"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, sink, _ := setup(t)
			res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b")), Options{Conversation: c.opts})
			if res.Success || !strings.Contains(res.Metadata["reason"], c.want) {
				t.Fatalf("%+v", res)
			}
			warned := false
			for _, w := range sink.ofType("warning") {
				warned = warned || strings.Contains(string(w.Payload), "callback failed")
			}
			if !warned {
				t.Fatal("no warning for the callback failure")
			}
		})
	}
	t.Run("transcript budget", func(t *testing.T) {
		e, sink, _ := setup(t)
		res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b")), Options{Conversation: ConversationOptions{TranscriptMaxChars: 30}})
		if res.Success || !strings.Contains(byID(res)["b"].Error, "transcript_max_chars 30 exceeded") || len(sink.ofType("member_spoke")) != 1 {
			t.Fatalf("%+v", res)
		}
	})
	for name, reply := range map[string]string{
		"names a destination": `{"content":"hi","done":false,"handoff_to":"b"}`,
		"missing handoff_to":  `{"content":"hi","done":false}`,
		"done as a string":    `{"content":"hi","done":"no","handoff_to":null}`,
		"empty content":       `{"content":"","done":false,"handoff_to":null}`,
		"malformed":           `{"content":"hi","done":false,"handoff_to":null`,
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("a", 0, reply))
			res := mustRun(t, e, build(t, "group_chat", talker("a"), talker("b")), Options{})
			wantViolation(t, sink, res, "a", "")
		})
	}
	e, sink, _ := setup(t)
	wantConfigError(t, e, sink, build(t, "group_chat", talker("a")), Options{}, "at least two speakers")
	wantConfigError(t, e, sink, build(t, "group_chat", talker("a"), talker("b"), withRoleSpec("r", RoleRouter)),
		Options{Conversation: ConversationOptions{Selector: func(Transcript, []string) (string, error) { return "a", nil }}}, "two selectors")
}

func TestDebate(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "debate", writer("a"), writer("b"), withRoleSpec("j", RoleJudge)), Options{})
	if !res.Success || res.Metadata["selected_member_id"] != "a" || res.Metadata["turns"] != "4" || strings.Join(spoke(t, sink), ",") != "a,b,a,b" {
		t.Fatalf("%+v spoke %v", res, spoke(t, sink))
	}
	if v := sink.ofType("judge_verdict"); len(v) != 1 || payload(t, v[0])["selected_member_id"] != "a" || v[0].MemberID != "j" {
		t.Fatalf("verdict events %v", v)
	}
	// max_turns bounds contributions.
	e2, sink2, _ := setup(t)
	mustRun(t, e2, build(t, "debate", talker("a"), talker("b"), withRoleSpec("j", RoleJudge)), Options{Conversation: ConversationOptions{MaxTurns: 3}})
	if got := strings.Join(spoke(t, sink2), ","); got != "a,b,a" {
		t.Fatalf("spoke %s", got)
	}
	for name, f := range map[string]reference.Fault{
		"judge picks a non-debater": replace("j", 0, `{"selected_member_id":"j","verdict":"me"}`),
		"judge without verdict":     replace("j", 0, `{"selected_member_id":"a"}`),
		"judge empty verdict":       replace("j", 0, `{"selected_member_id":"a","verdict":""}`),
		"judge malformed":           {Member: "j", Turn: 0, Kind: reference.FaultMalformedJSON},
	} {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, f)
			res := mustRun(t, e, build(t, "debate", talker("a"), talker("b"), withRoleSpec("j", RoleJudge)), Options{})
			wantViolation(t, sink, res, "j", "")
		})
	}
	t.Run("debater names a destination", func(t *testing.T) {
		e, sink, _ := setup(t, replace("b", 0, `{"content":"x","done":false,"handoff_to":"a"}`))
		res := mustRun(t, e, build(t, "debate", talker("a"), talker("b"), withRoleSpec("j", RoleJudge)), Options{})
		wantViolation(t, sink, res, "b", "only the handoff formation")
		if len(sink.ofType("judge_verdict")) != 0 {
			t.Fatal("the judge ruled on a broken debate")
		}
	})
	wantConfigError(t, e, sink, build(t, "debate", talker("a"), talker("b")), Options{}, "exactly one member with formation role judge")
	wantConfigError(t, e, sink, build(t, "debate", talker("a"), withRoleSpec("j", RoleJudge)), Options{}, "at least two debaters")
}

func TestHandoff(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "handoff", talker("a"), talker("b"), talker("c")), Options{})
	if !res.Success || res.Metadata["ended_by"] != "done" || strings.Join(spoke(t, sink), ",") != "a,b,c" {
		t.Fatalf("%+v", res)
	}
	var hops []string
	for _, ev := range sink.ofType("member_handoff") {
		p := payload(t, ev)
		hops = append(hops, p["source"].(string)+">"+p["target"].(string))
	}
	if strings.Join(hops, ",") != "a>b,b>c" {
		t.Fatalf("handoffs %v", hops)
	}
	// The transcript travels: c's request holds a's and b's turns.
	var found bool
	for name, data := range sink.artifacts {
		if strings.HasPrefix(name, "provider/run-test-c/") && strings.HasSuffix(name, "request.json") {
			found = strings.Contains(string(data), "[1] a: ") && strings.Contains(string(data), "[2] b: ")
		}
	}
	if !found {
		t.Fatal("the transcript did not travel with the handoff")
	}
	cases := map[string]string{
		"self-handoff":             `{"content":"x","done":false,"handoff_to":"a"}`,
		"unknown destination":      `{"content":"x","done":false,"handoff_to":"zz"}`,
		"done with a destination":  `{"content":"x","done":true,"handoff_to":"b"}`,
		"unfinished without one":   `{"content":"x","done":false,"handoff_to":null}`,
		"destination not a string": `{"content":"x","done":false,"handoff_to":7}`,
		"malformed":                `{"content":"x",`,
	}
	for name, reply := range cases {
		t.Run(name, func(t *testing.T) {
			e, sink, _ := setup(t, replace("a", 0, reply))
			res := mustRun(t, e, build(t, "handoff", talker("a"), talker("b")), Options{})
			wantViolation(t, sink, res, "a", "")
			if len(sink.ofType("member_handoff")) != 0 {
				t.Fatal("a broken turn handed off")
			}
		})
	}
	t.Run("max turns with a pending handoff fails", func(t *testing.T) {
		e, _, _ := setup(t)
		res := mustRun(t, e, build(t, "handoff", talker("a"), talker("b"), talker("c")), Options{Conversation: ConversationOptions{MaxTurns: 2}})
		if res.Success || !strings.Contains(res.Metadata["reason"], "handoff to c pending") {
			t.Fatalf("%+v", res)
		}
	})
	wantConfigError(t, e, sink, build(t, "handoff", talker("a")), Options{}, "at least two")
	_ = os.Remove
	_ = filepath.Join
}
