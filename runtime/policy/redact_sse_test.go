package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
)

const sseSecret = "sk-split-0123456789abcdef"

// chunkLine is one "data:" event of a chat-completion stream with the given delta.
func chunkLine(delta string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":null}]}` + "\n\n"
}

const sseTail = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` +
	"\n\n" + `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}` +
	"\n\ndata: [DONE]\n\n"

// contentStream streams pieces as delta.content, each JSON-encoded by enc.
func contentStream(pieces []string, enc func(string) string) string {
	var b strings.Builder
	b.WriteString(chunkLine(`{"role":"assistant","content":""}`))
	for _, p := range pieces {
		b.WriteString(chunkLine(`{"content":` + enc(p) + `}`))
	}
	b.WriteString(sseTail)
	return b.String()
}

func plainJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// escapeAll encodes every character of s as \uXXXX (surrogate pairs above the BMP): legal JSON
// whose bytes never contain s.
func escapeAll(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r > 0xFFFF {
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	b.WriteByte('"')
	return b.String()
}

// parseWithClient serves stream to the real provider client and returns what it understood.
func parseWithClient(t *testing.T, stream []byte) *provider.Response {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(stream)
	}))
	defer srv.Close()
	c, err := provider.NewClient(provider.ClientConfig{BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), provider.Request{SessionID: "s", Model: "m", Stream: true,
		Messages: []provider.Message{{Role: "user", Content: "hi"}}})
	if err != nil {
		t.Fatalf("the client cannot parse the stream: %v\n%s", err, stream)
	}
	return resp
}

// A secret split across chunks is masked in the raw stream: exactly the characters of the
// occurrence (the first piece carries the mask, the next nothing), every other byte unchanged,
// and the real client parses the masked stream to the masked text.
func TestSSEMasksASecretSplitAcrossContentChunks(t *testing.T) {
	r := policy.NewRedactor(sseSecret)
	raw := contentStream([]string{"the key is sk-split-01", "23456789abcdef, keep it"}, plainJSON)
	if strings.Contains(string(r.String(raw)), "[REDACTED]") {
		t.Fatal("the byte-wise projection found the split secret; the test proves nothing")
	}
	got := string(r.SSE([]byte(raw)))
	want := strings.Replace(strings.Replace(raw, `"the key is sk-split-01"`, `"the key is [REDACTED]"`, 1),
		`"23456789abcdef, keep it"`, `", keep it"`, 1)
	if got != want {
		t.Fatalf("masked stream\n%s\nwant\n%s", got, want)
	}
	if c := parseWithClient(t, []byte(got)).Message.Content; c != "the key is [REDACTED], keep it" {
		t.Fatalf("client joined %q", c)
	}
}

func TestSSEMasksSplitSecretsInEveryForm(t *testing.T) {
	r := policy.NewRedactor(sseSecret, "ghp_"+strings.Repeat("Z", 30))
	args := `{"path":"notes.txt","content":"token ` + sseSecret + ` end"}`
	var threes []string
	for i := 0; i < len(args); i += 3 {
		threes = append(threes, args[i:min(i+3, len(args))])
	}
	toolStream := func(idx bool) string {
		var b strings.Builder
		b.WriteString(chunkLine(`{"role":"assistant","content":null}`))
		index := `"index":0,`
		if !idx {
			index = ""
		}
		b.WriteString(chunkLine(`{"tool_calls":[{` + index + `"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]}`))
		for _, p := range threes {
			b.WriteString(chunkLine(`{"tool_calls":[{` + index + `"function":{"arguments":` + plainJSON(p) + `}}]}`))
		}
		b.WriteString(sseTail)
		return b.String()
	}
	cases := []struct {
		name, raw   string
		wantContent string
		wantArgs    string
	}{
		{"tool arguments in three-byte pieces", toolStream(true), "", strings.Replace(args, sseSecret, policy.Mask, 1)},
		{"tool arguments without indices", toolStream(false), "", strings.Replace(args, sseSecret, policy.Mask, 1)},
		{"every character escaped", contentStream([]string{"a " + sseSecret[:9], sseSecret[9:] + " b"}, escapeAll),
			"a [REDACTED] b", ""},
		{"CRLF line ends and a comment", strings.ReplaceAll(": keepalive\n\n"+contentStream([]string{"x" + sseSecret[:12], sseSecret[12:]}, plainJSON), "\n", "\r\n"),
			"x[REDACTED]", ""},
		{"one chunk over two data lines", strings.Replace(contentStream([]string{sseSecret[:5], sseSecret[5:] + "!"}, plainJSON),
			`"choices":`, "\ndata: \"choices\":", -1), "[REDACTED]!", ""},
		{"secret over three chunks, twice", contentStream([]string{"<" + sseSecret[:4], sseSecret[4:20], sseSecret[20:] + "|" + sseSecret + "|" + sseSecret[:7], sseSecret[7:]}, plainJSON),
			"<[REDACTED]|[REDACTED]|[REDACTED]", ""},
		{"a second secret", contentStream([]string{"ghp_" + strings.Repeat("Z", 15), strings.Repeat("Z", 15)}, plainJSON), "[REDACTED]", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			masked := r.SSE([]byte(c.raw))
			resp := parseWithClient(t, masked)
			if resp.Message.Content != c.wantContent {
				t.Fatalf("content %q, want %q", resp.Message.Content, c.wantContent)
			}
			if c.wantArgs != "" && (len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Function.Arguments != c.wantArgs) {
				t.Fatalf("tool calls %+v, want arguments %s", resp.Message.ToolCalls, c.wantArgs)
			}
			if resp.Usage == nil || resp.Usage.TotalTokens != 7 || resp.FinishReason != "stop" {
				t.Fatalf("the rest of the stream changed: usage %+v finish %q", resp.Usage, resp.FinishReason)
			}
			// The original stream, parsed, did carry the secret.
			orig := parseWithClient(t, []byte(c.raw))
			if carried := orig.Message.Content + fmt.Sprint(orig.Message.ToolCalls); r.String(carried) == carried {
				t.Fatal("the unmasked stream carries no secret; the case proves nothing")
			}
		})
	}
}

