// Package audittest builds evidence stores for the audit rules' tests: one fixture per assessable
// rule of RISKS.md, each a real DuckDB store written through the evidence API (then edited
// directly where the hazard is tampering), with the rule's hazard present or absent. DuckDB files
// are large binaries, so the fixtures are built in tests rather than kept in testdata.
package audittest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // direct edits of a closed store, as a tamperer would

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/storetest"
)

// Fixture is a store builder for one rule's hazard.
type Fixture struct {
	// Rule is the rule whose hazard the fixture plants, e.g. "R10".
	Rule string
	// Name says how, e.g. "dispatched intent without outcome".
	Name string
	// Also are the other rules the planted hazard necessarily trips (a tampered verdict breaks the
	// terminal hash too: R12); a clean build trips none.
	Also []string
	// Clean is the store the fixture builds without its hazard; fixtures sharing a Clean build the
	// same store.
	Clean *Base
	// Hazard writes the store with the hazard under dir and returns its path; nil when Tamper plants
	// the hazard.
	Hazard func(t testing.TB, dir string) string
	// Tamper, when not nil, plants the hazard by editing the closed Clean store at path directly, as
	// a tamperer or a broken tool would.
	Tamper func(t testing.TB, path string)
}

// Base is a store written through the evidence API with no hazard.
type Base struct {
	// Name says what the store holds, e.g. "exact replay".
	Name string
	// Build writes the store under dir and returns its path.
	Build func(t testing.TB, dir string) string
}

// Build writes the fixture's store under dir and returns its path: Clean's store when hazard is
// false; with hazard, Hazard's store, or Clean's store edited by Tamper.
func (f Fixture) Build(t testing.TB, dir string, hazard bool) string {
	t.Helper()
	if !hazard {
		return f.Clean.Build(t, dir)
	}
	if f.Tamper == nil {
		return f.Hazard(t, dir)
	}
	path := f.Clean.Build(t, dir)
	f.Tamper(t, path)
	return path
}

// Sum returns SHA-256 hex of s.
func Sum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Envelope is a live envelope declaring the entropy sources a case run's trace shows.
func Envelope(mode string) evidence.Envelope {
	return evidence.Envelope{Tenant: "tenant-a", ManifestDigest: Sum("manifest"), Mode: mode, PolicyDigest: Sum("policy"),
		EnvironmentFingerprint: Sum("env"), EntropySources: []string{"provider_responses", "wall_clock", "run_id"},
		ReplayTolerance: "exact", Provider: "reference", BaseURL: "http://127.0.0.1:1/v1", Model: "assay-reference-1",
		Formation: "sequential", TaskProfile: "standard", Language: "go"}
}

// CaseChecks are the required checks of a matrix case run (docs/checks.md).
var CaseChecks = []string{"files", "tests", "oracle", "members", "formation", "effects", "sessions", "routing", "usage"}

// Builder writes runs into one store.
type Builder struct {
	T     testing.TB
	Path  string
	Store *evidence.Store
	ctx   context.Context
	modes map[string]string // each run's envelope mode
}

// NewBuilder opens a new store for writing at dir/evidence.duckdb.
func NewBuilder(t testing.TB, dir string) *Builder {
	t.Helper()
	path := filepath.Join(dir, "evidence.duckdb")
	s, err := evidence.Open(context.Background(), path, evidence.OpenOptions{Command: "audittest"})
	if err != nil {
		t.Fatal(err)
	}
	return &Builder{T: t, Path: path, Store: s, ctx: context.Background(), modes: map[string]string{}}
}

// Close closes the store and returns its path.
func (b *Builder) Close() string {
	b.T.Helper()
	if err := b.Store.Close(); err != nil {
		b.T.Fatal(err)
	}
	return b.Path
}

// Must fails the test on err.
func (b *Builder) Must(err error) {
	b.T.Helper()
	if err != nil {
		b.T.Fatal(err)
	}
}

// Event appends one event with payload p (marshalled) and returns its seq.
func (b *Builder) Event(run, typ, member string, p any) int64 {
	b.T.Helper()
	raw, err := json.Marshal(p)
	b.Must(err)
	session := ""
	if member != "" {
		session = run + "-" + member
	}
	ev, err := b.Store.AppendEvent(b.ctx, run, evidence.Event{Type: typ, MemberID: member, SessionID: session, Payload: raw})
	b.Must(err)
	return ev.Seq
}

// Open opens run under env, correcting corrects ("" for none).
func (b *Builder) Open(run string, env evidence.Envelope, corrects string) {
	b.T.Helper()
	b.Must(b.Store.OpenRun(b.ctx, run, env, corrects))
	b.modes[run] = env.Mode
}

