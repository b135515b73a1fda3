package gateway

import (
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIClientThroughGateway drives the gateway with the official OpenAI
// Go client (which nobody here wrote): what the client reports as usage must
// be what the gateway recorded, for a plain and a streamed completion.
func TestOpenAIClientThroughGateway(t *testing.T) {
	up := newFakeUpstream(t)
	g, _ := startGateway(t, up.srv.URL)
	const session = "run-oa-member-1"
	client := openai.NewClient(
		option.WithBaseURL(g.URL()+"/v1"),
		option.WithAPIKey("sk-test-openai-client"),
		option.WithHeader(DefaultSessionHeader, session),
		option.WithMaxRetries(0),
	)
	params := openai.ChatCompletionNewParams{
		Model:    "json-usage",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
	}
	resp, err := client.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatalf("chat completion: %v", err)
	}

	params.Model = "sse-usage"
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	_ = stream.Close()

	recs := records(t, g, session)
	if len(recs) != 2 {
		t.Fatalf("got %d records, want 2", len(recs))
	}
	for i, u := range []openai.CompletionUsage{resp.Usage, acc.Usage} {
		r := recs[i]
		if r.UsageState != UsageReported || r.PromptTokens == nil || r.CompletionTokens == nil || r.TotalTokens == nil {
			t.Fatalf("record %d = %+v, want reported usage", i, r)
		}
		if *r.PromptTokens != u.PromptTokens || *r.CompletionTokens != u.CompletionTokens || *r.TotalTokens != u.TotalTokens {
			t.Errorf("record %d usage %d/%d/%d, client saw %d/%d/%d", i,
				*r.PromptTokens, *r.CompletionTokens, *r.TotalTokens, u.PromptTokens, u.CompletionTokens, u.TotalTokens)
		}
		if u.PromptTokens != int64(len("hello there")) {
			t.Errorf("client %d saw prompt_tokens %d, want %d", i, u.PromptTokens, len("hello there"))
		}
	}
	if !recs[1].Stream || recs[0].Stream {
		t.Errorf("stream flags = %v, %v; want false, true", recs[0].Stream, recs[1].Stream)
	}
}
