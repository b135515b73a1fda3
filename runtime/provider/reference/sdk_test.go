package reference_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// These tests drive the reference provider with the official OpenAI Go SDK,
// a client nobody here wrote, over a real listener on 127.0.0.1.

var callIDPattern = regexp.MustCompile(`^call_[0-9a-f]{12}$`)

// sentMessage is what the test itself sent or received, for computing the
// documented usage rule independently of the server.
type sentMessage struct {
	content    string
	calls      []sentCall
	toolCallID string
}

type sentCall struct{ name, arguments string }

func ceil4(n int) int64 { return int64(n+3) / 4 }

// ruleUsage is the package documentation's usage rule, written again here.
func ruleUsage(sent []sentMessage, replyContent string, replyCalls []sentCall) (prompt, completion, total int64) {
	for _, m := range sent {
		n := len(m.content) + len(m.toolCallID)
		for _, c := range m.calls {
			n += len(c.name) + len(c.arguments)
		}
		prompt += 4 + ceil4(n)
	}
	m := len(replyContent)
	for _, c := range replyCalls {
		m += len(c.name) + len(c.arguments)
	}
	completion = ceil4(m)
	if completion < 1 {
		completion = 1
	}
	return prompt, completion, prompt + completion
}

func startReference(t *testing.T, cfg reference.Config) *reference.Running {
	t.Helper()
	run, err := reference.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := run.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return run
}

func sdkClient(run *reference.Running, session string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(run.BaseURL()),
		option.WithAPIKey("reference-test-key"),
		option.WithMaxRetries(0),
		option.WithHeader("X-Session-Id", session),
	)
}

func writeFileTool() openai.ChatCompletionToolUnionParam {
	return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "write_file",
		Description: openai.String("Write a file in the member's directory."),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"path":    map[string]any{"type": "string"},
				"content": map[string]any{"type": "string"},
			},
			"required": []string{"path", "content"},
		},
	})
}

func doubleAssignment() reference.Assignment {
	return reference.Assignment{Task: "double", Language: "go", Package: "double", Files: []string{"double.go", "double_test.go"}}
}

const systemPrompt = "You are the executor. Use write_file for every file."

func assignmentPrompt(a reference.Assignment) string {
	return "Carry out this assignment.\n" + reference.FormatAssignment(a) + "\nReply when done."
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func decodeWriteFile(t *testing.T, arguments string) writeFileArgs {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(arguments))
	dec.DisallowUnknownFields()
	var a writeFileArgs
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("write_file arguments %q do not decode: %v", arguments, err)
	}
	return a
}

const wantDoubleGo = "package double\n\n// Double returns 2*x.\nfunc Double[T int | float64](x T) T { return 2 * x }\n"

// checkDoubleCalls asserts the write_file calls of a reply to
// doubleAssignment and returns them as sentCalls.
func checkDoubleCalls(t *testing.T, calls []openai.ChatCompletionMessageToolCallUnion) []sentCall {
	t.Helper()
	if len(calls) != 2 {
		t.Fatalf("got %d tool calls, want 2", len(calls))
	}
	var out []sentCall
	seen := map[string]bool{}
	for i, c := range calls {
		if c.Type != "function" || c.Function.Name != "write_file" {
			t.Errorf("call %d: type %q name %q, want function write_file", i, c.Type, c.Function.Name)
		}
		if !callIDPattern.MatchString(c.ID) || seen[c.ID] {
			t.Errorf("call %d: id %q is not a fresh call_<12 hex>", i, c.ID)
		}
		seen[c.ID] = true
		args := decodeWriteFile(t, c.Function.Arguments)
		if args.Path != doubleAssignment().Files[i] {
			t.Errorf("call %d writes %q, want %q", i, args.Path, doubleAssignment().Files[i])
		}
		out = append(out, sentCall{name: c.Function.Name, arguments: c.Function.Arguments})
	}
	if got := decodeWriteFile(t, calls[0].Function.Arguments).Content; got != wantDoubleGo {
		t.Errorf("double.go content:\n%s\nwant:\n%s", got, wantDoubleGo)
	}
	test := decodeWriteFile(t, calls[1].Function.Arguments).Content
	for _, want := range []string{"package double\n", "func TestDouble(t *testing.T)", "Double(tc.in)", "in, want int", "in, want float64"} {
		if !strings.Contains(test, want) {
			t.Errorf("double_test.go lacks %q:\n%s", want, test)
		}
	}
	if strings.Contains(test, "func Double") {
		t.Errorf("double_test.go defines Double although double.go does:\n%s", test)
	}
	return out
}

