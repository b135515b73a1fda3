package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// scriptedProvider is an OpenAI-compatible endpoint whose members write the given files and then
// claim success: it stands in for a model that says "done" whatever it produced. The harness under
// test must not believe it.
func scriptedProvider(t *testing.T, files map[string]string, finalReply string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		answered := false
		for _, m := range req.Messages {
			if m.Role == "tool" {
				answered = true
			}
		}
		msg := map[string]any{"role": "assistant", "content": finalReply}
		finish := "stop"
		if !answered && len(files) > 0 {
			var calls []map[string]any
			i := 0
			for path, content := range files {
				args, _ := json.Marshal(map[string]string{"path": path, "content": content})
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]string{"name": "write_file", "arguments": string(args)}})
				i++
			}
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
	t.Cleanup(srv.Close)
	return srv
}

const (
	// wrongFor7 is right on every input but 7, and its own test does not look at 7.
	wrongFor7 = "package double\n\nfunc Double[T int | float64](x T) T {\n\tif x == 7 {\n\t\treturn 15\n\t}\n\treturn 2 * x\n}\n"
	goodTest  = "package double\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(2) != 4 || Double(1.5) != 3.0 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n"
	correct   = "package double\n\nfunc Double[T int | float64](x T) T { return 2 * x }\n"
	done      = `{"status":"done","files":["double.go","double_test.go"]}`
)

func checkStatus(c CaseResult) map[string]string {
	m := map[string]string{}
	for _, ch := range c.Checks {
		m[ch.Name] = ch.Status
	}
	return m
}

func TestMembersWhoClaimDoneAreNotBelieved(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	cases := []struct {
		name  string
		files map[string]string
		reply string
		// want maps check name -> status; every case must end rejected.
		want map[string]string
	}{
		{"wrong for a single input, own tests pass",
			map[string]string{"double.go": wrongFor7, "double_test.go": goodTest}, done,
			map[string]string{"files": "passed", "tests": "passed", "oracle": "failed", "members": "passed", "usage": "passed"}},
		{"claims done but wrote nothing",
			nil, done,
			map[string]string{"files": "failed", "members": "passed"}},
		{"correct files but the completion reply has prose around it",
			map[string]string{"double.go": correct, "double_test.go": goodTest}, "All done! " + done,
			map[string]string{"files": "passed", "oracle": "passed", "members": "failed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := scriptedProvider(t, c.files, c.reply)
			out := t.TempDir()
			sum, err := Run(context.Background(), Options{OutDir: out, Formations: []string{"sequential"},
				BaseURL: srv.URL + "/v1", Model: "scripted-model"})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Accepted() || len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict != "rejected" {
				t.Fatalf("want one rejected case, got %+v", sum.Cases)
			}
			got := checkStatus(sum.Cases[0])
			for name, status := range c.want {
				if got[name] != status {
					t.Errorf("check %s = %s, want %s (%+v)", name, got[name], status, sum.Cases[0].Checks)
				}
			}
			// The rejection is what the evidence store holds, and the trace verifies.
			s, err := evidence.Open(context.Background(), filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			run, err := s.Run(context.Background(), sum.Cases[0].RunID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Verdict == nil || run.Verdict.Verdict != "rejected" || len(run.Verdict.Reasons) == 0 {
				t.Fatalf("stored verdict %+v", run.Verdict)
			}
			v, err := s.Verify(context.Background(), sum.Cases[0].RunID)
			if err != nil || len(v) != 1 || v[0].Status != "ok" {
				t.Fatalf("verify %+v %v", v, err)
			}
		})
	}
}

func TestNormalizeRefusesBadOptionsBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown formation", Options{OutDir: filepath.Join(dir, "a"), Formations: []string{"nosuch"}}, "unknown formation"},
		{"unknown profile", Options{OutDir: filepath.Join(dir, "b"), Profile: "huge"}, "unknown profile"},
		{"unknown language", Options{OutDir: filepath.Join(dir, "c"), Language: "cobol"}, "unknown language"},
		{"base url without model", Options{OutDir: filepath.Join(dir, "d"), BaseURL: "http://127.0.0.1:1/v1"}, "--model"},
		{"base url not http", Options{OutDir: filepath.Join(dir, "e"), BaseURL: "ftp://x", Model: "m"}, "not an http"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
