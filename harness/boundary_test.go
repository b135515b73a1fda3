package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

func TestNormalizeRefusesBadBoundaryInputBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "bad-policy.yaml")
	if err := os.WriteFile(badPolicy, []byte("version: 1\ndefault: maybe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typoPolicy := filepath.Join(dir, "typo-policy.yaml")
	typo := "version: 1\ndefault: allow\nrules:\n  - id: no-writes\n    tools: [WRITE_FILE]\n    decision: deny\n"
	if err := os.WriteFile(typoPolicy, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	badApprovals := filepath.Join(dir, "bad-approvals.json")
	if err := os.WriteFile(badApprovals, []byte(`{"version":1,"approvals":[{"member_id":"a"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"bad policy", Options{PolicyFile: badPolicy}, "PolicyFile"},
		{"missing policy", Options{PolicyFile: filepath.Join(dir, "nope.yaml")}, "PolicyFile"},
		{"a deny rule naming no tool", Options{PolicyFile: typoPolicy}, `tool pattern "WRITE_FILE" matches no tool`},
		{"bad approvals", Options{ApprovalsFile: badApprovals}, "ApprovalsFile"},
		{"unknown mode", Options{Mode: "pretend"}, "Mode"},
		{"negative budget", Options{MemberToolCalls: -1}, "MemberToolCalls -1 is negative"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.OutDir = filepath.Join(dir, "out", string(rune('a'+i)))
			_, err := Run(context.Background(), c.opts)
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err %v, want one line with ErrBadOptions naming %q", err, c.want)
			}
			if _, err := os.Stat(c.opts.OutDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s was created", c.opts.OutDir)
			}
		})
	}
}

// storedEvents opens the store read-only and returns the run's envelope and events.
func storedEvents(t *testing.T, out, runID string) (evidence.RunSummary, []evidence.StoredEvent) {
	t.Helper()
	s, err := evidence.Open(context.Background(), filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return run, evs
}

// A policy that asks about test files stops each implementing member at that call (paused for
// approval, case rejected, the envelope carries the policy file's SHA-256); an approval file built
// from the exact questions recorded lets a later run through until the case is accepted, every asked
// dispatch bound to a consumed approval.
func TestPolicyAsksAndExactApprovalsLetTheMatrixThrough(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix and builds member code; skipped with -short")
	}
	dir := t.TempDir()
	sc := scriptedFor(t, caseLanguage(t))
	policyBytes := []byte("version: 1\ndefault: allow\nrules:\n  - id: tests-need-approval\n    tools: [write_file]\n    paths: [\"" + sc.testGlob + "\"]\n    decision: ask\n")
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, policyBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(policyBytes)
	wantDigest := hex.EncodeToString(sum[:])
	approvalsPath := filepath.Join(dir, "approvals.json")
	// A provider whose call ids repeat across runs: an approval binds the call id, and the reference
	// provider's ids are per session, so a grant written for one run would never match another's.
	srv := scriptedProvider(t, sc.solution(sc.correct), sc.done)
	file := policy.ApprovalFile{Version: 1}
	for attempt := 0; ; attempt++ {
		if attempt == 6 {
			t.Fatal("the case never got through with exact approvals")
		}
		opts := Options{OutDir: filepath.Join(dir, "out"), Formations: []string{"sequential"}, Language: sc.language, PolicyFile: policyPath,
			BaseURL: srv.URL + "/v1", Model: "scripted-model"}
		if len(file.Approvals) > 0 {
			data, _ := json.Marshal(file)
			if err := os.WriteFile(approvalsPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			opts.ApprovalsFile = approvalsPath
		}
		s := runMatrix(t, opts)
		c := s.Cases[0]
		run, evs := storedEvents(t, opts.OutDir, c.RunID)
		if run.Envelope.PolicyDigest != wantDigest || run.Envelope.Mode != "live" {
			t.Fatalf("envelope policy digest %q mode %q, want %s live", run.Envelope.PolicyDigest, run.Envelope.Mode, wantDigest)
		}
		var asked []tool.Intent
		approved := 0
		for _, ev := range evs {
			switch ev.Type {
			case "tool_call":
				var in tool.Intent
				if err := json.Unmarshal(ev.Payload, &in); err != nil {
					t.Fatal(err)
				}
				if in.Policy != nil && in.Policy.Effect == policy.Ask {
					if !in.Dispatched {
						asked = append(asked, in)
					} else if in.Approval == nil {
						t.Fatalf("an asked call dispatched without an approval: %+v", in)
					} else {
						approved++
					}
				}
			case "member_failed":
				// A member stops at its asked call; in a durable formation the members after it are
				// deferred until the run resumes. Both are pauses, never another failure.
				if !strings.Contains(string(ev.Payload), "paused for approval") && !strings.Contains(string(ev.Payload), `"paused":true`) {
					t.Fatalf("a member failed for another reason: %s", ev.Payload)
				}
			}
		}
		if approved != len(file.Approvals) {
			t.Fatalf("attempt %d: %d approved dispatches, want the %d granted", attempt, approved, len(file.Approvals))
		}
		if len(asked) == 0 {
			if c.Verdict.Verdict != "accepted" {
				t.Fatalf("nothing pending but the case is %s: %+v", c.Verdict.Verdict, c.Checks)
			}
			if attempt == 0 {
				t.Fatal("the policy never asked")
			}
			return
		}
		if c.Verdict.Verdict != "rejected" {
			t.Fatalf("attempt %d: a case paused for approval is %s, want rejected", attempt, c.Verdict.Verdict)
		}
		for _, in := range asked {
			if in.Policy.Rule != "tests-need-approval" || !strings.Contains(string(in.Arguments), sc.testFile+`"`) {
				t.Fatalf("asked about the wrong call: %+v", in)
			}
			file.Approvals = append(file.Approvals, policy.FileApproval{MemberID: in.MemberID, CallID: in.CallID, Tool: in.Tool,
				PayloadSHA256: in.PayloadSHA256, SchemaSHA256: in.SchemaSHA256, Access: string(in.Access), PolicyScope: in.Policy.Scope,
				Revision: in.Revision, Approver: "test", ExpiresAt: time.Now().Add(time.Hour).UTC()})
		}
	}
}

// --mode dry_run simulates every write: the envelope says dry_run, every write outcome is
// labelled simulated, nothing is written, and the store finalizes the case non_certifiable.
func TestDryRunIsSimulatedAndNonCertifiable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	out := t.TempDir()
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t), Mode: "dry_run"})
	c := s.Cases[0]
	if c.Verdict.Verdict != evidence.VerdictNonCertifiable || s.Accepted() {
		t.Fatalf("dry_run case verdict %s, want non_certifiable", c.Verdict.Verdict)
	}
	run, evs := storedEvents(t, out, c.RunID)
	if run.Envelope.Mode != "dry_run" || run.Envelope.PolicyDigest != "" {
		t.Fatalf("envelope mode %q policy %q", run.Envelope.Mode, run.Envelope.PolicyDigest)
	}
	writes := 0
	for _, ev := range evs {
		if ev.Type != "tool_result" {
			continue
		}
		var o tool.Outcome
		if err := json.Unmarshal(ev.Payload, &o); err != nil {
			t.Fatal(err)
		}
		if o.Tool == "write_file" {
			writes++
			if !o.Simulated || o.Mode != tool.DryRun {
				t.Fatalf("a dry_run write is not labelled simulated: %+v", o)
			}
		}
	}
	if writes == 0 {
		t.Fatal("no write was proposed")
	}
	if st := checkStatus(c)["files"]; st != "failed" {
		t.Fatalf("files check %s: a dry run wrote files", st)
	}
}

