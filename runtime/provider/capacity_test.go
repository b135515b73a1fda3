package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

func startRef(t *testing.T, cfg reference.Config) *reference.Running {
	t.Helper()
	r, err := reference.Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestParallelCapacityIsReadNeverGuessed(t *testing.T) {
	for _, c := range []struct {
		declared int
		want     int
	}{{0, reference.DefaultParallelCapacity}, {3, 3}} {
		r := startRef(t, reference.Config{ParallelCapacity: c.declared})
		client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL()})
		n, err := client.ParallelCapacity(t.Context(), reference.ModelID)
		if err != nil || n != c.want {
			t.Fatalf("capacity %d, %v; want %d", n, err, c.want)
		}
	}
	r := startRef(t, reference.Config{ParallelCapacity: -1})
	client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL()})
	if n, err := client.ParallelCapacity(t.Context(), reference.ModelID); err == nil || !strings.Contains(err.Error(), "declares no max_parallel_requests") {
		t.Fatalf("no declared capacity: %d %v", n, err)
	}
	var httpErr *provider.HTTPError
	if _, err := client.ParallelCapacity(t.Context(), "other-model"); !errors.As(err, &httpErr) || httpErr.Status != 404 {
		t.Fatalf("unknown model: %v", err)
	}
	for _, body := range []string{`{"max_parallel_requests":0}`, `{"max_parallel_requests":1.5}`, `{"max_parallel_requests":"4"}`, `not json`} {
		url, _ := serveBytes(t, 200, "application/json", body, 1<<16)
		client := newClient(t, provider.ClientConfig{BaseURL: url})
		if n, err := client.ParallelCapacity(t.Context(), "m"); err == nil {
			t.Fatalf("%s accepted as capacity %d", body, n)
		}
	}
}

func TestWrongSessionEchoIsRefused(t *testing.T) {
	r := startRef(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: 0, Kind: reference.FaultWrongSession}}})
	client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL(), MaxRetries: -1})
	req := provider.Request{SessionID: "run-1-a", Model: reference.ModelID, Messages: []provider.Message{{Role: "user", Content: "hi"}}}
	resp, err := client.Complete(t.Context(), req)
	if !errors.Is(err, provider.ErrSessionMismatch) || resp == nil || len(resp.Raw) == 0 {
		t.Fatalf("wrong echo: %v (raw kept: %v)", err, resp != nil && len(resp.Raw) > 0)
	}
	if _, err := client.Complete(t.Context(), req); err != nil {
		t.Fatalf("a correct echo is fine: %v", err)
	}
}

func TestSlowReplyPastTheTimeoutFails(t *testing.T) {
	r := startRef(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: 0, Kind: reference.FaultSlow, Delay: time.Hour}}})
	client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL(), Timeout: 200 * time.Millisecond, MaxRetries: -1})
	req := provider.Request{SessionID: "run-1-a", Model: reference.ModelID, Messages: []provider.Message{{Role: "user", Content: "hi"}}}
	if _, err := client.Complete(t.Context(), req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow reply: %v", err)
	}
}

func TestSplitToolArgumentsAreJoined(t *testing.T) {
	r := startRef(t, reference.Config{Faults: []reference.Fault{{Turn: -1, Kind: reference.FaultSplitToolArgs}}})
	client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL()})
	a := reference.Assignment{Task: "double", Package: "double", Files: []string{"double.go", "double_test.go"}}
	req := provider.Request{SessionID: "run-1-a", Model: reference.ModelID, Stream: true,
		Messages: []provider.Message{{Role: "user", Content: reference.FormatAssignment(a)}},
		Tools:    []provider.ToolDef{{Name: "write_file"}}}
	resp, err := client.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 2 || !strings.HasPrefix(resp.Message.ToolCalls[1].Function.Arguments, `{"path":"double_test.go"`) || resp.Usage == nil {
		t.Fatalf("%+v", resp.Message.ToolCalls)
	}
}

func TestHTTP500AfterToolCallIsRetriedAsAModelRequestOnly(t *testing.T) {
	r := startRef(t, reference.Config{Faults: []reference.Fault{{Member: "a", Turn: -1, Kind: reference.FaultHTTP500AfterToolCall}}})
	client := newClient(t, provider.ClientConfig{BaseURL: r.BaseURL(), RetryBaseDelay: time.Millisecond})
	a := reference.Assignment{Task: "double", Package: "double", Files: []string{"double.go"}}
	req := provider.Request{SessionID: "run-1-a", Model: reference.ModelID, Messages: []provider.Message{{Role: "user", Content: reference.FormatAssignment(a)}},
		Tools: []provider.ToolDef{{Name: "write_file"}}}
	first, err := client.Complete(t.Context(), req)
	if err != nil || len(first.Message.ToolCalls) != 1 {
		t.Fatalf("%v %+v", err, first)
	}
	req.Messages = append(req.Messages, first.Message, provider.Message{Role: "tool", ToolCallID: first.Message.ToolCalls[0].ID, Content: "wrote double.go"})
	second, err := client.Complete(t.Context(), req)
	if err != nil || second.Attempts != 2 || second.Message.Content != `{"status":"done","files":["double.go"]}` {
		t.Fatalf("the model request should succeed on its retry: %v %+v", err, second)
	}
	if r.Server().Turns("run-1-a") != 3 {
		t.Fatalf("server saw %d requests, want 3", r.Server().Turns("run-1-a"))
	}
}
