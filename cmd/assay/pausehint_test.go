package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hintLines returns the lines of a paused case's hint in stdout: its "- CALL ..." lines and its
// "then: ..." command.
func hintLines(t *testing.T, stdout string) (waits []string, then string) {
	t.Helper()
	i := strings.Index(stdout, "\npaused:   ")
	if i < 0 {
		t.Fatalf("no paused hint in:\n%s", stdout)
	}
	for _, l := range strings.Split(stdout[i+1:], "\n")[1:] {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "- "):
			waits = append(waits, l)
		case strings.HasPrefix(l, "then: "):
			return waits, strings.TrimPrefix(l, "then: ")
		}
	}
	t.Fatalf("the paused hint has no 'then:' line:\n%s", stdout)
	return nil, ""
}

// args splits a command line the hint printed ("assay resume RUN --out DIR ...") into the
// arguments after "assay"; the test's paths hold no spaces, so no quoting is involved.
func args(t *testing.T, line string) []string {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "assay" {
		t.Fatalf("%q is not an assay command line", line)
	}
	return f[1:]
}

// The paused hint names, for each call the run waits for as its recorded effects say, the step that
// resolves it — assay approve for a call awaiting approval, assay reconcile for an effect whose
// outcome is unknown, never the other — and the resume command line, which works as printed: it
// repeats no --policy, since resume takes the file the run recorded.
func TestThePausedHintNamesTheStepAndAResumeLineThatWorks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	t.Run("awaiting approval", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		out, pol := filepath.Join(dir, "out"), filepath.Join(dir, "ask.yaml")
		if err := os.WriteFile(pol, []byte(askExec2), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "matrix", "run", "--formations", "sequential", "--policy", pol, "--out", out, "--language", "go")
		waits, then := hintLines(t, r.stdout)
		run, call, hash := "", "", ""
		if m := regexp.MustCompile(`^paused:   (\S+) `).FindStringSubmatch(r.stdout[strings.Index(r.stdout, "paused:"):]); m != nil {
			run = m[1]
		}
		call, hash = awaiting(t, out, run)
		want := "- exec-2:" + call + " (write_file) awaits approval: assay approve " + run + " exec-2:" + call + " --out " + out + " --approver NAME"
		if len(waits) != 1 || waits[0] != want || strings.Contains(r.stdout, "reconcile") {
			t.Fatalf("hint %q, want exactly %q and no reconcile:\n%s", waits, want, r.stdout)
		}
		if then != "assay resume "+run+" --out "+out {
			t.Fatalf("resume line %q repeats what the run recorded, or lacks --out", then)
		}
		// The recorded policy file changed since: resume without --policy refuses, asking for it,
		// and writes nothing.
		if err := os.WriteFile(pol, []byte(askExec2+"# changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if res := runCLI(t, args(t, then)...); res.code != 2 || !strings.Contains(res.stderr, "changed since") ||
			!strings.Contains(res.stderr, "give the run's policy with --policy FILE") || strings.Count(res.stderr, "the run's policy file") != 1 {
			t.Fatalf("resume with the run's policy file changed: exit %d %s", res.code, res.stderr)
		}
		if err := os.WriteFile(pol, []byte(askExec2), 0o644); err != nil {
			t.Fatal(err)
		}
		// Another mode than the run's is refused, naming the field once and the run once.
		if res := runCLI(t, append(args(t, then), "--mode", "dry_run")...); res.code != 2 ||
			!strings.Contains(res.stderr, `differ from the run's in mode (run "live", request "dry_run")`) || strings.Count(res.stderr, run) != 1 {
			t.Fatalf("resume with another mode: exit %d %s", res.code, res.stderr)
		}
		approve := strings.Replace(strings.SplitN(waits[0], ": ", 2)[1], "NAME", "lead", 1)
		if a := runCLI(t, append(args(t, approve), "--payload-sha256", hash)...); a.code != 0 {
			t.Fatalf("%s: exit %d %s", approve, a.code, a.stderr)
		}
		if res := runCLI(t, args(t, then)...); res.code != 0 || !strings.Contains(res.stdout, "accepted") {
			t.Fatalf("%s, as the hint printed it: exit %d\n%s\n%s", then, res.code, res.stdout, res.stderr)
		}
	})
	t.Run("unknown outcome", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "out")
		// A tenant of its own: the resume line repeats none, since resume takes the run's.
		r := runCLI(t, "matrix", "run", "--formations", "sequential+remote", "--out", out, "--language", "go", "--tenant", "acme",
			"--reference-fault", "exec-1:1:http_500_after_commit")
		waits, then := hintLines(t, r.stdout)
		if len(waits) != 1 || !strings.Contains(waits[0], "(remote_put) has an unknown outcome: assay reconcile ") ||
			!strings.Contains(waits[0], " --lookup") || strings.Contains(r.stdout, "assay approve") {
			t.Fatalf("hint %q, want one reconcile --lookup and no approve:\n%s", waits, r.stdout)
		}
		reconcile := strings.SplitN(waits[0], ": ", 2)[1]
		reconcile = strings.TrimSpace(reconcile[:strings.Index(reconcile, " (or ")])
		if c := runCLI(t, args(t, reconcile)...); c.code != 0 {
			t.Fatalf("%s: exit %d %s", reconcile, c.code, c.stderr)
		}
		if strings.Contains(then, "--tenant") {
			t.Fatalf("the resume line %q repeats the tenant the run recorded", then)
		}
		if res := runCLI(t, args(t, then)...); res.code != 0 || !strings.Contains(res.stdout, "accepted") {
			t.Fatalf("%s, as the hint printed it: exit %d\n%s\n%s", then, res.code, res.stdout, res.stderr)
		}
	})
}