func TestSDKNonStreamingToolCallsThenDone(t *testing.T) {
	run := startReference(t, reference.Config{})
	client := sdkClient(run, "run-1-executor")
	ctx := t.Context()

	params := openai.ChatCompletionNewParams{
		Model: reference.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(systemPrompt),
			openai.UserMessage(assignmentPrompt(doubleAssignment())),
		},
		Tools: []openai.ChatCompletionToolUnionParam{writeFileTool()},
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	if resp.Model != reference.ModelID || resp.Created != reference.Created || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("model %q created %d id %q", resp.Model, resp.Created, resp.ID)
	}
	if len(resp.Choices) != 1 || resp.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("choices %+v, want one with finish_reason tool_calls", resp.Choices)
	}
	msg := resp.Choices[0].Message
	if msg.Content != "" {
		t.Errorf("content %q next to tool calls, want none", msg.Content)
	}
	calls := checkDoubleCalls(t, msg.ToolCalls)

	sent := []sentMessage{{content: systemPrompt}, {content: assignmentPrompt(doubleAssignment())}}
	p, c, tot := ruleUsage(sent, "", calls)
	if resp.Usage.PromptTokens != p || resp.Usage.CompletionTokens != c || resp.Usage.TotalTokens != tot {
		t.Errorf("usage %d/%d/%d, want rule %d/%d/%d", resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens, p, c, tot)
	}
	if !resp.Usage.PromptTokensDetails.JSON.CachedTokens.Valid() || resp.Usage.PromptTokensDetails.CachedTokens != 0 ||
		!resp.Usage.CompletionTokensDetails.JSON.ReasoningTokens.Valid() || resp.Usage.CompletionTokensDetails.ReasoningTokens != 0 {
		t.Errorf("usage details %s, want cached_tokens 0 and reasoning_tokens 0 present", resp.Usage.RawJSON())
	}

	// Second turn: the tool results come back; the reply reports done.
	params.Messages = append(params.Messages, msg.ToParam())
	sent = append(sent, sentMessage{calls: calls})
	for _, call := range msg.ToolCalls {
		result := "wrote " + decodeWriteFile(t, call.Function.Arguments).Path
		params.Messages = append(params.Messages, openai.ToolMessage(result, call.ID))
		sent = append(sent, sentMessage{content: result, toolCallID: call.ID})
	}
	done, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	const wantDone = `{"status":"done","files":["double.go","double_test.go"]}`
	if got := done.Choices[0].Message.Content; got != wantDone || done.Choices[0].FinishReason != "stop" {
		t.Errorf("second reply %q finish %q, want %q stop", got, done.Choices[0].FinishReason, wantDone)
	}
	p, c, tot = ruleUsage(sent, wantDone, nil)
	if done.Usage.PromptTokens != p || done.Usage.CompletionTokens != c || done.Usage.TotalTokens != tot {
		t.Errorf("second usage %d/%d/%d, want rule %d/%d/%d", done.Usage.PromptTokens, done.Usage.CompletionTokens, done.Usage.TotalTokens, p, c, tot)
	}
	if got := run.Server().Turns("run-1-executor"); got != 2 {
		t.Errorf("server counted %d turns for the session, want 2", got)
	}
}

