package evidence

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// referenceEventHash is the event hash as specified, built the slow way:
// json.Marshal of the object, then RFC 8785 canonicalization by jcs.
func referenceEventHash(t *testing.T, prev string, ev StoredEvent) string {
	t.Helper()
	obj := struct {
		RunID     string          `json:"run_id"`
		Seq       int64           `json:"seq"`
		Parent    int64           `json:"parent"`
		Type      string          `json:"type"`
		MemberID  string          `json:"member_id"`
		SessionID string          `json:"session_id"`
		Time      string          `json:"time"`
		Payload   json.RawMessage `json:"payload"`
	}{ev.RunID, ev.Seq, ev.Parent, ev.Type, ev.MemberID, ev.SessionID, ev.Time.UTC().Format(EventTimeLayout), ev.Payload}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 0, 32+len(canon))
	for i := 0; i < 64; i += 2 {
		var b byte
		for _, c := range prev[i : i+2] {
			b <<= 4
			if c >= 'a' {
				b |= byte(c-'a') + 10
			} else {
				b |= byte(c - '0')
			}
		}
		p = append(p, b)
	}
	return sha256Hex(append(p, canon...))
}

// The schema v1 code computed these; the hash definition must never drift.
const (
	goldenEventHash    = "d6a4b3122d38c63bf226af675949880638cfea96cd610ba9bfce5db7650a1a17"
	goldenTerminalV1   = "e384e42ed1ffa2ab9d76e4097b8ab508da02dadaa9b80a8c202696f26a166876"
	goldenPrevHash     = "0f00000000000000000000000000000000000000000000000000000000000000"
	goldenArtifactHash = "aa00000000000000000000000000000000000000000000000000000000000000"
)

func goldenEvent() StoredEvent {
	return StoredEvent{RunID: "run-v1", Seq: 7, Parent: 3, Type: "tool_call", MemberID: "m\"1\\\x01\u2028<é>", SessionID: "run-v1-m\t1",
		Time: time.Date(2026, 11, 30, 10, 15, 0, 123456000, time.UTC), Payload: json.RawMessage(`{"z":[1,2.50,"<&>"],"a":{"y":null,"b":true},"e":1e3}`)}
}

func TestEventHashMatchesJCS(t *testing.T) {
	got, err := EventHash(goldenPrevHash, goldenEvent())
	if err != nil || got != goldenEventHash {
		t.Fatalf("EventHash = %s, %v; schema v1 computed %s", got, err, goldenEventHash)
	}
	strs := []string{"", "plain", "quote\" backslash\\ slash/", "\x00\x01\x07\b\t\n\v\f\r\x1f\x7f", "ünïcödé ☃ 𝄞", "\u2028\u2029", "<script>&amp;"}
	payloads := []string{`{}`, `{"b":1,"a":2}`, `{"n":[1e21,1e-7,0.1,-0,123456789012345678]}`, `{"s":"\u00e9\ud834\udd1e\n"}`, `{"deep":{"x":[{"y":"<>&"}]}}`}
	for i, s := range strs {
		for j, p := range payloads {
			ev := StoredEvent{RunID: "r-1", Seq: int64(i*10 + j + 1), Parent: int64(i), Type: "step", MemberID: s, SessionID: strings.Repeat(s, 2),
				Time: time.Unix(int64(i*1000+j), int64(j*1000)).UTC(), Payload: json.RawMessage(p)}
			want := referenceEventHash(t, ZeroHash, ev)
			got, err := EventHash(ZeroHash, ev)
			if err != nil || got != want {
				t.Errorf("member %q payload %s: EventHash %s, %v; JCS reference %s", s, p, got, err, want)
			}
		}
	}
	if _, err := EventHash(ZeroHash, StoredEvent{RunID: "r", Seq: 1, MemberID: "\xff", Payload: json.RawMessage(`{}`)}); err == nil {
		t.Error("a member id that is not UTF-8 was hashed")
	}
}