// A team tool-call budget of one: the first write dispatches, the second is refused before dispatch
// (recorded as a refusal naming the exhausted budget, nothing written), and the case is rejected.
func TestTeamToolCallBudgetRefusesCallsBeyondIt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	sc := scriptedFor(t, caseLanguage(t))
	srv := scriptedProvider(t, sc.solution(sc.correct), sc.done)
	out := t.TempDir()
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: sc.language, BaseURL: srv.URL + "/v1", Model: "scripted-model",
		TeamToolCalls: 1})
	c := s.Cases[0]
	if c.Verdict.Verdict != "rejected" || checkStatus(c)["files"] != "failed" {
		t.Fatalf("verdict %s, files %s; want rejected with files missing", c.Verdict.Verdict, checkStatus(c)["files"])
	}
	_, evs := storedEvents(t, out, c.RunID)
	dispatched, refused := 0, 0
	for _, ev := range evs {
		switch ev.Type {
		case "tool_call":
			var in tool.Intent
			if err := json.Unmarshal(ev.Payload, &in); err != nil {
				t.Fatal(err)
			}
			if in.Dispatched {
				dispatched++
			}
		case "tool_result":
			var o tool.Outcome
			if err := json.Unmarshal(ev.Payload, &o); err != nil {
				t.Fatal(err)
			}
			if o.Source == "refusal" && strings.Contains(o.Error, policy.ErrBudgetExhausted.Error()) {
				refused++
			}
		}
	}
	if dispatched != 1 || refused == 0 {
		t.Fatalf("%d dispatched, %d refused for the budget; want exactly 1 dispatched and the rest refused", dispatched, refused)
	}
}

