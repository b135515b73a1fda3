package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// verify runs `assay verify` on the store at path with opts' other fields.
func verify(t *testing.T, path string, opts VerifyOptions) result {
	t.Helper()
	return call(t, "", func(ctx context.Context, io IOStreams) error {
		opts.IO, opts.Store = io, storeFlags{store: path}
		return runVerify(ctx, &opts)
	})
}

// sqlQuery runs `assay sql` on the store at path with opts' other fields.
func sqlQuery(t *testing.T, path string, opts SQLOptions) result {
	t.Helper()
	return call(t, "", func(ctx context.Context, io IOStreams) error {
		opts.IO, opts.Store = io, storeFlags{store: path}
		return runSQL(ctx, &opts)
	})
}

// Each tamper edits the database (or a payload file) directly; `assay verify`
// must report it with the right status and exit 1.
func TestVerifyCLIDetectsTampering(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, status string
		seq          string
		tamper       func(t *testing.T, path string)
	}{
		{"event payload", "tampered", "3", func(t *testing.T, path string) {
			rawSQL(t, path, `UPDATE events SET payload = '{"n":99}' WHERE run_id = 'run-x' AND seq = 3`)
		}},
		{"artifact payload file", "corrupt_payload", "-", func(t *testing.T, path string) {
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "artifacts", "sha256", "*", "*"))
			for _, m := range matches {
				os.Chmod(m, 0o644)
				data, _ := os.ReadFile(m)
				data[10] ^= 1
				if err := os.WriteFile(m, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"terminal hash", "tampered", "-", func(t *testing.T, path string) {
			rawSQL(t, path, `UPDATE runs SET terminal_hash = '`+strings.Repeat("c", 64)+`' WHERE run_id = 'run-x'`)
		}},
		{"deleted event", "tampered", "4", func(t *testing.T, path string) {
			rawSQL(t, path, `DELETE FROM events WHERE run_id = 'run-x' AND seq = 4`)
		}},
		{"reordered pair", "tampered", "2", func(t *testing.T, path string) {
			rawSQL(t, path, `UPDATE events SET seq = -2 WHERE run_id = 'run-x' AND seq = 2`,
				`UPDATE events SET seq = 2 WHERE run_id = 'run-x' AND seq = 3`,
				`UPDATE events SET seq = 3 WHERE run_id = 'run-x' AND seq = -2`)
		}},
		{"artifact payload file removed", "missing_payload", "-", func(t *testing.T, path string) {
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "artifacts", "sha256", "*", "*"))
			for _, m := range matches {
				os.Remove(m)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithRuns(t, t.TempDir(), "run-x")
			if r := verify(t, path, VerifyOptions{}); r.code != 0 {
				t.Fatalf("before tampering: exit %d %s", r.code, r.stderr)
			}
			tc.tamper(t, path)
			r := verify(t, path, VerifyOptions{})
			if r.code != 1 {
				t.Fatalf("exit %d, want 1: %s %s", r.code, r.stdout, r.stderr)
			}
			oneLine(t, r, "run-x "+tc.status)
			fields := strings.Fields(strings.Split(r.stdout, "\n")[1])
			if fields[1] != tc.status || fields[2] != tc.seq {
				t.Fatalf("row %q, want status %s first bad seq %s", fields, tc.status, tc.seq)
			}
		})
	}
}

func TestVerifyManifestDetectsAReplacedDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b")
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	if r := verify(t, path, VerifyOptions{Manifest: manifest, Write: true}); r.code != 0 || r.stderr != "wrote manifest "+manifest+" (unsigned): 2 runs pinned\n" {
		t.Fatalf("write manifest: %d %s", r.code, r.stderr)
	}
	if r := verify(t, path, VerifyOptions{Manifest: manifest}); r.code != 0 || strings.Count(r.stdout, "match") != 2 || !strings.Contains(r.stdout, "MANIFEST") {
		t.Fatalf("check manifest: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Replace the whole database with another that verifies on its own:
	// same run ids, different (consistent) content.
	other := t.TempDir()
	forged := storeWithEvents(t, other, 6, "run-a")
	if r := verify(t, forged, VerifyOptions{}); r.code != 0 {
		t.Fatalf("the forged store verifies on its own: %d", r.code)
	}
	r := verify(t, forged, VerifyOptions{Manifest: manifest, Format: "json"})
	if r.code != 1 {
		t.Fatalf("replaced database: exit %d, want 1 (%s)", r.code, r.stdout)
	}
	if !strings.Contains(r.stdout, `"manifest": "missing"`) {
		t.Errorf("run-b missing from the replaced store not reported: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, `"manifest": "differs"`) || !strings.Contains(r.stdout, "differs from the manifest") {
		t.Errorf("run-a's different terminal hash not reported: %s", r.stdout)
	}
	// A tampered store gets no manifest.
	rawSQL(t, path, `UPDATE events SET payload = '{"n":7}' WHERE run_id = 'run-a' AND seq = 1`)
	m2 := filepath.Join(t.TempDir(), "m2.json")
	if r := verify(t, path, VerifyOptions{Manifest: m2, Write: true}); r.code != 1 || !strings.Contains(r.stdout, "tampered") {
		t.Fatalf("manifest of a tampered store: exit %d, stdout %q (the runs that do not verify are shown)", r.code, r.stdout)
	} else {
		oneLine(t, r, "manifest refused: these do not verify: [run-a tampered]; manifest "+m2+" not written")
	}
	if _, err := os.Stat(m2); err == nil {
		t.Fatal("a manifest was written for a tampered store")
	}
	for _, c := range []struct {
		opts VerifyOptions
		want string
	}{
		{VerifyOptions{Write: true}, "--write needs --manifest FILE"},
		{VerifyOptions{Manifest: filepath.Join(dir, "absent.json")}, "no manifest at " + filepath.Join(dir, "absent.json")},
	} {
		r := verify(t, path, c.opts)
		if r.code != 2 {
			t.Errorf("%+v: exit %d, want 2", c.opts, r.code)
		}
		oneLine(t, r, c.want)
	}
}

func TestVerifyWaitsForTheWriter(t *testing.T) {
	out := t.TempDir()
	path := storeWithRuns(t, out, "run-a")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "ASSAY_TEST_HOLD_STORE="+path)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("holder: %q", line)
	}
	if r := verify(t, path, VerifyOptions{Wait: 50 * time.Millisecond}); r.code != 2 || !strings.Contains(r.stderr, "assay-test-holder") {
		t.Fatalf("short wait: exit %d %q", r.code, r.stderr)
	}
	done := make(chan result, 1)
	go func() { done <- verify(t, path, VerifyOptions{Wait: 2 * time.Minute}) }()
	select {
	case r := <-done:
		t.Fatalf("verify returned while the writer held the store: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	stdin.Close()
	r := <-done
	if r.code != 0 {
		t.Fatalf("verify after the writer left: exit %d %s", r.code, r.stderr)
	}
	_ = evidence.VerifyOK
}

// storeWithRejectedRun writes run-a and run-c (accepted) and, between them,
// run-b, whose required usage check is unknown, so the store rejects it.
func storeWithRejectedRun(t *testing.T, dir string) string {
	t.Helper()
	return copyOfTemplateStore(t, dir, "rejected", writeStoreWithRejectedRun)
}

// writeStoreWithRejectedRun writes storeWithRejectedRun's store through the API.
func writeStoreWithRejectedRun(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64)}
	for _, run := range []string{"run-a", "run-b", "run-c"} {
		if err := s.OpenRun(ctx, run, env, ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if _, err := s.AppendEvent(ctx, run, evidence.Event{Type: "step", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		usage := "passed"
		if run == "run-b" {
			usage = "unknown"
		}
		for _, c := range []evidence.Check{{Name: "tests", Required: true, Status: "passed"}, {Name: "usage", Required: true, Status: usage}} {
			if err := s.RecordCheck(ctx, run, c); err != nil {
				t.Fatal(err)
			}
		}
		fin, err := s.Finalize(ctx, run, evidence.Verdict{Verdict: "accepted"})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "rejected", false: "accepted"}[run == "run-b"]; fin.Verdict.Verdict != want {
			t.Fatalf("%s finalized %s, want %s", run, fin.Verdict.Verdict, want)
		}
	}
	return path
}

// The adversarial tester's first report: a rejected run erased from every
// table (or only from runs) left a store that verified ok.
func TestVerifyCLIFindsAnErasedRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		erase func(t *testing.T, path string)
		args  []string
		want  map[string]string // run id -> substring of its detail
	}{
		{"every row of the rejected run deleted", func(t *testing.T, path string) {
			stmts := []string{`DELETE FROM runs WHERE run_id = 'run-b'`}
			for _, tb := range runTables(t, path) {
				stmts = append(stmts, `DELETE FROM `+tb+` WHERE run_id = 'run-b'`)
			}
			rawSQL(t, path, stmts...)
		}, nil, map[string]string{"run-c": "admission 3: admission 2 is missing: the run admitted there was deleted"}},
		{"only the runs row deleted", func(t *testing.T, path string) {
			rawSQL(t, path, `DELETE FROM runs WHERE run_id = 'run-b'`)
		}, nil, map[string]string{"run-b": "run run-b is missing from runs, but rows for it remain in admissions (1), checks (2), envelopes (1), events (6), finalizations (1), verdicts (1)"}},
		{"only the runs row deleted, run named", func(t *testing.T, path string) {
			rawSQL(t, path, `DELETE FROM runs WHERE run_id = 'run-b'`)
		}, []string{"run-b"}, map[string]string{"run-b": "missing from runs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithRejectedRun(t, t.TempDir())
			if r := verify(t, path, VerifyOptions{}); r.code != 0 {
				t.Fatalf("before erasing: exit %d %s %s", r.code, r.stdout, r.stderr)
			}
			tc.erase(t, path)
			r := verify(t, path, VerifyOptions{Format: "json", Runs: tc.args})
			if r.code != 1 {
				t.Fatalf("exit %d, want 1: %s %s", r.code, r.stdout, r.stderr)
			}
			var got []evidence.RunVerification
			if err := json.Unmarshal(listOf(t, r.stdout, "runs"), &got); err != nil {
				t.Fatal(err)
			}
			byID := map[string]evidence.RunVerification{}
			for _, v := range got {
				byID[v.RunID] = v
			}
			for id, detail := range tc.want {
				if v := byID[id]; v.Status != "tampered" || !strings.Contains(v.Detail, detail) {
					t.Errorf("%s: %+v, want tampered with %q", id, v, detail)
				}
				oneLine(t, r, id+" tampered")
			}
			if tc.args == nil && byID["run-a"].Status != "ok" {
				t.Errorf("run-a: %+v, want ok", byID["run-a"])
			}
		})
	}
}