// Every call a paused member proposed in the turn that paused awaits approval at once, so that one
// round of approvals covers the turn: with every write sent to an approver, each member of the
// sequential case writes two files in its first turn, both are listed (and hinted) at the first
// pause, and one resume per member completes the case — where a call at a time took one resume
// per call. The approved writes run in the order proposed, each once.
func TestEveryCallOfAPausedTurnIsApprovedInOneRound(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs; skipped with -short")
	}
	dir := t.TempDir()
	out, pol := filepath.Join(dir, "out"), filepath.Join(dir, "ask-writes.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ndefault: allow\nrules:\n  - id: writes\n    access: [write]\n    decision: ask\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "matrix", "run", "--formations", "sequential", "--policy", pol, "--out", out, "--language", "go")
	run := regexp.MustCompile(`(?m)^paused:   (\S+) `).FindStringSubmatch(r.stdout)
	if run == nil {
		t.Fatalf("not paused:\n%s\n%s", r.stdout, r.stderr)
	}
	resumes, runs := 0, []string{run[1]}
	for current := run[1]; ; resumes++ {
		var effs []map[string]any
		e := runCLI(t, "effects", current, "--out", out, "--format", "json", "--state", "awaiting_approval")
		if err := json.Unmarshal(listOf(t, e.stdout, "effects"), &effs); err != nil {
			t.Fatal(err)
		}
		members := map[string]int{}
		for _, eff := range effs {
			members[eff["member_id"].(string)]++
			call := eff["member_id"].(string) + ":" + eff["call_id"].(string)
			if a := runCLI(t, "approve", current, call, "--out", out, "--approver", "lead", "--payload-sha256", eff["payload_sha256"].(string)); a.code != 0 {
				t.Fatalf("approve %s: exit %d %s", call, a.code, a.stderr)
			}
		}
		if len(effs) != 2 || len(members) != 1 {
			t.Fatalf("pause %d: %d calls of members %v await approval, want one member's two writes", resumes, len(effs), members)
		}
		res := runCLI(t, "resume", current, "--out", out, "--format", "json")
		var cr caseJSON
		if err := json.Unmarshal([]byte(res.stdout), &cr); err != nil {
			t.Fatalf("resume: exit %d %v\n%s", res.code, err, res.stderr)
		}
		runs = append(runs, cr.RunID)
		// The member's second write, approved with its first, is said to run when the member
		// reaches it, not to await approval.
		if !strings.Contains(res.stderr, "is approved; it runs when its member reaches it") || strings.Contains(res.stderr, "still awaits approval") {
			t.Fatalf("resume %d's progress:\n%s", resumes+1, res.stderr)
		}
		if !cr.Paused {
			if res.code != 0 || cr.Verdict.Verdict != "accepted" || resumes != 1 {
				t.Fatalf("after %d resumes: exit %d, verdict %s", resumes+1, res.code, cr.Verdict.Verdict)
			}
			break
		}
		if resumes > 2 {
			t.Fatal("still paused after 3 resumes")
		}
		current = cr.RunID
	}
	// Resuming the first run again names where its lineage ended, accepted: nothing is left.
	if res := runCLI(t, "resume", runs[0], "--out", out); res.code != 2 ||
		!strings.Contains(res.stderr, "its lineage ended in run "+runs[len(runs)-1]+", accepted: there is nothing left to resume") {
		t.Fatalf("resuming the first run again: exit %d %s", res.code, res.stderr)
	}
	// assay effects names the run that made each call and the one that dispatched it: exec-1's writes
	// were proposed by the first run and dispatched by the first resume; exec-2's were proposed by
	// the first resume and dispatched by the second.
	var all []map[string]any
	if err := json.Unmarshal(listOf(t, runCLI(t, "effects", "--out", out, "--format", "json").stdout, "effects"), &all); err != nil || len(all) != 4 {
		t.Fatalf("effects: %d %v", len(all), err)
	}
	want := map[string][2]string{"exec-1": {runs[0], runs[1]}, "exec-2": {runs[1], runs[2]}}
	for _, e := range all {
		w := want[e["member_id"].(string)]
		if e["run_id"] != runs[0] || e["proposed_in_run"] != w[0] || e["dispatched_in_run"] != w[1] {
			t.Errorf("effect %v %v: run_id %v, proposed in %v, dispatched in %v; want %s, %s, %s", e["member_id"], e["call_id"],
				e["run_id"], e["proposed_in_run"], e["dispatched_in_run"], runs[0], w[0], w[1])
		}
	}
	if table := runCLI(t, "effects", "--out", out).stdout; strings.Count(table, runs[1]+"  exec-2") != 2 || strings.Count(table, runs[0]+"  exec-1") != 2 {
		t.Errorf("the table's RUN column is not the run that made each call:\n%s", table)
	}
	// Each approved write ran once, in the order its member proposed it.
	rows := runCLI(t, "sql", "--out", out, "--format", "csv", `SELECT member_id, json_extract_string(payload, '$.call_id') FROM events
		WHERE type = 'tool_call' AND json_extract_string(payload, '$.dispatched') = 'true' ORDER BY run_id, seq`)
	proposed := runCLI(t, "sql", "--out", out, "--format", "csv", `SELECT member_id, json_extract_string(payload, '$.call_id') FROM events
		WHERE type = 'tool_call' AND run_id = '`+run[1]+`' OR (type = 'tool_call' AND member_id = 'exec-2' AND json_extract_string(payload, '$.dispatched') = 'false'
		AND run_id <> '`+run[1]+`') ORDER BY run_id, seq`)
	if rows.code != 0 || proposed.code != 0 {
		t.Fatalf("sql: %s %s", rows.stderr, proposed.stderr)
	}
	var order []string
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(proposed.stdout), "\n")[1:] {
		if !seen[l] {
			seen[l] = true
			order = append(order, l)
		}
	}
	if got := strings.Split(strings.TrimSpace(rows.stdout), "\n")[1:]; strings.Join(got, ";") != strings.Join(order, ";") || len(got) != 4 {
		t.Fatalf("dispatched %v, want each of the four writes once, in the order proposed %v", got, order)
	}
}
