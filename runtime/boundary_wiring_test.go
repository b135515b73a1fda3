package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/tool"
)

const writeCallBody = `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
	`"tool_calls":[{"id":"c1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.go\",\"content\":\"package a\\n\"}"}}]},"finish_reason":"tool_calls"}],` +
	`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`

// A call policy sends to an approver fails the member as paused for approval: nothing is written,
// the model is not sent a second request, and the question is pending in the boundary.
func TestAskedCallFailsTheMemberAsPausedForApproval(t *testing.T) {
	var requests int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, writeCallBody)
	}))
	t.Cleanup(srv.Close)
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f, digest, err := policy.ParseFile([]byte("version: 1\ndefault: allow\nrules:\n  - id: writes\n    tools: [write_file]\n    decision: ask\n"))
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordSink{}
	e, err := NewEngine(EngineConfig{Provider: client, Model: "m", Sink: sink,
		BoundaryOptions: []tool.Option{tool.WithPolicy(policy.NewEngine(digest, 0, f.Policy("p.yaml")))}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	team := Team{RunID: "r", Formation: "sequential", Members: []MemberSpec{{ID: "a", Dir: dir, AllowedTools: []string{"write_file"}}}}
	res := e.RunMember(context.Background(), team, team.Members[0], nil)
	if res.Success || !strings.Contains(res.Error, ErrPausedForApproval.Error()) || !strings.Contains(res.Error, "r:a:r0-c1") {
		t.Fatalf("member result %+v, want failed paused for approval naming the key", res)
	}
	if requests != 1 {
		t.Fatalf("%d provider requests; the awaiting call must not be shown to the model as an error", requests)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.go")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the asked write happened: %v", err)
	}
	if p := e.Boundary().Approvals().ListPending(); len(p) != 1 || p[0].Key() != "r:a:r0-c1" {
		t.Fatalf("pending approvals %+v", p)
	}
	if e.Boundary().PolicyDigest() != digest {
		t.Fatal("the engine's boundary does not use the configured policy")
	}
}

// A reviewer is shown and may call only read-only tools, even when its spec lists a write tool;
// a member with no allowed tools gets the defaults for its roles.
func TestReviewersGetReadOnlyToolsAndEmptyListsGetDefaults(t *testing.T) {
	var mu sync.Mutex
	var shown [][]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Function.Name)
		}
		mu.Lock()
		shown = append(shown, names)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, writeCallBody)
	}))
	t.Cleanup(srv.Close)
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	sink := &recordSink{}
	e, err := NewEngine(EngineConfig{Provider: client, Model: "m", Sink: sink, MaxTurns: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reviewer := MemberSpec{ID: "rev", DomainRole: "reviewer", Dir: dir, AllowedTools: []string{"write_file", "read_file"}}
	plain := MemberSpec{ID: "exec", DomainRole: "executor", Dir: t.TempDir()}
	team := Team{RunID: "r", Formation: "sequential", Members: []MemberSpec{reviewer, plain}}
	_ = e.RunMember(context.Background(), team, reviewer, nil)
	if _, err := os.Stat(filepath.Join(dir, "a.go")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a reviewer wrote a file: %v", err)
	}
	_ = e.RunMember(context.Background(), team, plain, nil)
	if _, err := os.Stat(filepath.Join(plain.Dir, "a.go")); err != nil {
		t.Fatalf("an executor with no allowed tools could not use the default write_file: %v", err)
	}
	if len(shown) != 2 || strings.Join(shown[0], ",") != "read_file" {
		t.Fatalf("tools shown %v; the reviewer must see only read_file", shown)
	}
	want := strings.Join(tool.DefaultAllowedTools(tool.Builtins(), "executor", ""), ",")
	if strings.Join(shown[1], ",") != want {
		t.Fatalf("executor shown %v, want the defaults %s", shown[1], want)
	}
}
