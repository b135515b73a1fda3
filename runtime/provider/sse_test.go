package provider

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parseAll feeds pieces to a fresh parser and returns the dispatched data
// payloads, stopping at "[DONE]" as the client does.
func parseAll(t *testing.T, pieces ...string) []string {
	t.Helper()
	var p sseParser
	var got []string
	for _, piece := range pieces {
		stop, err := p.feed([]byte(piece), func(data []byte) (bool, error) {
			got = append(got, string(data))
			return string(data) == "[DONE]", nil
		})
		if err != nil {
			t.Fatalf("feed: %v", err)
		}
		if stop {
			break
		}
	}
	return got
}

func TestSSEParserEvents(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []string
	}{
		{"LF", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"lone CR", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"comments and other fields", ": keep-alive\nevent: message\nid: 7\nretry: 100\ndata: a\n\n:x\n\n", []string{"a"}},
		{"multi-line data joined with LF", "data: {\"a\":\ndata: 1}\n\n", []string{"{\"a\":\n1}"}},
		{"no space after colon", "data:a\n\n", []string{"a"}},
		{"only the first space is dropped", "data:  a\n\n", []string{" a"}},
		{"field without colon", "data\n\n", []string{""}},
		{"blank lines alone dispatch nothing", "\n\n\r\n", nil},
		{"unfinished event at EOF is discarded", "data: a\n\ndata: b\n", []string{"a"}},
		{"leading BOM", "\xEF\xBB\xBFdata: a\n\n", []string{"a"}},
		{"stops at DONE", "data: a\n\ndata: [DONE]\n\ndata: after\n\n", []string{"a", "[DONE]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			whole := parseAll(t, tc.stream)
			if diff := cmp.Diff(tc.want, whole); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			// The same events whatever the read boundaries: every two-way
			// split, and one byte at a time.
			for i := 0; i <= len(tc.stream); i++ {
				if diff := cmp.Diff(whole, parseAll(t, tc.stream[:i], tc.stream[i:])); diff != "" {
					t.Fatalf("split at %d (-whole +split):\n%s", i, diff)
				}
			}
			var bytewise []string
			for i := range len(tc.stream) {
				bytewise = append(bytewise, tc.stream[i:i+1])
			}
			if diff := cmp.Diff(whole, parseAll(t, bytewise...)); diff != "" {
				t.Fatalf("byte by byte (-whole +split):\n%s", diff)
			}
		})
	}
}

func TestSSEParserDispatchError(t *testing.T) {
	var p sseParser
	boom := errors.New("boom")
	_, err := p.feed([]byte("data: x\n\ndata: y\n\n"), func([]byte) (bool, error) { return false, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the dispatch error", err)
	}
}
