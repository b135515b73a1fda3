package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/runtime/provider"
)

func TestParseCompletionIsStrict(t *testing.T) {
	cases := []struct {
		name, reply string
		ok          bool
	}{
		{"done", `{"status":"done","files":["double.go"]}`, true},
		{"failed", `{"status":"failed","error":"no write access"}`, true},
		{"surrounding whitespace", "\n {\"status\":\"done\",\"files\":[]} \n", true},
		{"prose before", `Sure! {"status":"done","files":[]}`, false},
		{"prose after", `{"status":"done","files":[]} hope this helps`, false},
		{"markdown fence", "```json\n{\"status\":\"done\",\"files\":[]}\n```", false},
		{"extra key", `{"status":"done","files":[],"confidence":0.9}`, false},
		{"unknown status", `{"status":"ok","files":[]}`, false},
		{"failed without error", `{"status":"failed"}`, false},
		{"done with error", `{"status":"done","error":"x"}`, false},
		{"two objects", `{"status":"done"}{"status":"done"}`, false},
		{"malformed", `{"status":"done",`, false},
		{"empty", ``, false},
		{"duplicate key, last value valid", `{"status":"failed","status":"done","files":[]}`, false},
		{"duplicate key inside a nested object", `{"status":"done","files":[],"x":{"a":1,"a":2}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseCompletion(c.reply)
			if c.ok && err != nil {
				t.Fatalf("rejected a valid reply: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrMalformedReply) {
				t.Fatalf("accepted or misclassified %q: %v", c.reply, err)
			}
		})
	}
}

func TestTeamValidate(t *testing.T) {
	m := func(id, dir string) MemberSpec { return MemberSpec{ID: id, Dir: dir} }
	cases := []struct {
		name string
		team Team
		ok   bool
	}{
		{"valid", Team{RunID: "r", Members: []MemberSpec{m("a", "/x"), m("b", "/y")}}, true},
		{"no run id", Team{Members: []MemberSpec{m("a", "/x")}}, false},
		{"no members", Team{RunID: "r"}, false},
		{"duplicate member", Team{RunID: "r", Members: []MemberSpec{m("a", "/x"), m("a", "/y")}}, false},
		{"bad member id", Team{RunID: "r", Members: []MemberSpec{m("A B", "/x")}}, false},
		{"shared explicit session", Team{RunID: "r", Members: []MemberSpec{{ID: "a", Dir: "/x", SessionID: "s"}, {ID: "b", Dir: "/y", SessionID: "s"}}}, false},
		{"explicit session colliding with derived", Team{RunID: "r", Members: []MemberSpec{{ID: "a", Dir: "/x", SessionID: "r-b"}, m("b", "/y")}}, false},
		{"no directory", Team{RunID: "r", Members: []MemberSpec{m("a", "")}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.team.Validate(); (err == nil) != c.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.ok)
			}
		})
	}
}

func TestDecodeExactRequiresEveryNonOptionalKey(t *testing.T) {
	type turn struct {
		Content   string  `json:"content"`
		Done      bool    `json:"done"`
		HandoffTo *string `json:"handoff_to"`
		Note      string  `json:"note,omitempty"`
	}
	var v turn
	if err := DecodeExact([]byte(`{"content":"x","done":false,"handoff_to":null}`), &v); err != nil {
		t.Fatalf("null counts as present: %v", err)
	}
	if err := DecodeExact([]byte(`{"content":"x","done":false}`), &v); !errors.Is(err, ErrMalformedReply) || !strings.Contains(err.Error(), "handoff_to") {
		t.Fatalf("missing handoff_to: %v", err)
	}
	if err := DecodeExact([]byte(`{"content":"x","handoff_to":null}`), &v); !errors.Is(err, ErrMalformedReply) || !strings.Contains(err.Error(), "done") {
		t.Fatalf("missing done: %v", err)
	}
}

func TestContractLineIsOneParsableLine(t *testing.T) {
	l := ContractLine{Contract: ContractRouter, Formation: "group_chat", MemberID: "r", Candidates: []string{"a", "<b>"}, Round: 2}
	s := l.Format()
	if strings.Contains(s, "\n") || !strings.HasPrefix(s, ContractPrefix) || !strings.Contains(s, `"<b>"`) {
		t.Fatalf("contract line %q", s)
	}
	var back ContractLine
	if err := DecodeExact([]byte(strings.TrimPrefix(s, ContractPrefix)), &back); err != nil || back.Round != 2 || back.Candidates[1] != "<b>" {
		t.Fatalf("round trip %+v %v", back, err)
	}
}

func TestCompletionContractQualityScore(t *testing.T) {
	scored := Completion("adaptive", "a", true)
	plain := Completion("sequential", "a", false)
	cases := []struct {
		c     Contract
		reply string
		ok    bool
	}{
		{scored, `{"status":"done","files":[],"quality_score":0.5}`, true},
		{scored, `{"status":"done","files":[],"quality_score":0}`, true},
		{scored, `{"status":"done","files":[]}`, false},
		{scored, `{"status":"done","files":[],"quality_score":1.01}`, false},
		{scored, `{"status":"done","files":[],"quality_score":-0.1}`, false},
		{plain, `{"status":"done","files":[],"quality_score":0.5}`, false},
		{plain, `{"status":"failed","error":"x"}`, false},
	}
	for _, c := range cases {
		err := c.c.Check(c.reply)
		if (err == nil) != c.ok {
			t.Errorf("%s %q: %v", c.c.Line.Contract, c.reply, err)
		}
	}
	if err := plain.Check(`{"status":"failed","error":"disk full"}`); errors.Is(err, ErrMalformedReply) {
		t.Fatal("a reported failure is not a contract violation")
	}
}

func TestAccumulateAddsUpInvocations(t *testing.T) {
	var r MemberResult
	r.Accumulate(MemberResult{MemberID: "a", Success: false, Error: "x", ToolCalls: 1, Turns: 1, ToolsUsed: []string{"write_file"},
		Usage: provider.UsageTotal{Requests: 2, Unknown: 1, TotalTokens: 5}})
	r.Accumulate(MemberResult{MemberID: "a", Success: true, Output: "ok", ToolCalls: 2, Turns: 1, ToolsUsed: []string{"read_file", "write_file"},
		Usage: provider.UsageTotal{Requests: 1, TotalTokens: 7}})
	if !r.Success || r.Error != "" || r.Output != "ok" || r.ToolCalls != 3 || r.Turns != 2 || r.Usage.Requests != 3 || r.Usage.Unknown != 1 ||
		r.Usage.TotalTokens != 12 || strings.Join(r.ToolsUsed, ",") != "write_file,read_file" {
		t.Fatalf("%+v", r)
	}
	if r.Usage.Known() {
		t.Fatal("an unknown response made the accumulated usage known")
	}
}

// scripted answers every chat request with the given body (a server shape the reference provider
// never sends: this test is about the member loop, not the provider).
func scripted(t *testing.T, body string) *provider.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := provider.NewClient(provider.ClientConfig{BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type recordSink struct {
	mu     sync.Mutex
	events []Event
}

func (s *recordSink) Emit(ctx context.Context, ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	return nil
}

func (s *recordSink) PutArtifact(ctx context.Context, name, mediaType string, data []byte) (string, error) {
	return "d-" + name, nil
}

func TestInvalidToolArgumentsFailTheMemberWithTheRawText(t *testing.T) {
	for name, args := range map[string]string{"truncated": `{\"path\":\"a.go\",\"content\":\"x`, "not an object": `[1,2]`, "empty": ``} {
		t.Run(name, func(t *testing.T) {
			body := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
				`"tool_calls":[{"id":"c1","type":"function","function":{"name":"write_file","arguments":"` + args + `"}}]},"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
			sink := &recordSink{}
			e, err := NewEngine(EngineConfig{Provider: scripted(t, body), Model: "m", Sink: sink})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			team := Team{RunID: "r", Formation: "sequential", Members: []MemberSpec{{ID: "a", Dir: dir, AllowedTools: []string{"write_file"}}}}
			res := e.RunMember(context.Background(), team, team.Members[0], nil)
			if res.Success || !strings.Contains(res.Error, ErrInvalidToolArguments.Error()) || res.ToolCalls != 0 {
				t.Fatalf("%+v", res)
			}
			var raw string
			for _, ev := range sink.events {
				if ev.Type == "tool_call" {
					t.Fatal("a call with invalid arguments reached the boundary")
				}
				if ev.Type == "warning" {
					var p map[string]any
					_ = json.Unmarshal(ev.Payload, &p)
					raw, _ = p["raw_arguments"].(string)
				}
			}
			want := strings.ReplaceAll(args, `\"`, `"`)
			if raw != want {
				t.Fatalf("raw arguments kept as %q, want %q", raw, want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatal("something was written")
			}
		})
	}
}

func TestDecodeExactRefusesDuplicateKeysAtAnyDepth(t *testing.T) {
	var v struct {
		Verdict  string `json:"verdict"`
		Feedback string `json:"feedback"`
	}
	for _, reply := range []string{
		`{"verdict":"needs_work","verdict":"satisfied","feedback":"x"}`,
		`{"verdict":"satisfied","feedback":"x","feedback":"y"}`,
	} {
		if err := DecodeExact([]byte(reply), &v); !errors.Is(err, ErrMalformedReply) || !strings.Contains(err.Error(), "more than once") {
			t.Fatalf("%s: %v, want a duplicate-key refusal", reply, err)
		}
	}
	if err := DecodeExact([]byte(`{"verdict":"satisfied","feedback":"x"}`), &v); err != nil {
		t.Fatal(err)
	}
}
