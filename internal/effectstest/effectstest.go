// Package effectstest writes evidence stores holding tool-call effects in every state, for the
// tests of the packages that read them back (harness and the assay command).
package effectstest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

// RunID is the fixture run's id.
const RunID = "run-20261130t101500-0a1b2c3d4e5f"

// Digest is the SHA-256 hex (64 chars) of s.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// PolicyDigest is the digest of the fixture's policy: every approval scope of the fixture's calls
// contains it.
var PolicyDigest = Digest("policy")

// storeJournal records a boundary's intents and outcomes as tool_call and tool_result events in a
// real evidence store, as the runtime's sink does.
type storeJournal struct {
	s     *evidence.Store
	runID string
}

func (j storeJournal) emit(ctx context.Context, member, session string, p event.Payload) error {
	ev, err := runtime.NewEvent(member, session, p)
	if err != nil {
		return err
	}
	_, err = j.s.AppendEvent(ctx, j.runID, evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: ev.SessionID, Payload: ev.Payload})
	return err
}

func (j storeJournal) Intent(ctx context.Context, in tool.Intent) error {
	return j.emit(ctx, in.MemberID, in.SessionID, event.ToolCall{Intent: in})
}

func (j storeJournal) Outcome(ctx context.Context, o tool.Outcome) error {
	return j.emit(ctx, o.MemberID, o.SessionID, event.ToolResult{Outcome: o})
}

// Store writes, in a new directory, evidence.duckdb holding run RunID, whose member exec-1 made
// four calls through a real boundary: call_1 (write_file) succeeded, call_2 (deploy, network, with
// the arguments {"name":"release","value":"v1"} of a remote_put) lost its response after the
// backend committed (unknown), call_3 (shell) awaits approval, call_4 (a
// tool that does not exist) failed. With paused the run then records a checkpoint saying it paused,
// as a durable run does, before it is finalized rejected; without, it is finalized rejected with no
// checkpoint (a run no resume can continue). It returns the store path.
func Store(t testing.TB, paused bool) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "effectstest"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := evidence.Envelope{Tenant: "local", ManifestDigest: Digest("m"), Mode: "live", EnvironmentFingerprint: Digest("env"),
		ReplayTolerance: "exact", Provider: "reference", BaseURL: "http://127.0.0.1:0/v1", Model: "assay-reference-1",
		Formation: "sequential", TaskProfile: "standard", Language: "go"}
	if err := s.OpenRun(ctx, RunID, env, ""); err != nil {
		t.Fatal(err)
	}
	lost := tool.Tool{Name: "deploy", Access: tool.Network, Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
			return "", tool.ErrIndeterminate // the backend committed; the response was lost
		}}
	tools := tool.Builtins()
	tools["deploy"] = lost
	e := policy.NewEngine(PolicyDigest, 0, policy.Func{PolicyName: "policy.yaml", F: func(ctx context.Context, r policy.Request) (policy.Decision, error) {
		if r.Tool == "shell" {
			return policy.Decision{Effect: policy.Ask, Rule: "commands", Reason: "commands need an operator"}, nil
		}
		return policy.Decision{Effect: policy.Allow, Rule: "rest", Disclose: true}, nil
	}})
	b := tool.NewBoundary(tools, storeJournal{s: s, runID: RunID}, tool.WithPolicy(e))
	dir := t.TempDir()
	for _, c := range []struct{ id, tool, args string }{
		{"call_1", "write_file", `{"path":"a.go","content":"package a"}`},
		{"call_2", "deploy", `{"name":"release","value":"v1"}`},
		{"call_3", "shell", `{"argv":["go","test","./..."]}`},
		{"call_4", "no_such_tool", `{}`},
	} {
		if _, err := b.Invoke(ctx, tool.Call{RunID: RunID, MemberID: "exec-1", SessionID: RunID + "-exec-1", CallID: c.id,
			Tool: c.tool, Arguments: c.args, Root: dir, Allowed: []string{"write_file", "deploy", "shell", "no_such_tool"}}); err != nil {
			t.Fatal(err)
		}
	}
	if paused {
		ev, err := s.AppendEvent(ctx, RunID, evidence.Event{Type: "checkpoint", Time: time.Now(),
			Payload: json.RawMessage(`{"paused":true,"state_sha256":"` + Digest("state") + `","turns":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SaveCheckpoint(ctx, RunID, ev.Seq, json.RawMessage(`{"paused":true,"version":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finalize(ctx, RunID, evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"effect unknown"}}); err != nil {
		t.Fatal(err)
	}
	return path
}