// Exchange records one provider exchange of member with its request and response artifacts.
func (b *Builder) Exchange(run, member string, n int) {
	b.T.Helper()
	req := fmt.Sprintf(`{"model":"assay-reference-1","messages":[{"role":"user","content":"%s %d"}]}`, run, n)
	resp := fmt.Sprintf(`{"choices":[{"message":{"content":"done %d"}}]}`, n)
	rd, err := b.Store.PutArtifact(b.ctx, run, fmt.Sprintf("provider/request/%s/%d", member, n), "application/json", []byte(req))
	b.Must(err)
	sd, err := b.Store.PutArtifact(b.ctx, run, fmt.Sprintf("provider/response/%s/%d", member, n), "application/json", []byte(resp))
	b.Must(err)
	b.Event(run, "provider_exchange", member, map[string]any{"seq": n, "status": 200, "request_sha256": rd, "response_sha256": sd,
		"request_artifact": rd, "response_artifact": sd, "usage": map[string]any{"PromptTokens": 10, "CompletionTokens": 2, "TotalTokens": 12}})
}

// ToolCall records an intent (dispatched) and, when outcome is not "", its outcome with extra
// payload fields; it returns the idempotency key. Both carry the run's mode unless it is live, as
// the runtime records them.
func (b *Builder) ToolCall(run, member, call, outcome string, extra map[string]any) string {
	b.T.Helper()
	key := run + ":" + member + ":" + call
	intent := map[string]any{"call_id": call, "idempotency_key": key, "tool": "write_file", "payload_sha256": Sum(call), "dispatched": true, "run_id": run}
	if m := b.modes[run]; m != evidence.ModeLive {
		intent["mode"] = m
	}
	b.Event(run, "tool_call", member, intent)
	if outcome != "" {
		p := map[string]any{"call_id": call, "idempotency_key": key, "state": outcome, "tool": "write_file", "source": "invocation"}
		if m := b.modes[run]; m != evidence.ModeLive {
			p["mode"] = m
		}
		for k, v := range extra {
			p[k] = v
		}
		b.Event(run, "tool_result", member, p)
	}
	return key
}

// Checks records the named checks as required, passed, each with its check_completed event.
func (b *Builder) Checks(run string, names ...string) {
	b.T.Helper()
	for _, n := range names {
		b.Event(run, "check_completed", "", map[string]any{"check": n, "status": "passed", "required": true})
		b.Must(b.Store.RecordCheck(b.ctx, run, evidence.Check{Name: n, Required: true, Status: evidence.CheckPassed, Detail: n + " passed"}))
	}
}

// Finalize finalizes run with the requested verdict and returns the effective one.
func (b *Builder) Finalize(run, verdict string) string {
	b.T.Helper()
	f, err := b.Store.Finalize(b.ctx, run, evidence.Verdict{Verdict: verdict})
	b.Must(err)
	return f.Verdict.Verdict
}

// CaseRun writes a complete, clean, accepted case run: boundary, one member with two exchanges
// and one effect, every case check passed; mutate (may be nil) runs before the checks.
func (b *Builder) CaseRun(run string, env evidence.Envelope, corrects string, mutate func()) {
	b.T.Helper()
	b.Open(run, env, corrects)
	b.Event(run, "boundary_configured", "", map[string]any{"mode": env.Mode, "policy_digest": env.PolicyDigest})
	b.Event(run, "member_started", "exec-1", map[string]any{"formation": env.Formation})
	b.Exchange(run, "exec-1", 0)
	b.ToolCall(run, "exec-1", "c1", "succeeded", nil)
	b.Exchange(run, "exec-1", 1)
	b.Event(run, "member_completed", "exec-1", map[string]any{"formation": env.Formation})
	if mutate != nil {
		mutate()
	}
	b.Checks(run, CaseChecks...)
	b.Finalize(run, evidence.VerdictAccepted)
}

// Checkpoint saves a checkpoint after the run's last event and records its event; it returns the
// checkpoint's seq and hash.
func (b *Builder) Checkpoint(run string) (int64, string) {
	b.T.Helper()
	seq := b.Event(run, "checkpoint", "", map[string]any{"state_sha256": Sum("state"), "turns": 1, "paused": false})
	cp, err := b.Store.SaveCheckpoint(b.ctx, run, seq, json.RawMessage(`{"turns":1}`))
	b.Must(err)
	return cp.Seq, cp.Hash
}

// Exec edits the closed store at path directly, as a tamperer or a broken tool would (storetest.Exec).
func Exec(t testing.TB, path string, stmts ...string) { storetest.Exec(t, path, stmts...) }
