package claims

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/harness/gateway"
)

func i64(v int64) *int64 { return &v }

func TestParseNamesTheBadLine(t *testing.T) {
	tests := []struct {
		name, input string
		line        int
		reason      string
	}{
		{"not JSON", "{\"session_id\":\"a\",\"total_tokens\":1}\nnot json\n", 2, "not a JSON object"},
		{"misspelt count", "\n\n{\"session_id\":\"a\",\"total_token\":1}\n", 3, "total_token"},
		{"no session", `{"total_tokens":1}`, 1, "session_id"},
		{"empty session", `{"session_id":"","total_tokens":1}`, 1, "session_id"},
		{"negative", `{"session_id":"a","prompt_tokens":-2}`, 1, "prompt_tokens"},
		{"fraction", `{"session_id":"a","completion_tokens":1.5}`, 1, "completion_tokens"},
		{"string count", `{"session_id":"a","total_tokens":"12"}`, 1, "total_tokens"},
		{"no count", `{"session_id":"a","member_id":"m"}`, 1, "no token count"},
		{"only nulls", `{"session_id":"a","total_tokens":null}`, 1, "no token count"},
		{"two values", `{"session_id":"a","total_tokens":1} {"session_id":"b","total_tokens":1}`, 1, "more than one"},
		// encoding/json would keep the last of each pair: a claim of 9 read as 5, a session read as another.
		{"a count twice", "{\"session_id\":\"a\",\"total_tokens\":1}\n{\"session_id\":\"a\",\"total_tokens\":9,\"total_tokens\":5}", 2, `key "total_tokens" appears more than once`},
		{"a session twice", `{"session_id":"a","session_id":"b","total_tokens":1}`, 1, `key "session_id" appears more than once`},
		// Keys are exact: encoding/json would read "TOTAL_TOKENS" as total_tokens, and a second
		// spelling as a silent second value.
		{"a key in capitals", `{"session_id":"a","total_tokens":1,"TOTAL_TOKENS":5}`, 1, `unknown key "TOTAL_TOKENS"`},
		{"a misspelt key", `{"session_id":"a","total_token":1}`, 1, `unknown key "total_token" (did you mean "total_tokens"?)`},
		{"a session id a number", `{"session_id":5,"total_tokens":1}`, 1, "session_id is 5, not a string"},
		{"a member id a list", `{"session_id":"a","member_id":["m"],"total_tokens":1}`, 1, `member_id is ["m"], not a string`},
		{"a trailing comma", `{"session_id":"a","total_tokens":1,}`, 1, "not valid JSON at column"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.input))
			var le *LineError
			if !errors.Is(err, ErrMalformedClaim) || !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(le.Reason, tc.reason) {
				t.Fatalf("err %v, want line %d naming %q", err, tc.line, tc.reason)
			}
			for _, leak := range []string{"Go struct field", "json: ", "of type string", "unmarshal"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("%v shows the decoder's text %q", err, leak)
				}
			}
		})
	}
	cs, err := Parse(strings.NewReader("{\"session_id\":\"a\",\"member_id\":\"m\",\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}\n\n{\"session_id\":\"b\",\"total_tokens\":0}"))
	if err != nil || len(cs) != 2 || cs[0].Line != 1 || cs[1].Line != 3 || *cs[0].TotalTokens != 7 || cs[1].PromptTokens != nil || *cs[1].TotalTokens != 0 {
		t.Fatalf("%+v %v", cs, err)
	}
}

func rec(id int64, session string, p, c, tot int64) gateway.Record {
	return gateway.Record{ID: id, SessionID: session, UsageState: gateway.UsageReported, PromptTokens: i64(p), CompletionTokens: i64(c),
		TotalTokens: i64(tot), StartedAt: time.Date(2026, 12, 2, 0, 0, int(id), 0, time.UTC)}
}

func claim(session string, p, c, tot *int64) Claim {
	return Claim{SessionID: session, PromptTokens: p, CompletionTokens: c, TotalTokens: tot}
}