func TestSDKStreamingAccumulates(t *testing.T) {
	run := startReference(t, reference.Config{})
	client := sdkClient(run, "run-2-executor")
	ctx := t.Context()
	params := openai.ChatCompletionNewParams{
		Model: reference.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(systemPrompt),
			openai.UserMessage(assignmentPrompt(doubleAssignment())),
		},
		Tools:         []openai.ChatCompletionToolUnionParam{writeFileTool()},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var (
		acc           openai.ChatCompletionAccumulator
		chunks        int
		partialArgs   bool
		usageChunkOK  bool
		finishedCalls []openai.FinishedChatCompletionToolCall
	)
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if !acc.AddChunk(ch) {
			t.Fatalf("accumulator rejected chunk %d: %s", chunks, ch.RawJSON())
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finishedCalls = append(finishedCalls, tc)
		}
		for _, choice := range ch.Choices {
			for _, tc := range choice.Delta.ToolCalls {
				if a := tc.Function.Arguments; a != "" && !json.Valid([]byte(a)) {
					partialArgs = true
				}
			}
		}
		if len(ch.Choices) == 0 && ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
			usageChunkOK = true
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if err := stream.Close(); err != nil {
		t.Fatalf("close stream: %v", err)
	}
	if !partialArgs {
		t.Errorf("no chunk carried partial tool-call arguments; the stream does not exercise joining")
	}
	if !usageChunkOK {
		t.Errorf("no final chunk with empty choices carried usage")
	}
	if len(finishedCalls) != 2 {
		t.Errorf("accumulator finished %d tool calls, want 2", len(finishedCalls))
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("accumulated choices %+v", acc.Choices)
	}
	calls := checkDoubleCalls(t, acc.Choices[0].Message.ToolCalls)
	p, c, tot := ruleUsage([]sentMessage{{content: systemPrompt}, {content: assignmentPrompt(doubleAssignment())}}, "", calls)
	if acc.Usage.PromptTokens != p || acc.Usage.CompletionTokens != c || acc.Usage.TotalTokens != tot {
		t.Errorf("accumulated usage %d/%d/%d, want rule %d/%d/%d", acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.TotalTokens, p, c, tot)
	}

	// The same request, same session, same turn, on a fresh server, not
	// streamed, carries the identical tool calls (ids included).
	other := startReference(t, reference.Config{})
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	twin := sdkClient(other, "run-2-executor")
	resp, err := twin.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatalf("non-streaming twin: %v", err)
	}
	type call struct{ ID, Name, Args string }
	flatten := func(in []openai.ChatCompletionMessageToolCallUnion) []call {
		var out []call
		for _, c := range in {
			out = append(out, call{c.ID, c.Function.Name, c.Function.Arguments})
		}
		return out
	}
	if diff := cmp.Diff(flatten(resp.Choices[0].Message.ToolCalls), flatten(acc.Choices[0].Message.ToolCalls)); diff != "" {
		t.Errorf("streamed tool calls differ from non-streamed (-plain +streamed):\n%s", diff)
	}
}

func TestSDKStreamingContentReply(t *testing.T) {
	run := startReference(t, reference.Config{})
	client := sdkClient(run, "s")
	stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
		Model:         reference.ModelID,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	contentChunks := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			contentChunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != reference.NoAssignmentReply {
		t.Errorf("content %q, want %q", got, reference.NoAssignmentReply)
	}
	if contentChunks < 2 {
		t.Errorf("content came in %d chunks, want it split over several", contentChunks)
	}
	p, c, tot := ruleUsage([]sentMessage{{content: "hello"}}, reference.NoAssignmentReply, nil)
	if acc.Usage.PromptTokens != p || acc.Usage.CompletionTokens != c || acc.Usage.TotalTokens != tot {
		t.Errorf("usage %d/%d/%d, want rule %d/%d/%d", acc.Usage.PromptTokens, acc.Usage.CompletionTokens, acc.Usage.TotalTokens, p, c, tot)
	}
}

func TestSDKModels(t *testing.T) {
	run := startReference(t, reference.Config{})
	client := sdkClient(run, "s")
	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatalf("list models: %v", err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{reference.ModelID}, ids); diff != "" {
		t.Errorf("model ids (-want +got):\n%s", diff)
	}
	m, err := client.Models.Get(t.Context(), reference.ModelID)
	if err != nil || m.ID != reference.ModelID {
		t.Errorf("get model: %+v, %v", m, err)
	}
	_, err = client.Models.Get(t.Context(), "gpt-4o")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("get unknown model: %v, want a 404 openai.Error", err)
	}
}

func TestSDKUnknownModelIs404(t *testing.T) {
	run := startReference(t, reference.Config{})
	client := sdkClient(run, "s")
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err %v, want *openai.Error", err)
	}
	if apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
		t.Errorf("status %d code %q type %q, want 404 model_not_found invalid_request_error", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	}
}

func TestSDKSeesScriptedHTTP500(t *testing.T) {
	run := startReference(t, reference.Config{Faults: []reference.Fault{{Member: "executor", Turn: 0, Kind: reference.FaultHTTP500}}})
	client := sdkClient(run, "run-3-executor")
	params := openai.ChatCompletionNewParams{
		Model:    reference.ModelID,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
	_, err := client.Chat.Completions.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || apiErr.Type != "server_error" {
		t.Fatalf("turn 0: %v, want a 500 server_error", err)
	}
	if _, err := client.Chat.Completions.New(context.Background(), params); err != nil {
		t.Fatalf("turn 1 should succeed: %v", err)
	}
}
