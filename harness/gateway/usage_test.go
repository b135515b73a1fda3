package gateway

import (
	"bytes"
	"compress/zlib"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtractUsage(t *testing.T) {
	jsonH := http.Header{"Content-Type": {"application/json"}}
	sseH := http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}}
	var deflated bytes.Buffer
	zw := zlib.NewWriter(&deflated)
	_, _ = zw.Write([]byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	_ = zw.Close()
	reported := func(p, c, tot int64) usage {
		return usage{state: UsageReported, prompt: i64(p), completion: i64(c), total: i64(tot)}
	}
	tests := []struct {
		name   string
		status int
		header http.Header
		stream bool
		body   string
		want   usage
	}{
		{"json usage", 200, jsonH, false, `{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, reported(3, 4, 7)},
		{"json details", 200, jsonH, false,
			`{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":{"reasoning_tokens":null}}}`,
			usage{state: UsageReported, prompt: i64(3), completion: i64(4), total: i64(7), cached: i64(1)}},
		{"empty usage object is not a report", 200, jsonH, false, `{"usage":{}}`, unknownUsage()},
		{"usage that is not an object", 200, jsonH, false, `{"usage":12}`, unknownUsage()},
		{"string counts are not counts", 200, jsonH, false, `{"usage":{"prompt_tokens":"3","completion_tokens":4}}`,
			usage{state: UsageReported, completion: i64(4)}},
		{"negative and fractional counts are not counts", 200, jsonH, false, `{"usage":{"prompt_tokens":-3,"completion_tokens":4.5,"total_tokens":7}}`,
			usage{state: UsageReported, total: i64(7)}},
		{"not json", 200, jsonH, false, `<html>`, unknownUsage()},
		{"empty body", 200, jsonH, false, ``, unknownUsage()},
		{"201 counts as success", 201, jsonH, false, `{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, reported(3, 4, 7)},
		{"429 is unknown", 429, jsonH, false, `{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, unknownUsage()},
		{"unsupported encoding is unknown", 200, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"br"}}, false,
			`{"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, unknownUsage()},
		{"deflate", 200, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"deflate"}}, false, deflated.String(), reported(3, 4, 7)},
		{"corrupt gzip is unknown", 200, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, false, "not gzip", unknownUsage()},
		{"sse crlf lines and no space after colon", 200, sseH, true,
			"data:{\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\r\n\r\ndata: [DONE]\r\n\r\n", reported(1, 2, 3)},
		{"sse data split over two lines", 200, sseH, true,
			"data: {\"usage\":\ndata: {\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n", reported(1, 2, 3)},
		{"sse comments, event and id fields are ignored", 200, sseH, true,
			": keep-alive\nevent: chunk\nid: 9\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n", reported(1, 2, 3)},
		{"sse last event without trailing blank line", 200, sseH, true,
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}", reported(1, 2, 3)},
		{"sse later null usage keeps the figure", 200, sseH, true,
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: {\"usage\":null}\n\ndata: {\"id\":\"x\"}\n\n", reported(1, 2, 3)},
		{"sse detected by content type without stream flag", 200, sseH, false,
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n", reported(1, 2, 3)},
		{"stream flag with unlabelled body parses sse", 200, http.Header{}, true,
			"data: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\n", reported(1, 2, 3)},
		{"sse only [DONE]", 200, sseH, true, "data: [DONE]\n\n", unknownUsage()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reportedUsage(tc.status, tc.header, tc.stream, []byte(tc.body))
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(usage{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSEEndedWithDone(t *testing.T) {
	sseH := http.Header{"Content-Type": {"text/event-stream"}}
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   bool
	}{
		{"done last", sseH, "data: {\"a\":1}\n\ndata: [DONE]\n\n", true},
		{"done without trailing blank line", sseH, "data: {\"a\":1}\n\ndata: [DONE]", true},
		{"cut before done", sseH, "data: {\"a\":1}\n\n", false},
		{"done not last", sseH, "data: [DONE]\n\ndata: {\"a\":1}\n\n", false},
		{"done inside a json string", sseH, "data: {\"a\":\"[DONE]\"}\n\n", false},
		{"not an event stream", http.Header{"Content-Type": {"application/json"}}, "data: [DONE]\n\n", false},
		{"compressed", http.Header{"Content-Type": {"text/event-stream"}, "Content-Encoding": {"gzip"}}, "data: [DONE]\n\n", false},
	}
	for _, tc := range tests {
		if got := sseEndedWithDone(tc.header, []byte(tc.body)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseRequestMeta(t *testing.T) {
	tests := []struct {
		body string
		want requestMeta
	}{
		{`{"model":"m1","stream":true}`, requestMeta{model: "m1", stream: true, messages: -1}},
		{`{"model":"m1"}`, requestMeta{model: "m1", messages: -1}},
		{`{"model":7,"stream":"yes"}`, requestMeta{messages: -1}},
		{`{"model":"m1","stream":"yes"}`, requestMeta{model: "m1", messages: -1}},
		{`not json`, requestMeta{messages: -1}},
		{``, requestMeta{messages: -1}},
		{`["model"]`, requestMeta{messages: -1}},
		{`{"messages":[{"role":"user","content":"hi"},{"role":"user","content":"again"}]}`, requestMeta{messages: 2}},
		{`{"messages":[]}`, requestMeta{messages: 0}},
		{`{"messages":null}`, requestMeta{messages: -1}},
		{`{"messages":"hi"}`, requestMeta{messages: -1}},
	}
	for _, tc := range tests {
		if got := parseRequestMeta([]byte(tc.body)); got != tc.want {
			t.Errorf("parseRequestMeta(%q) = %+v, want %+v", tc.body, got, tc.want)
		}
	}
}

func TestSumUsage(t *testing.T) {
	rep := func(p, c int64, cached *int64) Record {
		return Record{UsageState: UsageReported, PromptTokens: i64(p), CompletionTokens: i64(c), TotalTokens: i64(p + c), CachedTokens: cached}
	}
	tests := []struct {
		name string
		recs []Record
		want SessionUsage
	}{
		{"no requests", nil, SessionUsage{SessionID: "s", State: UsageUnknown}},
		{"all reported", []Record{rep(1, 2, i64(1)), rep(3, 4, i64(0))},
			SessionUsage{SessionID: "s", Requests: 2, State: UsageReported, PromptTokens: i64(4), CompletionTokens: i64(6), TotalTokens: i64(10), CachedTokens: i64(1)}},
		{"a missing detail makes that sum unknown", []Record{rep(1, 2, i64(1)), rep(3, 4, nil)},
			SessionUsage{SessionID: "s", Requests: 2, State: UsageReported, PromptTokens: i64(4), CompletionTokens: i64(6), TotalTokens: i64(10)}},
		{"partial", []Record{rep(1, 2, nil), {UsageState: UsageUnknown}}, SessionUsage{SessionID: "s", Requests: 2, State: UsagePartial}},
		{"none reported", []Record{{UsageState: UsageUnknown}}, SessionUsage{SessionID: "s", Requests: 1, State: UsageUnknown}},
		// A model listing carries no usage by the API's definition: counted apart, not an unknown.
		{"a GET without usage is counted apart", []Record{{Method: "GET", Path: "/v1/models", UsageState: UsageUnknown}, rep(1, 2, nil)},
			SessionUsage{SessionID: "s", Requests: 2, NoUsageRequests: 1, State: UsageReported, PromptTokens: i64(1), CompletionTokens: i64(2), TotalTokens: i64(3)}},
		{"only a HEAD", []Record{{Method: "HEAD", UsageState: UsageUnknown}}, SessionUsage{SessionID: "s", Requests: 1, NoUsageRequests: 1, State: UsageUnknown}},
		// A POST without usage is still an unknown, and a GET that reported usage is summed.
		{"a POST without usage stays partial", []Record{{Method: "POST", UsageState: UsageUnknown}, {Method: "GET", UsageState: UsageReported, PromptTokens: i64(5), CompletionTokens: i64(0), TotalTokens: i64(5)}},
			SessionUsage{SessionID: "s", Requests: 2, State: UsagePartial}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, SumUsage("s", tc.recs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