// Random splits of a text holding secrets, some chunks escaped: the masked stream parses to
// String of the joined text, and removing the rewritten content values leaves the bytes of the
// original with the same values removed (nothing else changed).
func TestSSERandomSplits(t *testing.T) {
	secrets := []string{sseSecret, "p@ss/wörd-é😀-42"}
	r := policy.NewRedactor(secrets...)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", " ", "/", "\"", "\\", "\n", "é", "😀", "<", "-"}
	for round := 0; round < 300; round++ {
		var text strings.Builder
		for range 3 {
			for range rng.IntN(20) {
				text.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			text.WriteString(secrets[rng.IntN(len(secrets))])
		}
		full := text.String()
		var pieces []string
		for rest := full; rest != ""; {
			n := 1 + rng.IntN(8)
			// cut on a rune boundary, as servers do
			for n < len(rest) && (rest[n]&0xC0) == 0x80 {
				n++
			}
			n = min(n, len(rest))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		enc := plainJSON
		if round%3 == 0 {
			enc = escapeAll
		}
		raw := contentStream(pieces, enc)
		masked := r.SSE([]byte(raw))
		if got, want := parseWithClient(t, masked).Message.Content, r.String(full); got != want {
			t.Fatalf("round %d: joined %q, want %q", round, got, want)
		}
		if bytes.Contains(masked, []byte(secrets[1])) || bytes.Contains(masked, []byte(sseSecret)) {
			t.Fatalf("round %d: a secret survived whole", round)
		}
		if a, b := stripContent(raw), stripContent(string(masked)); a != b {
			t.Fatalf("round %d: bytes outside the content values changed:\n%s\n%s", round, a, b)
		}
	}
}

// stripContent blanks every delta content value, to compare the rest of two streams.
func stripContent(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, `{"content":"`)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len(`{"content":"`)])
		s = s[i+len(`{"content":"`):]
		j := 0
		for ; j < len(s); j++ {
			if s[j] == '\\' {
				j++
				continue
			}
			if s[j] == '"' {
				break
			}
		}
		s = s[j:]
	}
}