// --mode observe records an ask without enforcing it: the asked write runs, its outcome says the
// ask was not enforced, and the case is non_certifiable.
func TestObserveRecordsAsksWithoutEnforcingThem(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyPath, []byte("version: 1\ndefault: allow\nrules:\n  - id: writes\n    tools: [write_file]\n    decision: ask\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t), Mode: "observe", PolicyFile: policyPath})
	c := s.Cases[0]
	if c.Verdict.Verdict != evidence.VerdictNonCertifiable {
		t.Fatalf("observe case verdict %s, want non_certifiable", c.Verdict.Verdict)
	}
	_, evs := storedEvents(t, out, c.RunID)
	notEnforced := 0
	for _, ev := range evs {
		if ev.Type == "tool_result" {
			var o tool.Outcome
			if err := json.Unmarshal(ev.Payload, &o); err != nil {
				t.Fatal(err)
			}
			if o.Tool == "write_file" {
				if o.State != tool.StateSucceeded || o.PolicyNotEnforced != "ask" || o.Mode != tool.Observe {
					t.Fatalf("observed write outcome %+v", o)
				}
				notEnforced++
			}
		}
	}
	if notEnforced == 0 {
		t.Fatal("no write was observed")
	}
	if checkStatus(c)["files"] != "passed" {
		t.Fatalf("observe did not let the writes run: %+v", c.Checks)
	}
}

// A secret that happens to be a word of the records' own vocabulary (here "awaiting") does not
// corrupt the journal: states and sources stay readable, so replay and resume read them as written.
func TestRedactionLeavesTheRecordVocabularyReadable(t *testing.T) {
	r := policy.NewRedactor("awaiting", "s3cr3t-value-123")
	in := json.RawMessage(`{"state":"awaiting_approval","source":"approval","error":"awaiting s3cr3t-value-123","tool":"awaiting"}`)
	var got map[string]string
	if err := json.Unmarshal(redactJSON(r, in), &got); err != nil {
		t.Fatal(err)
	}
	if got["state"] != "awaiting_approval" || got["source"] != "approval" {
		t.Fatalf("vocabulary masked: %v", got)
	}
	if strings.Contains(got["error"], "s3cr3t") || strings.Contains(got["error"], "awaiting") || got["tool"] == "awaiting" {
		t.Fatalf("secrets not masked outside the vocabulary: %v", got)
	}
}