func TestReconcile(t *testing.T) {
	broken := gateway.Record{ID: 9, SessionID: "cut", UsageState: gateway.UsageUnknown, RelayError: gateway.RelayStreamUnterminated}
	suspect := rec(10, "zero", 0, 3, 3)
	suspect.UsageState = gateway.UsageSuspectZero
	tests := []struct {
		name    string
		claims  []Claim
		recs    []gateway.Record
		verdict string
		reason  string
	}{
		{"summed over requests and claim lines", []Claim{claim("s", i64(3), i64(4), i64(7)), claim("s", i64(5), i64(1), i64(6))},
			[]gateway.Record{rec(1, "s", 3, 4, 7), rec(2, "s", 5, 1, 6)}, Conserved, "3 claimed"},
		{"only total claimed", []Claim{claim("s", nil, nil, i64(13))}, []gateway.Record{rec(1, "s", 3, 4, 7), rec(2, "s", 5, 1, 6)}, Conserved, "1 claimed"},
		{"off by one", []Claim{claim("s", i64(3), i64(5), i64(7))}, []gateway.Record{rec(1, "s", 3, 4, 7)}, Mismatch, "completion_tokens claimed 5, gateway 4"},
		{"no claim", nil, []gateway.Record{rec(1, "s", 3, 4, 7)}, Unknown, "no claim"},
		{"no record", []Claim{claim("s", nil, nil, i64(7))}, nil, Unknown, "no record"},
		{"a cut stream is unknown, not zero", []Claim{claim("cut", nil, nil, i64(0))}, []gateway.Record{broken}, Unknown, "stream_unterminated"},
		{"a cut stream beside a reported one", []Claim{claim("cut", nil, nil, i64(7))}, []gateway.Record{rec(1, "cut", 3, 4, 7), broken}, Unknown, "partial"},
		{"suspect zero is not conserved", []Claim{claim("zero", i64(0), i64(3), i64(3))}, []gateway.Record{suspect}, Unknown, "unknown"},
		{"a count the gateway lacks", []Claim{claim("s", i64(3), nil, nil)}, []gateway.Record{{ID: 1, SessionID: "s", UsageState: gateway.UsageReported, TotalTokens: i64(7)}}, Unknown, "prompt_tokens"},
		{"lines claiming different counts", []Claim{claim("s", i64(3), nil, nil), claim("s", nil, nil, i64(7))}, []gateway.Record{rec(1, "s", 3, 4, 7)}, Unknown, "every claim line"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Reconcile(tc.claims, tc.recs)
			if len(res.Sessions) != 1 {
				t.Fatalf("%d sessions", len(res.Sessions))
			}
			s := res.Sessions[0]
			if s.Verdict != tc.verdict || !strings.Contains(s.Reason, tc.reason) {
				t.Errorf("%s %q, want %s naming %q", s.Verdict, s.Reason, tc.verdict, tc.reason)
			}
			if res.OK() != (tc.verdict == Conserved) {
				t.Errorf("OK() = %v for %s", res.OK(), tc.verdict)
			}
		})
	}
}

func TestUnattributedAndNothingToReconcile(t *testing.T) {
	if res := Reconcile(nil, nil); res.OK() || len(res.Problems()) != 1 || *res.Unattributed.TotalTokens != 0 {
		t.Errorf("nothing reconciled passed: %+v", res)
	}
	unknownTotal := gateway.Record{ID: 3, UsageState: gateway.UsageUnknown, StartedAt: time.Date(2026, 12, 2, 0, 0, 1, 0, time.UTC)}
	res := Reconcile([]Claim{claim("s", nil, nil, i64(7))}, []gateway.Record{rec(1, "s", 3, 4, 7), rec(2, "", 1, 1, 2), unknownTotal})
	u := res.Unattributed
	if res.OK() || res.Conserved != 1 || u.Requests != 2 || u.TotalTokens != nil || len(u.List) != 2 || !u.FirstAt.Equal(unknownTotal.StartedAt) || !u.LastAt.Equal(rec(2, "", 0, 0, 0).StartedAt) {
		t.Errorf("%+v", res)
	}
	// A model listing (GET, no usage) with or without a session is neither unattributed usage nor an
	// unknown in its session's sum; a GET that reported usage is reconciled like any request.
	models := gateway.Record{ID: 5, Method: "GET", Path: "/v1/models", Status: 200, UsageState: gateway.UsageUnknown}
	inSession := models
	inSession.ID, inSession.SessionID = 6, "s"
	res = Reconcile([]Claim{claim("s", nil, nil, i64(7))}, []gateway.Record{rec(1, "s", 3, 4, 7), models, inSession})
	if !res.OK() || res.Unattributed.Requests != 0 || len(res.NoUsageRequests) != 2 {
		t.Errorf("a model listing made the reconciliation fail: %+v", res)
	}
	getWithUsage := rec(7, "", 1, 1, 2)
	getWithUsage.Method = "GET"
	if res = Reconcile([]Claim{claim("s", nil, nil, i64(7))}, []gateway.Record{rec(1, "s", 3, 4, 7), getWithUsage}); res.OK() || res.Unattributed.Requests != 1 {
		t.Errorf("a GET that reported usage was not reconciled: %+v", res)
	}
	res = Reconcile(nil, []gateway.Record{rec(2, "", 1, 1, 2), rec(4, "", 1, 2, 3)})
	if *res.Unattributed.TotalTokens != 5 {
		t.Errorf("unattributed total %v", res.Unattributed.TotalTokens)
	}
}
