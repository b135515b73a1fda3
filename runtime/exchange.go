package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
)

// recordExchange stores the request and raw response bytes as artifacts and emits provider_exchange.
func (e *Engine) recordExchange(ctx context.Context, memberID, session string, seq int, resp *provider.Response, callErr error) error {
	p := event.ProviderExchange{Seq: seq, Model: e.model, Stream: e.stream}
	if callErr != nil {
		p.Error = callErr.Error()
	}
	if resp != nil {
		p.Status, p.RequestSHA256, p.FinishReason, p.Usage = resp.Status, resp.RequestSHA256, resp.FinishReason, resp.Usage
		p.ToolCalls, p.Attempts = len(resp.Message.ToolCalls), resp.Attempts
		p.LatencyMS = float64(resp.Latency.Microseconds()) / 1000
		if resp.Model != "" {
			p.Model = resp.Model
		}
		if len(resp.RequestBody) > 0 {
			d, err := e.sink.PutArtifact(ctx, fmt.Sprintf("provider/%s/%d/request.json", session, seq), "application/json", resp.RequestBody)
			if err != nil {
				return fmt.Errorf("store request %d artifact: %w", seq, err)
			}
			p.RequestArtifact = d
		}
		mediaType := "application/json"
		if e.stream {
			mediaType = "text/event-stream"
		}
		d, err := e.sink.PutArtifact(ctx, fmt.Sprintf("provider/%s/%d/response", session, seq), mediaType, resp.Raw)
		if err != nil {
			return fmt.Errorf("store response %d artifact: %w", seq, err)
		}
		p.ResponseArtifact, p.ResponseSHA256 = d, d
		if callErr == nil {
			parsed, err := json.Marshal(canonicalReply(resp))
			if err != nil {
				return fmt.Errorf("encode parsed response %d: %w", seq, err)
			}
			d, err := e.sink.PutArtifact(ctx, fmt.Sprintf("provider/%s/%d/message.json", session, seq), "application/json", parsed)
			if err != nil {
				return fmt.Errorf("store parsed response %d artifact: %w", seq, err)
			}
			p.MessageArtifact = d
		}
	}
	if err := e.Emit(ctx, memberID, session, p); err != nil {
		return fmt.Errorf("record provider_exchange %d: %w", seq, err)
	}
	return nil
}

// parsedReply is the canonical form of a parsed response: what the runtime understood the wire
// to say (streamed fragments joined, arguments as received), with fixed key order.
type parsedReply struct {
	Role         string          `json:"role"`
	Content      string          `json:"content"`
	ToolCalls    []parsedCall    `json:"tool_calls"`
	FinishReason string          `json:"finish_reason"`
	Model        string          `json:"model"`
	Usage        *provider.Usage `json:"usage"`
}

type parsedCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func canonicalReply(resp *provider.Response) parsedReply {
	r := parsedReply{Role: resp.Message.Role, Content: resp.Message.Content, ToolCalls: []parsedCall{},
		FinishReason: resp.FinishReason, Model: resp.Model, Usage: resp.Usage}
	for _, tc := range resp.Message.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, parsedCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return r
}
