package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// askTests is the policy that sends exec-1's write of its test file in language (double_test.go,
// test_double.py: caseFile) to an approver.
func askTests(language string) string {
	return `version: 1
default: allow
rules:
  - id: tests-need-approval
    tools: [write_file]
    members: [exec-1]
    paths: [` + caseFile(language, true) + `]
    decision: ask
`
}

// pausedRunIn runs case name in language with the ask policy into dir and returns the output
// directory, the policy path, the paused run's id and the matrix run's result.
func pausedRunIn(t *testing.T, dir, name, language string) (out, policyPath, runID string, r result) {
	t.Helper()
	out = filepath.Join(dir, "out")
	policyPath = filepath.Join(dir, "ask.yaml")
	if err := os.WriteFile(policyPath, []byte(askTests(language)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "matrix", "run", "--formations", name, "--policy", policyPath, "--out", out, "--format", "json",
		"--language", language)
	if r.code != 1 {
		t.Fatalf("paused run: exit %d, want 1\n%s", r.code, r.stderr)
	}
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	c := sum.Cases[0]
	if !c.Paused || c.Verdict.Verdict != "rejected" || !strings.Contains(strings.Join(c.Verdict.Reasons, " "), "assay resume "+c.RunID) {
		t.Fatalf("case %+v: want paused and rejected naming assay resume", c)
	}
	return out, policyPath, c.RunID, r
}

// approvedResume is a parallel case paused by the ask policy, approved with 'assay approve' and
// resumed with 'assay resume --format json' under the same policy by another name (the envelope
// binds its content, and so does the approval): shared, the evidence read-only.
type approvedResume struct {
	out, run, call string // the output directory, the paused run, the approved call
	policy         string // the policy file the resume ran under
	paused         result // of the paused assay matrix run --format json
	r              result // of assay resume --format json
}

var sharedApprovedResume memo[approvedResume]

func approvedResumeRun(t *testing.T) approvedResume {
	t.Helper()
	return sharedApprovedResume.get(t, func(t *testing.T) approvedResume {
		dir := fixtureDir("resume")
		out, policyPath, run, paused := pausedRunIn(t, dir, "parallel", caseLanguage(t))
		call, hash := awaiting(t, out, run)
		approvals := filepath.Join(out, "approvals.json")
		if r := runCLI(t, "approve", run, call, "--out", out, "--approver", "lead", "--payload-sha256", hash, "--disclose"); r.code != 0 {
			t.Fatalf("approve: exit %d: %s", r.code, r.stderr)
		}
		renamed := filepath.Join(dir, "renamed-policy.yaml")
		if b, err := os.ReadFile(policyPath); err != nil || os.WriteFile(renamed, b, 0o644) != nil {
			t.Fatal("copy the policy", err)
		}
		r := runCLI(t, "resume", run, "--out", out, "--policy", renamed, "--approvals", approvals, "--format", "json")
		return approvedResume{out: out, run: run, call: call, policy: renamed, paused: paused, r: r}
	})
}

// awaiting returns the call id and payload hash of run's one call awaiting approval.
func awaiting(t *testing.T, out, run string) (call, hash string) {
	t.Helper()
	r := runCLI(t, "effects", "--out", out, "--format", "json", run)
	var effs []map[string]any
	if err := json.Unmarshal(listOf(t, r.stdout, "effects"), &effs); err != nil {
		t.Fatalf("effects: %v\n%s%s", err, r.stdout, r.stderr)
	}
	for _, e := range effs {
		if e["state"] == "awaiting_approval" {
			if call != "" {
				t.Fatalf("two calls await approval: %v", effs)
			}
			call, hash = e["call_id"].(string), e["payload_sha256"].(string)
		}
	}
	if call == "" {
		t.Fatalf("no call awaits approval in %s: %v", run, effs)
	}
	return call, hash
}

// storeRuns is every run of the store in out (its evidence.duckdb, opened read-only), as
// evidence.Store.Runs lists them.
func storeRuns(t *testing.T, out string) []evidence.RunSummary {
	t.Helper()
	store, err := evidence.Open(context.Background(), filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs, err := store.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

func runsOf(t *testing.T, out string) map[string]evidence.RunSummary {
	t.Helper()
	m := map[string]evidence.RunSummary{}
	for _, r := range storeRuns(t, out) {
		m[r.RunID] = r
	}
	return m
}

func eventsOf(t *testing.T, out, run string) []evidence.StoredEvent {
	t.Helper()
	store, err := evidence.Open(context.Background(), filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	evs, err := store.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// A parallel case pauses when exec-1's test file needs an approval; exec-2 usually completes
// meanwhile. After 'assay approve', 'assay resume' (the same policy, the approval file) dispatches the
// approved write once, restores exec-2 without a provider request when it had completed (else
// continues it), continues exec-1 and is accepted.
func TestResumeAfterApprovalIsAccepted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	fx := approvedResumeRun(t)
	out, run, call, r := fx.out, fx.run, fx.call, fx.r
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var cr caseJSON
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
		t.Fatal(err)
	}
	if cr.Verdict.Verdict != "accepted" || cr.Paused || cr.Resumes != run {
		t.Fatalf("resumed case %+v", cr)
	}
	// The end-of-run summaries count the paused case as paused (its verdict is rejected), the
	// resumed one as accepted, with the resumed run's own tokens.
	if !strings.Contains(fx.paused.stderr, "summary:  1 case(s): 1 paused; wall ") {
		t.Fatalf("the paused run's summary:\n%s", fx.paused.stderr)
	}
	if !strings.Contains(r.stderr, "summary:  1 case(s): 1 accepted; wall ") || !strings.Contains(r.stderr, ": accepted in ") {
		t.Fatalf("the resume's progress and summary:\n%s", r.stderr)
	}
	if !cr.Tokens.Known() && !strings.Contains(r.stderr, "tokens:   unknown ("+cr.Tokens.Unknown) {
		t.Fatalf("the resumed run's tokens %+v, summary:\n%s", cr.Tokens, r.stderr)
	}
	runs := runsOf(t, out)
	if runs[cr.RunID].CorrectsRunID != run {
		t.Fatalf("the resumed run is not linked to %s: %+v", run, runs[cr.RunID])
	}
	evs := eventsOf(t, out, cr.RunID)
	var restored, exchanges2, dispatches int
	for _, ev := range evs {
		switch {
		case ev.Type == "member_restored" && ev.MemberID == "exec-2":
			restored++
		case ev.Type == "provider_exchange" && ev.MemberID == "exec-2":
			exchanges2++
		case ev.Type == "tool_call" && strings.HasSuffix(string(mustField(t, ev.Payload, "idempotency_key").([]byte)), ":"+call):
			if d, _ := mustField(t, ev.Payload, "dispatched").(bool); d {
				dispatches++
			}
		}
	}
	if evs[0].Type != "run_resumed" && evs[1].Type != "run_resumed" {
		t.Fatalf("run_resumed is not among the first events: %s, %s", evs[0].Type, evs[1].Type)
	}
	// Whether exec-2 completed before the pause took hold is timing (the pause is checked before
	// every request): a completed member is restored without a request, an unfinished one continues.
	completed := false
	for _, ev := range eventsOf(t, out, run) {
		completed = completed || ev.Type == "member_completed" && ev.MemberID == "exec-2"
	}
	switch {
	case completed && (restored != 1 || exchanges2 != 0):
		t.Fatalf("exec-2 completed before the pause: restored %d times, %d provider requests in the resumed run", restored, exchanges2)
	case !completed && (restored != 0 || exchanges2 == 0):
		t.Fatalf("exec-2 had not completed before the pause: restored %d times, %d provider requests in the resumed run", restored, exchanges2)
	}
	if dispatches != 1 {
		t.Fatalf("the approved call was dispatched %d times in the resumed run", dispatches)
	}
	if r := runCLI(t, "verify", "--out", out); r.code != 0 {
		t.Fatalf("verify after resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The resumed run's effects are the whole team run's: exec-2's writes from the first process and
	// the approved call, all succeeded, nothing left awaiting.
	r = runCLI(t, "effects", "--out", out, "--format", "json", cr.RunID)
	var effs []map[string]any
	if err := json.Unmarshal(listOf(t, r.stdout, "effects"), &effs); err != nil {
		t.Fatal(err)
	}
	members := map[string]int{}
	for _, e := range effs {
		if e["state"] != "succeeded" {
			t.Fatalf("effect of the resumed team run not succeeded: %v", e)
		}
		members[e["member_id"].(string)]++
	}
	if members["exec-1"] < 2 || members["exec-2"] < 2 {
		t.Fatalf("assay effects %s does not hold the whole team run's effects: %v", cr.RunID, members)
	}
}

func mustField(t *testing.T, payload json.RawMessage, k string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatal(err)
	}
	v := m[k]
	if s, ok := v.(string); ok {
		return []byte(s)
	}
	return v
}

// What resume refuses, before writing anything: another policy than the run's, a stale approval
// (bound to other arguments), a run already resumed, a completed run, a formation that does not
// resume durably.
func TestResumeRefusals(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	p := pausedSequentialGo(t)
	out, policyPath, run := p.out, p.policy, p.run
	before := len(runsOf(t, out))

	other := filepath.Join(filepath.Dir(policyPath), "other.yaml")
	if err := os.WriteFile(other, []byte(askTests("go")+"  - id: extra\n    tools: [read_file]\n    decision: allow\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "resume", run, "--out", out, "--policy", other)
	if r.code != 2 {
		t.Fatalf("resume under another policy: exit %d, want 2: %s", r.code, r.stderr)
	}
	oneLine(t, r, "policy_digest")
	if n := len(runsOf(t, out)); n != before {
		t.Fatalf("a refused resume wrote %d runs", n-before)
	}

	// Nothing given since the pause: no approval names the call it waits for. Refused, nothing written.
	r = runCLI(t, "resume", run, "--out", out, "--policy", policyPath)
	if r.code != 2 || !strings.Contains(r.stderr, "nothing it waits for was given") {
		t.Fatalf("resume with nothing approved: exit %d: %s", r.code, r.stderr)
	}
	if n := len(runsOf(t, out)); n != before {
		t.Fatalf("a resume with nothing approved wrote %d run(s)", n-before)
	}

	// A stale approval: granted for other arguments. Nothing dispatches; the run pauses again.
	call, hash := awaiting(t, out, run)
	approvals := filepath.Join(out, "approvals.json")
	if r := runCLI(t, "approve", run, call, "--out", out, "--approver", "lead", "--payload-sha256", hash); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	b, err := os.ReadFile(approvals)
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(b), hash, strings.Repeat("0", 64), 1)
	if stale == string(b) {
		t.Fatal("the approval file does not carry the payload hash")
	}
	if err := os.WriteFile(approvals, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "resume", run, "--out", out, "--policy", policyPath, "--approvals", approvals, "--format", "json")
	if r.code != 1 {
		t.Fatalf("resume with a stale approval: exit %d, want 1 (paused again)\n%s", r.code, r.stderr)
	}
	var cr caseJSON
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
		t.Fatal(err)
	}
	if !cr.Paused {
		t.Fatalf("a stale approval did not leave the run paused: %+v", cr)
	}
	if _, err := os.Stat(filepath.Join(out, "cases", run, "exec-1", caseFile("go", true))); !os.IsNotExist(err) {
		t.Fatalf("the call under a stale approval was dispatched: %v", err)
	}

	r = runCLI(t, "resume", run, "--out", out, "--policy", policyPath)
	if r.code != 2 || !strings.Contains(r.stderr, "already resumed by run "+cr.RunID) {
		t.Fatalf("second resume of %s: exit %d: %s", run, r.code, r.stderr)
	}
	// The call is approved for the team run: naming its first run and MEMBER:CALL_ID works too.
	call2, hash2 := awaiting(t, out, cr.RunID)
	if r := runCLI(t, "approve", run, "exec-1:"+call2, "--out", out, "--approver", "lead", "--payload-sha256", hash2); r.code != 0 {
		t.Fatalf("approve through the first run: exit %d: %s", r.code, r.stderr)
	}

	// A case whose formation does not resume: the formation is refused before anything of the run
	// is read but its manifest, so a debate run the team token budget stopped at its first request
	// (finalized, rejected; no member code built) is as good as an accepted one and far cheaper
	// (in Go, like the rest of this store: such a run measured 1.8 CPU-s in Go, 3.5 in Python).
	done := runCLI(t, "matrix", "run", "--formations", "debate", "--team-tokens", "1", "--out", out, "--format", "json", "--language", "go")
	var sum summaryJSON
	if err := json.Unmarshal([]byte(done.stdout), &sum); err != nil || len(sum.Cases) != 1 {
		t.Fatalf("%v: %s", err, done.stderr)
	}
	r = runCLI(t, "resume", sum.Cases[0].RunID, "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, "does not resume durably") {
		t.Fatalf("resume of a debate run: exit %d: %s", r.code, r.stderr)
	}

	// A completed run of a formation that resumes: the shared approved resume's run (parallel),
	// accepted, resumed under its own policy, on a copy of its output directory.
	fx := approvedResumeRun(t)
	var completed caseJSON
	if err := json.Unmarshal([]byte(fx.r.stdout), &completed); err != nil || fx.r.code != 0 || completed.Paused {
		t.Fatalf("the shared approved resume did not complete: exit %d %v\n%s", fx.r.code, err, fx.r.stderr)
	}
	doneOut := filepath.Join(t.TempDir(), "out")
	copyTree(t, fx.out, doneOut)
	r = runCLI(t, "resume", completed.RunID, "--out", doneOut, "--policy", fx.policy)
	if r.code != 2 || !strings.Contains(r.stderr, "nothing to resume") {
		t.Fatalf("resume of a completed run: exit %d: %s", r.code, r.stderr)
	}
}

// killedRemoteRun runs the sequential+remote case in its own process with exec-1's effect service
// PUT committing and never answering (hang_after_commit), kills the process with SIGKILL while the
// call waits, and returns the output directory (out in dir), the run, the committed effect's key and
// the effect service's database. Tests share one (killedRemoteCopy).
func killedRemoteRun(t *testing.T, dir string) (out, run, key, dbPath string) {
	t.Helper()
	out = filepath.Join(dir, "out")
	args, _ := json.Marshal([]string{"matrix", "run", "--formations", "sequential+remote", "--out", out,
		"--reference-fault", "exec-1:-1:hang_after_commit"})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "ASSAY_TEST_CLI="+string(args))
	var childErr strings.Builder
	child.Stderr = &childErr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dbPath = filepath.Join(out, "reference-effects.db")
	deadline := time.Now().Add(2 * time.Minute)
	for key == "" {
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatalf("no committed receipt appeared; child said: %s", childErr.String())
		}
		if _, err := os.Stat(dbPath); err == nil {
			db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro&_busy_timeout=1000")
			if err == nil {
				_ = db.QueryRow(`SELECT idempotency_key FROM effect_receipts LIMIT 1`).Scan(&key)
				db.Close()
			}
		}
		if key == "" {
			time.Sleep(20 * time.Millisecond) // polling the other process's database, not waiting for time to pass
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	cases, err := os.ReadDir(filepath.Join(out, "cases"))
	if err != nil || len(cases) != 1 {
		t.Fatalf("case directories: %v %v", cases, err)
	}
	run = cases[0].Name()
	if !strings.HasPrefix(key, run+":exec-1:") {
		t.Fatalf("receipt key %s is not exec-1's call of run %s", key, run)
	}
	return out, run, key, dbPath
}

// kill -9 between intent and outcome, then assay resume: the matrix runs in its own process; the
// reference effect service commits exec-1's remote_put and never answers (hang_after_commit), and
// the process is killed while the call waits. The intent is recorded, the outcome is not. assay
// resume (a new process) finds the run interrupted, makes the effect unknown from the journal,
// reconciles it through the receipt lookup (the effect service's database survived the kill), and
// continues exec-1 from its checkpoint without sending the PUT again; the case is accepted.
func TestKillBetweenIntentAndOutcomeThenResume(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs in subprocesses; skipped with -short")
	}
	k, key := killedRemoteCopy(t)
	out, run, dbPath := k.out, k.run, filepath.Join(k.out, "reference-effects.db")
	r := runCLI(t, "resume", run, "--out", out, "--format", "json")
	if r.code != 0 {
		t.Fatalf("resume after kill -9: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var cr caseJSON
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
		t.Fatal(err)
	}
	runs := runsOf(t, out)
	if runs[run].Status != evidence.StatusInterrupted {
		t.Fatalf("the killed run is %s, want interrupted", runs[run].Status)
	}
	if cr.Verdict.Verdict != "accepted" {
		t.Fatalf("resumed case %s: %+v", cr.Verdict.Verdict, cr.Verdict.Reasons)
	}
	// The effect: unknown on recovery, succeeded through the receipt, never dispatched again.
	var states []string
	for _, ev := range eventsOf(t, out, cr.RunID) {
		if ev.Type != "tool_call" && ev.Type != "tool_result" {
			continue
		}
		if string(mustField(t, ev.Payload, "idempotency_key").([]byte)) != key {
			continue
		}
		if ev.Type == "tool_call" {
			t.Fatalf("the killed call was dispatched again: %s", ev.Payload)
		}
		states = append(states, string(mustField(t, ev.Payload, "state").([]byte))+"/"+string(mustField(t, ev.Payload, "source").([]byte)))
	}
	if strings.Join(states, ",") != "unknown/recovery,succeeded/reconciliation" {
		t.Fatalf("outcomes of %s in the resumed run: %v", key, states)
	}
	reader, err := reference.OpenEffectsReader(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	rc, found, err := reader.Receipt(context.Background(), key)
	if err != nil || !found || rc.Puts != 1 {
		t.Fatalf("receipt of %s: %+v found=%v err=%v; want exactly one PUT", key, rc, found, err)
	}
}