func FuzzEventHashMatchesJCS(f *testing.F) {
	f.Add("m", "s", "step", `{"a":1}`)
	f.Add("\x00\"\\\u2028", "é", "x", `{"b":[1,"<"],"a":null}`)
	f.Fuzz(func(t *testing.T, member, session, typ, payload string) {
		canon, reason := canonicalObject([]byte(payload))
		if reason != "" {
			return
		}
		ev := StoredEvent{RunID: "r", Seq: 2, Parent: 1, Type: typ, MemberID: member, SessionID: session,
			Time: time.Unix(1, 0).UTC(), Payload: canon}
		got, err := EventHash(ZeroHash, ev)
		if err != nil {
			return // not UTF-8: refused, as the reference would
		}
		raw, _ := json.Marshal(map[string]string{"m": member, "s": session, "t": typ})
		if _, err := jcs.Transform(raw); err != nil {
			return
		}
		if want := referenceEventHash(t, ZeroHash, ev); got != want {
			t.Fatalf("EventHash %s != JCS reference %s for %+v", got, want, ev)
		}
	})
}

func TestTerminalHashV1IsUnchanged(t *testing.T) {
	r := TerminalRecord{Version: TerminalV1, RunID: "run-v1", EnvelopeDigest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		LastEventHash: goldenPrevHash, EventCount: 3,
		Artifacts:     []ArtifactLink{{Name: "b.go", Digest: goldenArtifactHash, MediaType: "text/x-go"}},
		Checks:        []Check{{Name: "tests", Required: true, Status: "passed", Detail: "ok", Evidence: json.RawMessage(`{"exit":0}`)}},
		Usage:         []UsageRow{{MemberID: "m", SessionID: "s", Source: "wire", State: "reported", Requests: 1, PromptTokens: i64(3), CompletionTokens: i64(2), TotalTokens: i64(5)}},
		UsageVerdicts: []UsageVerdict{{MemberID: "m", SessionID: "s", Verdict: "unknown", Detail: "source store missing", Duplicated: true, Multiple: 2}},
		Checkpoints:   []CheckpointInfo{{Seq: 1, Hash: goldenArtifactHash}},
		Verdict:       Verdict{Verdict: "rejected", Reasons: []string{"x"}}}
	got, err := TerminalHash(r)
	if err != nil || got != goldenTerminalV1 {
		t.Fatalf("v1 terminal hash %s, %v; schema v1 computed %s", got, err, goldenTerminalV1)
	}
	r.Version = TerminalV2
	if v2, _ := TerminalHash(r); v2 == got {
		t.Fatal("v2 terminal hash ignores what v2 adds")
	}
}

func TestCanonicalFastPath(t *testing.T) {
	for in, want := range map[string]bool{
		`{}`: true, `{"a":1,"b":[true,false,null,"x"],"c":{"d":-12}}`: true, `{"s":"\u001f\n\"\\é"}`: true,
		`{"b":1,"a":2}`: false, `{"a":1,"a":1}`: false, `{ "a":1}`: false, `{"a":1.5}`: false, `{"a":1e3}`: false,
		`{"a":-0}`: false, `{"a":01}`: false, `{"a":"\u00e9"}`: false, `{"a":"\/"}`: false, `{"a":"\u000a"}`: false,
		`{"a":"\u001F"}`: false, `{"é":1}`: false, `{"a":9007199254740992}`: false, `{"a":9007199254740991}`: true, `[1]`: false,
		`{"a":1}x`: false, `{"a":"` + "\xff" + `"}`: false,
	} {
		if got := isCanonicalObject([]byte(in)); got != want {
			t.Errorf("isCanonicalObject(%s) = %v, want %v", in, got, want)
		}
	}
}

func FuzzCanonicalFastPath(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[true,null]}`, `{"s":"\u0001é"}`, `{"b":1,"a":2}`, `{"a":1.0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonicalObject(b) {
			return
		}
		out, err := jcs.Transform(b)
		if err != nil || string(out) != string(b) {
			t.Fatalf("fast path accepted %q but jcs gives %q, %v", b, out, err)
		}
	})
}
