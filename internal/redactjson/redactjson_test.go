package redactjson_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/internal/redactjson"
)

// mask stands in for policy.Redactor.String with the one secret "sk-secret".
func mask(s string) string { return strings.ReplaceAll(s, "sk-secret", "[REDACTED]") }

func byName(name string) bool { return strings.HasSuffix(strings.ToLower(name), "key") }

func TestRedact(t *testing.T) {
	keepWord := func(s string) bool { return s == "sk-secret-state" }
	for _, tc := range []struct {
		name string
		in   string
		o    redactjson.Options
		want string
	}{
		{"secret in nested strings", ` {"a":["x sk-secret y",{"b":"sk-secret"}],"n":1}`, redactjson.Options{},
			`{"a":["x [REDACTED] y",{"b":"[REDACTED]"}],"n":1}`},
		{"unchanged is byte for byte", ` {"z":1, "a":"plain"} `, redactjson.Options{}, ` {"z":1, "a":"plain"} `},
		{"unchanged re-encoded with Reencode", ` {"z":1, "a":"plain"} `, redactjson.Options{Reencode: true}, `{"a":"plain","z":1}`},
		{"numbers keep their digits", `{"big":12345678901234567890123,"f":1.50,"s":"sk-secret"}`, redactjson.Options{},
			`{"big":12345678901234567890123,"f":1.50,"s":"[REDACTED]"}`},
		{"keys not masked without Keys", `{"sk-secret":"v"}`, redactjson.Options{}, `{"sk-secret":"v"}`},
		{"keys masked with Keys", `{"sk-secret":"v"}`, redactjson.Options{Keys: true}, `{"[REDACTED]":"v"}`},
		{"field by name, any non-object value", `{"api_key":"plain","Key":[1,2],"other":"plain","n":{"x":null}}`,
			redactjson.Options{Mask: "[M]", Field: byName}, `{"Key":"[M]","api_key":"[M]","n":{"x":null},"other":"plain"}`},
		{"object under a sensitive name is walked", `{"key":{"nested_key":"v","ok":"sk-secret"}}`,
			redactjson.Options{Mask: "[M]", Field: byName}, `{"key":{"nested_key":"[M]","ok":"[REDACTED]"}}`},
		{"field judged by its name as written, not masked", `{"sk-secretkey":"v"}`,
			redactjson.Options{Mask: "[M]", Field: byName, Keys: true}, `{"[REDACTED]key":"[M]"}`},
		{"kept words are not masked", `{"state":"sk-secret-state","e":"sk-secret-state!"}`,
			redactjson.Options{Keep: keepWord}, `{"e":"[REDACTED]-state!","state":"sk-secret-state"}`},
		{"kept words do not protect keys", `{"sk-secret-state":1}`, redactjson.Options{Keys: true, Keep: keepWord},
			`{"[REDACTED]-state":1}`},
		{"a bare string", `"sk-secret"`, redactjson.Options{}, `"[REDACTED]"`},
		{"text after the first value is ignored", `{"a":"sk-secret"} trailing`, redactjson.Options{}, `{"a":"[REDACTED]"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := redactjson.Redact([]byte(tc.in), mask, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("Redact(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactRefusesWhatIsNotJSON(t *testing.T) {
	for _, in := range []string{"", "   ", "sk-secret is not JSON", `{"a":`} {
		out, err := redactjson.Redact([]byte(in), mask, redactjson.Options{Reencode: true})
		if err == nil || out != nil {
			t.Fatalf("Redact(%q) = %s, %v; want the decoder's error and nothing", in, out, err)
		}
	}
}

// Concurrent walks of payloads decoded from one input do not share state (run with -race).
func TestRedactConcurrentUse(t *testing.T) {
	in := []byte(`{"a":["sk-secret",{"b":"sk-secret"}],"api_key":"x"}`)
	want := `{"a":["[REDACTED]",{"b":"[REDACTED]"}],"api_key":"[M]"}`
	var wg sync.WaitGroup
	bad := make(chan string, 64)
	for range 64 {
		wg.Go(func() {
			got, err := redactjson.Redact(in, mask, redactjson.Options{Mask: "[M]", Field: byName})
			if err != nil || string(got) != want || !json.Valid(got) {
				bad <- string(got)
			}
		})
	}
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Fatalf("concurrent Redact = %s, want %s", b, want)
	}
}