// runTables lists the tables with a run_id column other than runs.
func runTables(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM duckdb_columns() WHERE column_name = 'run_id' AND table_name <> 'runs'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if len(out) < 10 {
		t.Fatalf("only %d tables with run_id: %v", len(out), out)
	}
	return out
}

// The adversarial tester's second report: checks set to passed, the verdict
// to accepted and only the terminal hash recomputed verified ok.
func TestVerifyCLIFindsAForgedVerdict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := storeWithRejectedRun(t, t.TempDir())
	rawSQL(t, path, `UPDATE checks SET status = 'passed' WHERE run_id = 'run-b'`,
		`UPDATE verdicts SET verdict = 'accepted', reasons = [] WHERE run_id = 'run-b'`)
	// Recompute the terminal hash from what is stored now, with the public API.
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Run(ctx, "run-b")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "run-b")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.TerminalRecord(ctx, "run-b")
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != sum.TerminalVersion || rec.EventCount != int64(len(evs)) || rec.Verdict.Verdict != "accepted" {
		t.Fatalf("terminal record as stored: %+v", rec)
	}
	th, err := evidence.TerminalHash(rec)
	if err != nil {
		t.Fatal(err)
	}
	rawSQL(t, path, `UPDATE runs SET terminal_hash = '`+th+`' WHERE run_id = 'run-b'`)
	r := verify(t, path, VerifyOptions{})
	if r.code != 1 {
		t.Fatalf("forged verdict: exit %d, want 1: %s", r.code, r.stdout)
	}
	oneLine(t, r, "run-b tampered")
	for _, want := range []string{"check usage: status passed but its check_recorded event (seq 5) says unknown",
		"verdict accepted but its run_finalized event (seq 6) says rejected"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "terminal hash mismatch") {
		t.Errorf("the forger's terminal hash should match (only the chained events give it away):\n%s", r.stdout)
	}
}

func TestSQLWaitsForTheWriter(t *testing.T) {
	path := storeWithRuns(t, t.TempDir(), "run-a")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "ASSAY_TEST_HOLD_STORE="+path)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("holder: %q", line)
	}
	query := "SELECT count(*) AS runs FROM runs"
	r := sqlQuery(t, path, SQLOptions{Query: query})
	if r.code != 2 {
		t.Fatalf("no wait: exit %d %q", r.code, r.stderr)
	}
	oneLine(t, r, "assay-test-holder")
	if !strings.Contains(r.stderr, "--wait") {
		t.Errorf("the refusal does not point at --wait: %q", r.stderr)
	}
	if r := sqlQuery(t, path, SQLOptions{Query: query, Wait: 50 * time.Millisecond}); r.code != 2 || !strings.Contains(r.stderr, "assay-test-holder") {
		t.Fatalf("short wait: exit %d %q", r.code, r.stderr)
	}
	if r := sqlQuery(t, path, SQLOptions{Query: query, Wait: -time.Second}); r.code != 2 {
		t.Fatalf("negative wait: exit %d %q", r.code, r.stderr)
	} else {
		oneLine(t, r, "--wait -1s is negative")
	}
	done := make(chan result, 1)
	go func() { done <- sqlQuery(t, path, SQLOptions{Query: query, Wait: 2 * time.Minute, Format: "csv"}) }()
	select {
	case r := <-done:
		t.Fatalf("sql returned while the writer held the store: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	stdin.Close()
	r = <-done
	if r.code != 0 || strings.TrimSpace(r.stdout) != "runs\n1" {
		t.Fatalf("sql after the writer left: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// The defense is in the help; what the hashes cannot show, in the reference it points to.
func TestVerifyHelpNamesTheManifestDefense(t *testing.T) {
	r := runCLI(t, "verify", "--help")
	if r.code != 0 {
		t.Fatalf("verify --help: exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"admissions, finalizations and writer sessions", "check_recorded", "append a run",
		"kept elsewhere", "--manifest FILE --write", "--attestations DIR --pubkey KEY", "docs/cli.md"} {
		if !strings.Contains(oneSpaced(r.stdout), want) {
			t.Errorf("verify --help lacks %q", want)
		}
	}
	ref := cliReference(t, "## assay verify")
	for _, want := range []string{"check_recorded", "most recently admitted runs erased", "manifest kept elsewhere", "--manifest FILE --write"} {
		if !strings.Contains(oneSpaced(ref), want) {
			t.Errorf("docs/cli.md, assay verify, lacks %q", want)
		}
	}
}
