package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// scriptedProvider is an OpenAI-compatible endpoint whose members write the given files and then
// claim success: it stands in for a model that says "done" whatever it produced. The harness under
// test must not believe it.
func scriptedProvider(t *testing.T, files map[string]string, finalReply string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"scripted-model","object":"model"}]}`)
			return
		}
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
			// In path order, so call ids (call_0, call_1, ...) name the same files on every run.
			paths := slices.Sorted(maps.Keys(files))
			for i, path := range paths {
				content := files[path]
				args, _ := json.Marshal(map[string]string{"path": path, "content": content})
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]string{"name": "write_file", "arguments": string(args)}})
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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sc := scriptedFor(t, caseLanguage(t))
	cases := []struct {
		name  string
		files map[string]string
		reply string
		// want maps check name -> status; every case must end rejected.
		want map[string]string
	}{
		{"wrong for a single input, own tests pass",
			sc.solution(sc.wrongFor7), sc.done,
			map[string]string{"files": "passed", "tests": "passed", "oracle": "failed", "members": "passed", "usage": "passed"}},
		{"claims done but wrote nothing",
			nil, sc.done,
			map[string]string{"files": "failed", "members": "passed"}},
		{"correct files but the completion reply has prose around it",
			sc.solution(sc.correct), "All done! " + sc.done,
			map[string]string{"files": "passed", "oracle": "passed", "members": "failed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := scriptedProvider(t, c.files, c.reply)
			out := t.TempDir()
			sum, err := Run(context.Background(), Options{OutDir: out, Formations: []string{"sequential"}, Language: sc.language,
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
		{"unknown profile", Options{OutDir: filepath.Join(dir, "b"), Profile: "huge"}, `Profile "huge" is unknown`},
		{"unknown language", Options{OutDir: filepath.Join(dir, "c"), Language: "cobol"}, `Language "cobol" is unknown`},
		{"base url without model", Options{OutDir: filepath.Join(dir, "d"), BaseURL: "http://127.0.0.1:1/v1"}, "Model is required with BaseURL"},
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

func TestPreflightRefusesAnUnusableProviderBeforeWriting(t *testing.T) {
	notOpenAI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html>hello</html>")
	}))
	defer notOpenAI.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer refusing.Close()
	scripted := scriptedProvider(t, nil, done)
	cases := []struct {
		name, base, model, want string
	}{
		{"unreachable", "http://127.0.0.1:1/v1", "m", "unreachable"},
		{"not OpenAI-compatible", notOpenAI.URL + "/v1", "m", "not an OpenAI model list"},
		{"key refused", refusing.URL + "/v1", "m", "refused"},
		{"model not served", scripted.URL + "/v1", "other-model", `does not list model "other-model"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			_, err := Run(context.Background(), Options{OutDir: out, Formations: []string{"sequential"}, BaseURL: c.base, Model: c.model})
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrBadOptions containing %q", err, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("the output directory was created for a provider refused at preflight")
			}
		})
	}
}

func TestSessionHeaderAndFaultTargetsAreChecked(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"credential header", Options{SessionHeader: "authorization"}, "carries credentials"},
		{"api key header", Options{SessionHeader: "X-API-Key"}, "carries credentials"},
		{"not a token", Options{SessionHeader: "X Y"}, "not a valid HTTP header name"},
		{"managed by HTTP", Options{SessionHeader: "Content-Length"}, "managed by HTTP"},
		{"negative timeout", Options{RequestTimeout: -time.Second}, "negative"},
		{"fault on no member", Options{Formations: []string{"sequential"}, ReferenceFaults: []reference.Fault{{Member: "exec-9", Turn: 0, Kind: reference.FaultDropUsage}}}, `"exec-9"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.OutDir = filepath.Join(dir, c.name)
			err := c.opts.Normalize()
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrBadOptions containing %q", err, c.want)
			}
		})
	}
}

func TestARetriedServerErrorKeepsSessionsAndRoutingMatched(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	out := t.TempDir()
	sum, err := Run(context.Background(), Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t),
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultHTTP500}}})
	if err != nil {
		t.Fatal(err)
	}
	got := checkStatus(sum.Cases[0])
	// The client retried the model request once: the gateway saw one request more than the
	// runtime's exchanges, and the runtime counted it.
	if got["sessions"] != "passed" || got["routing"] != "passed" || got["files"] != "passed" || got["oracle"] != "passed" {
		t.Fatalf("check statuses %v", got)
	}
}

// TestFailingGoMemberTestRejects: a Go member whose own test fails makes the tests check fail and
// the case rejected, naming the failed test; the runner's -trimpath (build cache reuse) changes
// nothing of that.
func TestFailingGoMemberTestRejects(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs member code; skipped with -short")
	}
	sc := scriptedFor(t, reference.LanguageGo)
	failing := "package double\n\nimport \"testing\"\n\nfunc TestDoubleOfTwo(t *testing.T) {\n\tif Double(2) != 5 {\n\t\tt.Fatal(\"want 5\")\n\t}\n}\n"
	srv := scriptedProvider(t, map[string]string{sc.artifact: sc.correct, sc.testFile: failing}, sc.done)
	sum, err := Run(context.Background(), Options{OutDir: t.TempDir(), Formations: []string{"sequential"}, Language: sc.language,
		BaseURL: srv.URL + "/v1", Model: "scripted-model"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Accepted() || len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict != "rejected" {
		t.Fatalf("want one rejected case, got %+v", sum.Cases)
	}
	for _, ch := range sum.Cases[0].Checks {
		if ch.Name != "tests" {
			continue
		}
		if ch.Status != "failed" || !strings.Contains(ch.Detail, "exec-1 failed") || !strings.Contains(string(ch.Evidence), "TestDoubleOfTwo") {
			t.Fatalf("tests check = %s (%s, %s), want failed for exec-1 naming TestDoubleOfTwo", ch.Status, ch.Detail, ch.Evidence)
		}
		return
	}
	t.Fatalf("no tests check in %+v", sum.Cases[0].Checks)
}
