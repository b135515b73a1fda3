package event

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/tool"
)

// payloads has one value of every payload type.
func payloads() []Payload {
	decision := "the answer"
	to := "exec-2"
	return []Payload{TeamStarted{Formation: "sequential", Members: []string{"a"}}, TeamCompleted{Formation: "sequential", Success: true},
		MemberStarted{MemberTurn{Formation: "f", Invocation: 1}}, MemberCompleted{MemberTurn{Output: "o"}}, MemberFailed{MemberTurn{Error: "e"}},
		MemberRestored{Invocation: 2}, MemberDeferred{Reason: "r"}, MemberPaused{CallID: "c"}, MemberThrottled{Limit: 1}, BudgetRefused{Error: "e"},
		ProviderExchange{Seq: 3}, ToolCall{tool.Intent{CallID: "c1"}}, ToolResult{tool.Outcome{CallID: "c1"}}, Warning{Warning: "w"},
		CriticVerdict{Verdict: "satisfied"}, ConsensusRound{Round: 1, Groups: map[string][]string{"key:a": {"x"}}}, ConsensusDecision{Decision: &decision},
		EnsembleDecision{Mode: "vote", Votes: map[string]int{"a": 2}}, JudgeVerdict{SelectedMemberID: "x"}, RouterSelected{SelectedMemberID: "x"},
		MemberSpoke{Sequence: 1, HandoffTo: &to}, MemberHandoff{Source: "a", Target: "b"}, FormationSwitched{From: "a", To: "b"},
		WorktreeAllocated{Path: "p"}, BoundaryConfigured{Mode: "live"}, CheckCompleted{Check: "files"}, Checkpoint{Turns: 1}, RunResumed{ResumesRunID: "r"},
		ReplayStarted{ReplaysRunID: "r"}, ReplayVerdict{Verdict: "exact"}}
}

func TestEveryTypeHasOnePayload(t *testing.T) {
	var got []string
	for _, p := range payloads() {
		if slices.Contains(got, p.EventType()) {
			t.Errorf("two payload types claim %s", p.EventType())
		}
		got = append(got, p.EventType())
	}
	slices.Sort(got)
	want := Types()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("payload types %v, Types() %v", got, want)
	}
}

func TestMarshalDecodeRoundTrip(t *testing.T) {
	raw, err := Marshal(MemberSpoke{Sequence: 2, Content: "a > b & c", Done: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "a > b & c") {
		t.Errorf("HTML-escaped: %s", raw)
	}
	if !strings.Contains(string(raw), `"handoff_to":null`) {
		t.Errorf("handoff_to must be present as null: %s", raw)
	}
	back, err := Decode[MemberSpoke](TypeMemberSpoke, raw)
	if err != nil || back.Sequence != 2 || back.Content != "a > b & c" || !back.Done || back.HandoffTo != nil {
		t.Fatalf("Decode: %+v %v", back, err)
	}
	if _, err := Decode[MemberHandoff](TypeMemberSpoke, raw); err == nil {
		t.Error("decoding a member_spoke as member_handoff must fail")
	}
	if _, err := Decode[MemberSpoke](TypeMemberSpoke, json.RawMessage(`[1]`)); err == nil {
		t.Error("a payload that is not an object must fail")
	}
	// The embedded turn and intent are flattened, as the events were always stored.
	raw, _ = Marshal(MemberCompleted{MemberTurn{Formation: "f", Invocation: 3, Output: "done"}})
	var flat map[string]any
	if err := json.Unmarshal(raw, &flat); err != nil || flat["invocation"] != float64(3) || flat["output"] != "done" {
		t.Fatalf("member_completed payload %s", raw)
	}
	raw, _ = Marshal(ToolCall{tool.Intent{CallID: "c9", IdempotencyKey: "k"}})
	if err := json.Unmarshal(raw, &flat); err != nil || flat["call_id"] != "c9" || flat["idempotency_key"] != "k" {
		t.Fatalf("tool_call payload %s", raw)
	}
}
