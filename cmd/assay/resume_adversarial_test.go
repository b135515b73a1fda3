package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/assay-audit/assay/evidence"
)

// askExec2 sends exec-2's first write (its double.go) to an approver: exec-1 completes, exec-2
// pauses at that write, and once only (one resume completes the case).
const askExec2 = "version: 1\ndefault: allow\nrules:\n  - id: ask-exec2\n    members: [\"exec-2\"]\n    tools: [write_file]\n    paths: [double.go]\n    decision: ask\n"

// pausedSequential runs the sequential case in Go under askExec2 (plus extra flags) and returns the
// output directory, the policy path and the paused run.
func pausedSequential(t *testing.T, extra ...string) (out, pol, run string) {
	t.Helper()
	dir := t.TempDir()
	out, pol = filepath.Join(dir, "out"), filepath.Join(dir, "ask.yaml")
	if err := os.WriteFile(pol, []byte(askExec2), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, append([]string{"matrix", "run", "--formations", "sequential", "--policy", pol, "--out", out, "--format", "json",
		"--language", "go"}, extra...)...)
	var sum summaryJSON
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || len(sum.Cases) != 1 || !sum.Cases[0].Paused {
		t.Fatalf("want one paused case: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	return out, pol, sum.Cases[0].RunID
}

// approveAndResume approves whatever awaits and resumes until the team run stops pausing, and
// returns the last run's result.
func approveAndResume(t *testing.T, out, pol, run string) caseJSON {
	t.Helper()
	for i := 0; i < 6; i++ {
		call, hash := awaiting(t, out, run)
		if r := runCLI(t, "approve", run, call, "--out", out, "--approver", "lead", "--payload-sha256", hash); r.code != 0 {
			t.Fatalf("approve: exit %d: %s", r.code, r.stderr)
		}
		r := runCLI(t, "resume", run, "--out", out, "--policy", pol, "--approvals", filepath.Join(out, "approvals.json"), "--format", "json")
		var cr caseJSON
		if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
			t.Fatalf("resume: exit %d %v\n%s", r.code, err, r.stderr)
		}
		if !cr.Paused {
			return cr
		}
		run = cr.RunID
	}
	t.Fatal("still paused after 6 resumes")
	return caseJSON{}
}

func checkDetail(cr caseJSON, name string) (string, string) {
	for _, c := range cr.Checks {
		if c.Name == name {
			return c.Status, c.Detail
		}
	}
	return "not run", ""
}

// Deliverables placed in a member's directory by anything but the member's recorded writes — here
// by hand while the run is paused, for a member whose reply said "done" without writing — are not
// its work: the files check fails and the case is rejected.
func TestResumeRejectsDeliverablesNoRecordedWriteProduced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	out, pol, run := pausedSequential(t, "--reference-fault", `exec-1:0:replace_reply:{"status":"done","files":["double.go","double_test.go"]}`)
	exec1 := filepath.Join(out, "cases", run, "exec-1")
	files := map[string]string{
		"double.go":      "package double\n\nfunc Double[T int | float64](x T) T { return x + x }\n",
		"double_test.go": "package double\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(2) != 4 {\n\t\tt.Fatal(\"x\")\n\t}\n}\n",
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(exec1, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cr := approveAndResume(t, out, pol, run)
	status, detail := checkDetail(cr, "files")
	if cr.Verdict.Verdict == "accepted" || status != "failed" || !strings.Contains(detail, "exec-1/double.go (no recorded write produced it)") {
		t.Fatalf("hand-placed deliverables: verdict %s, files %s: %s", cr.Verdict.Verdict, status, detail)
	}
}

// A pause does not reset the team run's budgets: the resumed runs keep the first run's limits and
// what it consumed, so a case the token budget rejects without a pause is not accepted through one.
func TestResumeKeepsTheRunsBudgets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	out, pol, run := pausedSequential(t, "--team-tokens", "1200")
	cr := approveAndResume(t, out, pol, run)
	if cr.Verdict.Verdict == "accepted" {
		t.Fatalf("run %s accepted past the team run's --team-tokens 1200", cr.RunID)
	}
	for _, ev := range eventsOf(t, out, cr.RunID) {
		if ev.Type == "boundary_configured" {
			var b struct {
				TeamTokens int64 `json:"team_tokens"`
			}
			if err := json.Unmarshal(ev.Payload, &b); err != nil || b.TeamTokens != 1200 {
				t.Fatalf("the resumed run's budget: %s", ev.Payload)
			}
			return
		}
	}
	t.Fatal("the resumed run recorded no boundary configuration")
}

// A checkpoint whose state was rewritten in the store, with its own row hash recomputed, is not
// resumed from: the run no longer verifies and the state is not the one its chained checkpoint
// event names. Nothing is written. The forgery: exec-1, paused awaiting an approval for its test
// file, is made to have completed with both files.
func TestResumeRefusesATamperedCheckpoint(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	p := pausedSequentialGo(t)
	out, pol, run := p.out, p.policy, p.run
	db, err := sql.Open("duckdb", filepath.Join(out, "evidence.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	var state, eventHash, envelope string
	if err := db.QueryRow(`SELECT seq, CAST(state AS VARCHAR), coalesce(event_hash, '') FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`,
		run).Scan(&seq, &state, &eventHash); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT envelope_digest FROM runs WHERE run_id = ?`, run).Scan(&envelope); err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(state), &s); err != nil {
		t.Fatal(err)
	}
	forged := false
	for _, tv := range s["turns"].([]any) {
		turn := tv.(map[string]any)
		if turn["member_id"] != "exec-1" {
			continue
		}
		turn["status"] = "completed"
		delete(turn, "messages")
		delete(turn, "pending")
		res := turn["result"].(map[string]any)
		res["success"], res["output"] = true, `{"status":"done","files":["double.go","double_test.go"]}`
		delete(res, "paused")
		forged = true
	}
	if !forged {
		t.Fatal("no exec-1 turn in the checkpoint to forge")
	}
	b, _ := json.Marshal(s)
	h, err := evidence.CheckpointHash(run, seq, eventHash, envelope, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE checkpoints SET state = ?, hash = ? WHERE run_id = ? AND seq = ?`, string(b), h, run, seq); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := len(runsOf(t, out))
	r := runCLI(t, "resume", run, "--out", out, "--policy", pol)
	if r.code != 2 || !strings.Contains(r.stderr, "cannot be resumed") {
		t.Fatalf("resume from a forged checkpoint: exit %d: %s", r.code, r.stderr)
	}
	if n := len(runsOf(t, out)); n != before {
		t.Fatalf("a refused resume wrote %d run(s)", n-before)
	}
}

// A resume refused for its options (another mode) writes nothing, not even the case directory's
// scaffold: a file a member wrote stays as it was.
func TestRefusedResumeLeavesTheCaseDirectory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	p := pausedSequentialGo(t)
	out, pol, run := p.out, p.policy, p.run
	// A file in a member's directory that a refused resume must not rewrite (a resume scaffolds go.mod).
	gomod := filepath.Join(out, "cases", run, "exec-1", "go.mod")
	if err := os.WriteFile(gomod, []byte("module member/wrote/this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec2 := filepath.Join(out, "cases", run, "exec-2")
	if _, err := os.Stat(exec2); err != nil {
		t.Fatalf("the paused case has no exec-2 directory to remove: %v", err)
	}
	if err := os.RemoveAll(exec2); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "resume", run, "--out", out, "--policy", pol, "--mode", "dry_run")
	if r.code != 2 {
		t.Fatalf("resume with another mode: exit %d: %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(gomod); string(b) != "module member/wrote/this\n" {
		t.Fatalf("a refused resume rewrote %s: %q", gomod, b)
	}
	if _, err := os.Stat(exec2); !os.IsNotExist(err) {
		t.Fatalf("a refused resume recreated %s", exec2)
	}
}

// A file placed in a member's directory during a pause takes no part in the checks: the tests run
// on a copy of the member's proven deliverables alone, so a hand-placed TestMain that would run only
// its own empty test does not silence the member's tests.
func TestHandPlacedTestFilesTakeNoPartInTheTests(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	p := pausedSequentialGo(t) // exec-1 paused before its test file, its deliverable written
	out, pol, run := p.out, p.policy, p.run
	planted := "package double\n\nimport (\n\t\"flag\"\n\t\"os\"\n\t\"testing\"\n)\n\n" +
		"func TestMain(m *testing.M) {\n\tflag.Parse()\n\t_ = flag.Set(\"test.run\", \"^TestHandPlaced$\")\n\tos.Exit(m.Run())\n}\n\n" +
		"func TestHandPlaced(t *testing.T) {}\n"
	if err := os.WriteFile(filepath.Join(out, "cases", run, "exec-1", "zz_test.go"), []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	cr := approveAndResume(t, out, pol, run)
	log, err := os.ReadFile(filepath.Join(out, "cases", run, "exec-1.go-test.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "TestHandPlaced") || !strings.Contains(string(log), "TestDouble") {
		t.Fatalf("the tests ran the planted file or not the member's tests (verdict %s):\n%.2000s", cr.Verdict.Verdict, log)
	}
}

// A process killed after some dispatches and before its next checkpoint does not launder them: the
// resumed run charges the budget with every dispatched intent of the team run, so a case whose
// fourth write exceeds --team-tool-calls 3 is not accepted through a crash and a resume.
func TestCrashThenResumeKeepsTheToolCallLimit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs in subprocesses; skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "out")
	run := killMatrixAfter(t, out, []string{"--formations", "sequential", "--team-tool-calls", "3", "--reference-fault", "exec-1:1:slow"},
		"double.go", "double_test.go")
	r := runCLI(t, "resume", run, "--out", out, "--format", "json")
	var cr caseJSON
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
		t.Fatalf("resume: exit %d %v\n%s", r.code, err, r.stderr)
	}
	if cr.Verdict.Verdict == "accepted" {
		t.Fatalf("accepted past --team-tool-calls 3 through a crash and a resume")
	}
	dispatched := 0
	for _, id := range []string{run, cr.RunID} {
		for _, ev := range eventsOf(t, out, id) {
			if ev.Type == "tool_call" {
				if d, _ := mustField(t, ev.Payload, "dispatched").(bool); d {
					dispatched++
				}
			}
		}
	}
	if dispatched > 3 {
		t.Fatalf("%d dispatches across the team run under a limit of 3", dispatched)
	}
}

// An interrupted run has no terminal hash, so verify cannot see a checkpoint row deleted from it;
// resume still refuses to start from an older checkpoint than the run's last checkpoint event
// (it would ask the model again for turns that had ended and dispatched).
func TestResumeRefusesWhenTheLatestCheckpointIsGone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs in subprocesses; skipped with -short")
	}
	k, _ := killedRemoteCopy(t)
	out, run := k.out, k.run
	db, err := sql.Open("duckdb", filepath.Join(out, "evidence.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`DELETE FROM checkpoints WHERE run_id = ? AND seq = (SELECT max(seq) FROM checkpoints WHERE run_id = ?)`, run, run)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("deleted %d checkpoint rows", n)
	}
	db.Close()
	r := runCLI(t, "resume", run, "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, "latest checkpoint event") {
		t.Fatalf("resume from an older checkpoint: exit %d: %s", r.code, r.stderr)
	}
}

// A resume killed before it wrote its first checkpoint does not strand the team run: resuming that
// interrupted resume continues from the checkpoint it had started from, with what it did meanwhile
// (the approved write it dispatched) taken from its journal, not done again.
func TestResumeKilledBeforeItsFirstCheckpointCanBeResumed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs in subprocesses; skipped with -short")
	}
	p := pausedSequentialGo(t)
	out, policyPath, run := p.out, p.policy, p.run
	call, hash := awaiting(t, out, run)
	if r := runCLI(t, "approve", run, call, "--out", out, "--approver", "lead", "--payload-sha256", hash, "--disclose"); r.code != 0 {
		t.Fatalf("approve: %s", r.stderr)
	}
	// The new process's reference provider counts exec-1's requests from 0: its first one hangs.
	args, _ := json.Marshal([]string{"resume", run, "--out", out, "--policy", policyPath, "--reference-fault", "exec-1:0:slow"})
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "ASSAY_TEST_CLI="+string(args))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	approved := filepath.Join(out, "cases", run, "exec-1", caseFile("go", true))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(approved); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatal("the approved write never happened")
		}
		time.Sleep(20 * time.Millisecond) // polling the other process's output, not waiting for time to pass
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	var second string
	for id, r := range runsOf(t, out) {
		if r.CorrectsRunID == run {
			second = id
		}
	}
	if second == "" {
		t.Fatal("the killed resume left no run")
	}
	r := runCLI(t, "resume", second, "--out", out, "--policy", policyPath, "--format", "json")
	var cr caseJSON
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil {
		t.Fatalf("resume of the killed resume refused (the team run is stranded): exit %d %v\n%s", r.code, err, r.stderr)
	}
	// Where the kill landed decides the verdict: after the approved write's outcome was recorded the
	// case completes; between the write and its outcome the write is unknown and the run pauses for
	// reconciliation (never re-dispatched). Either way it is never accepted on a repeated write.
	if cr.Verdict.Verdict != "accepted" && !cr.Paused {
		t.Fatalf("resume of the killed resume: %s %v", cr.Verdict.Verdict, cr.Verdict.Reasons)
	}
	dispatches := 0
	for _, id := range []string{second, cr.RunID} {
		for _, ev := range eventsOf(t, out, id) {
			if ev.Type == "tool_call" && strings.HasSuffix(string(mustField(t, ev.Payload, "idempotency_key").([]byte)), ":"+call) {
				if d, _ := mustField(t, ev.Payload, "dispatched").(bool); d {
					dispatches++
				}
			}
		}
	}
	if dispatches != 1 {
		t.Fatalf("the approved call was dispatched %d times", dispatches)
	}
}