// Text that is not an event stream is masked as String masks it; a nil redactor changes nothing.
func TestSSEOnOtherText(t *testing.T) {
	r := policy.NewRedactor(sseSecret)
	plain := `{"choices":[{"message":{"content":"` + sseSecret + `"}}]}`
	if got := string(r.SSE([]byte(plain))); got != r.String(plain) || strings.Contains(got, sseSecret) {
		t.Fatalf("plain JSON: %s", got)
	}
	var none *policy.Redactor
	if got := string(none.SSE([]byte(plain))); got != plain {
		t.Fatalf("nil redactor changed the text: %s", got)
	}
	broken := "data: {\"choices\":[{\"delta\":{\"content\":\"" + sseSecret[:8] + "\"}}\n\ndata: [DONE]\n\n"
	if got := string(r.SSE([]byte(broken))); got != broken {
		t.Fatalf("a broken chunk was rewritten: %s", got)
	}
}

// Reasoning text is joined like content; overlapping occurrences of two secrets are masked as one.
func TestSSEReasoningAndOverlappingSecrets(t *testing.T) {
	r := policy.NewRedactor("abcdef12", "ef123456")
	raw := chunkLine(`{"reasoning_content":"x abcd"}`) + chunkLine(`{"reasoning_content":"ef123456 y"}`) + sseTail
	got := string(r.SSE([]byte(raw)))
	want := strings.Replace(strings.Replace(raw, `"x abcd"`, `"x [REDACTED]"`, 1), `"ef123456 y"`, `" y"`, 1)
	if got != want {
		t.Fatalf("masked\n%s\nwant\n%s", got, want)
	}
}

// BenchmarkRedactorSSE masks a 2,000-chunk tool-call stream (arguments in three-byte pieces, one
// secret split across two of them) plus 300 content chunks: the shape of a long streamed reply.
func BenchmarkRedactorSSE(b *testing.B) {
	r := policy.NewRedactor(sseSecret, "another-secret-value-123")
	args := strings.Repeat("x", 3000) + sseSecret + strings.Repeat("y", 2975)
	var s strings.Builder
	for i := 0; i < 300; i++ {
		s.WriteString(chunkLine(`{"content":"word ` + fmt.Sprint(i) + ` "}`))
	}
	s.WriteString(chunkLine(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]}`))
	for i := 0; i < len(args); i += 3 {
		s.WriteString(chunkLine(`{"tool_calls":[{"index":0,"function":{"arguments":` + plainJSON(args[i:i+3]) + `}}]}`))
	}
	s.WriteString(sseTail)
	raw := []byte(s.String())
	if !bytes.Contains(r.SSE(raw), []byte(policy.Mask)) {
		b.Fatal("the split secret survived")
	}
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		r.SSE(raw)
	}
}

// Keys are read as a client's decoder reads them: escaped or in another case, with a null index.
func TestSSEKeysAsAClientReadsThem(t *testing.T) {
	r := policy.NewRedactor(sseSecret)
	raw := chunkLine(`{"role":"assistant","cont\u0065nt":"a `+sseSecret[:10]+`"}`) +
		strings.Replace(chunkLine(`{"Content":"`+sseSecret[10:]+` b"}`), `"index":0`, `"index":null`, 1) + sseTail
	if c := parseWithClient(t, []byte(raw)).Message.Content; c != "a "+sseSecret+" b" {
		t.Fatalf("the client reads %q from the unmasked stream; the case proves nothing", c)
	}
	if c := parseWithClient(t, r.SSE([]byte(raw))).Message.Content; c != "a [REDACTED] b" {
		t.Fatalf("masked stream reads %q", c)
	}
}
