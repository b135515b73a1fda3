package reference_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// These tests build contract lines by hand (the runtime's ContractLine is tested against this
// server by the formation tests): the server keeps its own reading of the line.

func contractLine(fields string) string { return reference.ContractPrefix + "{" + fields + "}" }

const readFileToolJSON = `{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}}`

func content(t *testing.T, raw []byte) string {
	t.Helper()
	c := decodeCompletion(t, raw)
	if c.Choices[0].Message.Content == nil || len(c.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("want a content reply, got %s", raw)
	}
	return *c.Choices[0].Message.Content
}

func TestStructuredContractReplies(t *testing.T) {
	assign := reference.FormatAssignment(doubleAssignment())
	cases := []struct {
		name, text, tools, want string
	}{
		{"completion without assignment files", contractLine(`"contract":"completion","member_id":"a"`), "", `{"status":"done","files":[]}`},
		{"completion with quality score", contractLine(`"contract":"completion","quality_score":true`), "", ""},
		{"judge picks the first candidate", contractLine(`"contract":"judge_verdict","candidates":["b","a"]`), "",
			`{"selected_member_id":"b","verdict":"b's contributions come first in the debate and are complete"}`},
		{"ensemble judge picks the majority", contractLine(`"contract":"ensemble_judge","candidates":["a","b","c"],"vote_keys":["x","y","y"]`), "",
			`{"selected_member_id":"b"}`},
		{"synthesis", contractLine(`"contract":"synthesis","candidates":["a","b"]`), "", `{"answer":"synthesis of a, b"}`},
		{"router round robin", contractLine(`"contract":"router","candidates":["a","b","c"],"round":5`), "", `{"speaker_id":"b"}`},
		{"handoff to the next member", contractLine(`"contract":"speaking_turn","formation":"handoff","member_id":"a","candidates":["a","b"],"round":1,"may_hand_off":true`), "",
			`{"content":"a, turn 1: no further changes","done":false,"handoff_to":"b"}`},
		{"the last member finishes the handoff", contractLine(`"contract":"speaking_turn","formation":"handoff","member_id":"b","candidates":["a","b"],"round":2,"may_hand_off":true`), "",
			`{"content":"b, turn 2: no further changes","done":true,"handoff_to":null}`},
		{"group chat not done before every member spoke", contractLine(`"contract":"speaking_turn","formation":"group_chat","member_id":"a","candidates":["a","b"],"round":1`), "",
			`{"content":"a, turn 1: no further changes","done":false,"handoff_to":null}`},
		{"group chat done", contractLine(`"contract":"speaking_turn","formation":"group_chat","member_id":"b","candidates":["a","b"],"round":2`), "",
			`{"content":"b, turn 2: no further changes","done":true,"handoff_to":null}`},
		{"debaters are never done", contractLine(`"contract":"speaking_turn","formation":"debate","member_id":"b","candidates":["a","b"],"round":9`), "",
			`{"content":"b, turn 9: no further changes","done":false,"handoff_to":null}`},
		{"consensus key from the assignment", assign + "\n" + contractLine(`"contract":"consensus_proposal","member_id":"a","round":2`), "",
			`{"consensus_key":"double/go/double.go,double_test.go","proposal":"a proposes double/go/double.go,double_test.go"}`},
		{"critic without files to read", contractLine(`"contract":"critic_verdict","round":1`), readFileToolJSON,
			`{"verdict":"satisfied","feedback":"iteration 1: read 0 file(s) (); nothing further to change"}`},
		{"unknown contract", contractLine(`"contract":"poem"`), "", `assay-reference-1 does not know the contract "poem"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := startReference(t, reference.Config{})
			_, raw := post(t, run, "run-1-a", userTurn(c.text, c.tools))
			got := content(t, raw)
			if c.want == "" {
				if got != `{"status":"done","files":[],"quality_score":0.9}` {
					t.Fatalf("got %s", got)
				}
				return
			}
			if got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestWritingContractsWriteFirst(t *testing.T) {
	assign := reference.FormatAssignment(doubleAssignment())
	for _, line := range []string{
		contractLine(`"contract":"ensemble_proposal","member_id":"a"`),
		contractLine(`"contract":"speaking_turn","member_id":"a","candidates":["a","b"],"round":1`),
		contractLine(`"contract":"consensus_proposal","member_id":"a","round":1`),
	} {
		run := startReference(t, reference.Config{})
		_, raw := post(t, run, "run-1-a", userTurn(assign+"\n"+line, writeFileToolJSON))
		if c := decodeCompletion(t, raw); len(c.Choices[0].Message.ToolCalls) != 2 {
			t.Fatalf("%s: want the two write_file calls first, got %s", line, raw)
		}
	}
	// A second speaking turn does not write again.
	run := startReference(t, reference.Config{})
	_, raw := post(t, run, "run-1-a", userTurn(assign+"\n"+contractLine(`"contract":"speaking_turn","member_id":"a","candidates":["a","b"],"round":3,"prior_turns":1`), writeFileToolJSON))
	if got := content(t, raw); !strings.Contains(got, `"done":true`) {
		t.Fatalf("got %s", got)
	}
}

func TestCriticReadsThenJudges(t *testing.T) {
	a := doubleAssignment()
	a.SatisfiedAt = 2
	line := func(round int) string {
		return reference.FormatAssignment(a) + "\n" + contractLine(fmt.Sprintf(`"contract":"critic_verdict","round":%d,"files":["double.go"]`, round))
	}
	run := startReference(t, reference.Config{})
	_, raw := post(t, run, "run-1-critic", userTurn(line(1), readFileToolJSON))
	c := decodeCompletion(t, raw)
	if len(c.Choices[0].Message.ToolCalls) != 1 || c.Choices[0].Message.ToolCalls[0].Function.Name != "read_file" ||
		c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"path":"double.go"}` {
		t.Fatalf("want one read_file call, got %s", raw)
	}
	withResult := func(round int, result string) string {
		return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":%s}],"tools":[%s]}`,
			reference.ModelID, jsonString(line(round)), jsonString(result), readFileToolJSON)
	}
	for _, c := range []struct {
		round  int
		result string
		want   string
	}{
		{1, "package double", `{"verdict":"needs_work","feedback":"iteration 1: revise once more and state the files again; the reference critic is satisfied from iteration 2"}`},
		{2, "package double", `{"verdict":"satisfied","feedback":"iteration 2: read 1 file(s) (double.go); nothing further to change"}`},
		{2, "error: no such file", `{"verdict":"needs_work","feedback":"could not read a file to review: error: no such file"}`},
	} {
		_, raw := post(t, run, "run-1-critic", withResult(c.round, c.result))
		if got := content(t, raw); got != c.want {
			t.Fatalf("round %d: got %s want %s", c.round, got, c.want)
		}
	}
}

func TestNewFaults(t *testing.T) {
	body := userTurn(contractLine(`"contract":"synthesis","candidates":["a"]`), "")
	t.Run("malformed_json cuts the structured reply", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: 0, Kind: reference.FaultMalformedJSON}}})
		_, raw := post(t, run, "run-1-a", body)
		if got := content(t, raw); got != `{"answer":"sy` || json.Valid([]byte(got)) {
			t.Fatalf("got %q", got)
		}
		_, raw = post(t, run, "run-1-a", body)
		if got := content(t, raw); !json.Valid([]byte(got)) {
			t.Fatalf("turn 1 unaffected, got %q", got)
		}
	})
	t.Run("replace_reply", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: -1, Kind: reference.FaultReplaceReply, Reply: "prose {\"answer\":\"x\"}"}}})
		_, raw := post(t, run, "run-1-a", body)
		if got := content(t, raw); got != `prose {"answer":"x"}` {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("wrong_session echo", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: 1, Kind: reference.FaultWrongSession}}})
		for turn, want := range []string{"run-1-a", "run-1-a-other", "run-1-a"} {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, run.BaseURL()+"/chat/completions", strings.NewReader(body))
			req.Header.Set("X-Session-Id", "run-1-a")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Session-Id"); got != want {
				t.Fatalf("turn %d echo %q, want %q", turn, got, want)
			}
		}
	})
	t.Run("http_500_after_tool_call", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: -1, Kind: reference.FaultHTTP500AfterToolCall}}})
		write := userTurn(reference.FormatAssignment(doubleAssignment()), writeFileToolJSON)
		for i, want := range []int{200, 500, 200, 500, 200} {
			status, raw := post(t, run, "run-1-a", write)
			if status != want {
				t.Fatalf("request %d: status %d want %d: %s", i, status, want, raw)
			}
		}
		// A session whose replies carry no tool calls never sees it.
		for i := 0; i < 3; i++ {
			if status, _ := post(t, run, "run-2-a", body); status != 200 {
				t.Fatalf("content-only session got %d", status)
			}
		}
	})
	t.Run("slow reply is abandoned by a client that times out", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: 0, Kind: reference.FaultSlow, Delay: time.Hour}}})
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, run.BaseURL()+"/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Session-Id", "run-1-a")
		_, err := http.DefaultClient.Do(req)
		if err == nil || ctx.Err() == nil {
			t.Fatalf("want a client timeout, got %v", err)
		}
		if status, _ := post(t, run, "run-1-a", body); status != 200 {
			t.Fatal("the next turn should answer at once")
		}
	})
	t.Run("split_tool_args interleaves tiny fragments", func(t *testing.T) {
		run := startReference(t, reference.Config{Faults: []reference.Fault{{Turn: -1, Kind: reference.FaultSplitToolArgs}}})
		streamed := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":%s}],"tools":[%s]}`,
			reference.ModelID, jsonString(reference.FormatAssignment(doubleAssignment())), writeFileToolJSON)
		_, raw := post(t, run, "run-1-a", streamed)
		var order []int
		args := map[int]string{}
		for _, ev := range sseEvents(t, raw) {
			if ev == "[DONE]" {
				continue
			}
			var ch struct {
				Choices []struct {
					Delta struct {
						ToolCalls []struct {
							Index    int `json:"index"`
							Function struct {
								Arguments string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(ev), &ch); err != nil {
				t.Fatal(err)
			}
			for _, c := range ch.Choices {
				for _, tc := range c.Delta.ToolCalls {
					if tc.Function.Arguments == "" {
						continue
					}
					if len(tc.Function.Arguments) > 4 {
						t.Fatalf("fragment %q longer than the split size", tc.Function.Arguments)
					}
					order = append(order, tc.Index)
					args[tc.Index] += tc.Function.Arguments
				}
			}
		}
		if len(order) < 4 || order[0] != 0 || order[1] != 1 {
			t.Fatalf("fragments not interleaved: %v", order[:min(len(order), 8)])
		}
		for i := 0; i < 2; i++ {
			if !json.Valid([]byte(args[i])) {
				t.Fatalf("joined arguments of call %d are not JSON: %q", i, args[i])
			}
		}
	})
}

func TestModelsDeclareParallelCapacity(t *testing.T) {
	for _, c := range []struct {
		cfg  int
		want string
	}{{0, `"max_parallel_requests":4`}, {2, `"max_parallel_requests":2`}, {-1, ""}} {
		run := startReference(t, reference.Config{ParallelCapacity: c.cfg})
		resp, err := http.Get(run.BaseURL() + "/models/" + reference.ModelID)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c.want == "" && strings.Contains(string(b), "max_parallel_requests") || c.want != "" && !strings.Contains(string(b), c.want) {
			t.Fatalf("capacity %d: %s", c.cfg, b)
		}
	}
}

func TestParseFault(t *testing.T) {
	good := map[string]reference.Fault{
		"exec-1:0:drop_usage":              {Member: "exec-1", Turn: 0, Kind: reference.FaultDropUsage},
		":-1:http_500":                     {Turn: -1, Kind: reference.FaultHTTP500},
		"critic:1:replace_reply:{\"a\":1}": {Member: "critic", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"a":1}`},
		"a:2:slow:150ms":                   {Member: "a", Turn: 2, Kind: reference.FaultSlow, Delay: 150 * time.Millisecond},
		"a:2:slow":                         {Member: "a", Turn: 2, Kind: reference.FaultSlow},
	}
	for spec, want := range good {
		got, err := reference.ParseFault(spec)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", spec, got, err)
		}
	}
	for _, spec := range []string{"a:0", "a:x:drop_usage", "a:-2:drop_usage", "a:0:explode", "a:0:replace_reply", "a:0:slow:soon", "a:0:drop_usage:arg"} {
		if _, err := reference.ParseFault(spec); err == nil {
			t.Errorf("%s accepted", spec)
		}
	}
}
