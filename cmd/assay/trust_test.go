package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/testroot"
)

// snapshot maps every file under dir to the SHA-256 of its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, h := range after {
		if b, ok := before[p]; !ok {
			t.Errorf("%s created %s", what, p)
		} else if b != h {
			t.Errorf("%s changed %s", what, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s removed %s", what, p)
		}
	}
}

// copyTree is testroot.CopyTree, failing t on error.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := testroot.CopyTree(src, dst); err != nil {
		t.Fatal(err)
	}
}

// appendForgedRun appends, with the store's own code, a run copying run-a's
// shape: chained, checked, finalized accepted, so every hash of the store holds.
func appendForgedRun(t *testing.T, path, id string) {
	t.Helper()
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "a forger"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64)}
	if err := s.OpenRun(ctx, id, env, ""); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := s.AppendEvent(ctx, id, evidence.Event{Type: "step", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordCheck(ctx, id, evidence.Check{Name: "c", Required: true, Status: "passed"}); err != nil {
		t.Fatal(err)
	}
	if fin, err := s.Finalize(ctx, id, evidence.Verdict{Verdict: "accepted"}); err != nil || fin.Verdict.Verdict != "accepted" {
		t.Fatalf("forged run: %+v %v", fin, err)
	}
}

// A run appended by whoever can write the store, through assay's own code, passes every hash the
// store holds; a manifest kept elsewhere (strict, or final) and the signed attestations catch it.
func TestForgedAppendedRunIsCaughtByManifestAndAttestation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b")
	keys := t.TempDir()
	key := filepath.Join(keys, "assay.key")
	if r := runCLI(t, "keygen", "--out", key); r.code != 0 {
		t.Fatalf("keygen: %d %s", r.code, r.stderr)
	}
	atts := filepath.Join(keys, "attestations")
	if r := runCLI(t, "attest", "--store", path, "--key", key, "--dir", atts); r.code != 0 || strings.Count(r.stdout, "signed") != 2 {
		t.Fatalf("attest: %d %s %s", r.code, r.stdout, r.stderr)
	}
	signed, final := filepath.Join(keys, "manifest.json"), filepath.Join(keys, "final.json")
	if r := runCLI(t, "verify", "--store", path, "--manifest", signed, "--write", "--sign-key", key); r.code != 0 {
		t.Fatalf("write manifest: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "verify", "--store", path, "--manifest", final, "--write", "--final"); r.code != 0 {
		t.Fatalf("write final manifest: %d %s", r.code, r.stderr)
	}

	appendForgedRun(t, path, "run-forged")
	if r := runCLI(t, "verify", "--store", path); r.code != 0 {
		t.Fatalf("the forged run passes the store's own hashes (that is the point): exit %d %s", r.code, r.stdout)
	}
	r := runCLI(t, "verify", "--store", path, "--manifest", signed, "--pubkey", key+".pub")
	if r.code != 0 || !strings.Contains(r.stdout, "run-forged") || !strings.Contains(r.stdout, "added") {
		t.Fatalf("a non-final manifest lists the run added since: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "verify", "--store", path, "--manifest", signed, "--pubkey", key+".pub", "--strict")
	if r.code != 1 || !strings.Contains(r.stdout, "unexpected") || !strings.Contains(r.stderr, "run-forged") {
		t.Fatalf("strict: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "verify", "--store", path, "--manifest", final)
	if r.code != 1 || !strings.Contains(r.stdout, "is final") {
		t.Fatalf("a final manifest: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "verify", "--store", path, "--attestations", atts, "--pubkey", key+".pub")
	if r.code != 1 || !strings.Contains(r.stderr, "run-forged ok (attestation missing)") {
		t.Fatalf("attestations: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, run := range []string{"run-a", "run-b"} {
		if f := rowOf(r.stdout, run); len(f) < 4 || f[1] != "ok" || f[3] != "verified" {
			t.Errorf("%s is not shown verified: %s", run, r.stdout)
		}
	}
	// Signing the store again would sign the forgery: attest signs what the store holds, which is
	// why matrix run --sign-key signs each run as it is finalized.
}

// rowOf returns the fields of the table row whose first field is first.
func rowOf(table, first string) []string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

func editJSON(t *testing.T, path string, edit func(m *evidence.Manifest)) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m evidence.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	out := filepath.Join(t.TempDir(), "edited.json")
	data, _ = json.Marshal(m)
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// A manifest with an entry removed, an empty one, an unsigned one where a signature is required,
// or one signed with another key, is refused with a message that says so.
func TestVerifyRefusesUnusableManifests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b", "run-c")
	keys := t.TempDir()
	key, other := filepath.Join(keys, "a.key"), filepath.Join(keys, "b.key")
	for _, k := range []string{key, other} {
		if r := runCLI(t, "keygen", "--out", k); r.code != 0 {
			t.Fatal(r.stderr)
		}
	}
	plain, signed := filepath.Join(keys, "plain.json"), filepath.Join(keys, "signed.json")
	if r := runCLI(t, "verify", "--store", path, "--manifest", plain, "--write"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := runCLI(t, "verify", "--store", path, "--manifest", signed, "--write", "--sign-key", key); r.code != 0 {
		t.Fatal(r.stderr)
	}
	removed := editJSON(t, plain, func(m *evidence.Manifest) { m.Runs = append(m.Runs[:1], m.Runs[2:]...) })
	empty := editJSON(t, plain, func(m *evidence.Manifest) {
		m.Runs = []evidence.ManifestRun{}
		m.Checkpoint.Admissions = evidence.ChainHead{Head: evidence.ZeroHash}
	})
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"entry removed", []string{"--manifest", removed}, "admission 2 is not listed"},
		{"empty", []string{"--manifest", empty}, "pins no runs"},
		{"unsigned where a signature is required", []string{"--manifest", plain, "--pubkey", key + ".pub"}, "not signed"},
		{"signed, read without its key", []string{"--manifest", signed}, "give the public key"},
		{"signed with another key", []string{"--manifest", signed, "--pubkey", other + ".pub"}, "no valid signature"},
		{"a private key given as --pubkey", []string{"--manifest", signed, "--pubkey", key}, "is a private key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"verify", "--store", path}, tc.args...)...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2: %s %s", r.code, r.stdout, r.stderr)
			}
			oneLine(t, r, tc.want)
		})
	}
	// Removing an entry and rewriting the checkpoint to match makes a manifest of an older store:
	// the run then reads as added since, which --strict refuses.
	shorter := editJSON(t, plain, func(m *evidence.Manifest) {
		m.Runs = m.Runs[:2]
		m.Checkpoint.Admissions = evidence.ChainHead{Size: 2, Head: m.Runs[1].AdmissionHash}
	})
	if r := runCLI(t, "verify", "--store", path, "--manifest", shorter, "--strict"); r.code != 1 || !strings.Contains(r.stderr, "run-c") {
		t.Fatalf("a shortened manifest under --strict: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// An empty store gets no manifest.
	emptyStore := filepath.Join(t.TempDir(), "evidence.duckdb")
	s, err := evidence.Open(context.Background(), emptyStore, evidence.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if r := runCLI(t, "verify", "--store", emptyStore, "--manifest", filepath.Join(keys, "none.json"), "--write"); r.code != 1 {
		t.Fatalf("a manifest of an empty store: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(keys, "none.json")); err == nil {
		t.Fatal("a manifest of an empty store was written")
	}
}

// Structural damage is reported as damaged (exit 1) with the table and row, never as a raw driver
// error or bad input, and verify goes on with what it can read.
func TestVerifyNamesDamageAsDamage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		want   []string
	}{
		{"dropped table", func(t *testing.T, path string) { rawSQL(t, path, `DROP TABLE checks`) },
			[]string{"(store checks)", "the table is missing", "run-a", "damaged"}},
		{"duplicate row", func(t *testing.T, path string) {
			rawSQL(t, path, `CREATE TABLE verdicts_copy AS SELECT * FROM verdicts`, `INSERT INTO verdicts_copy SELECT * FROM verdicts WHERE run_id = 'run-a'`,
				`DROP TABLE verdicts`, `ALTER TABLE verdicts_copy RENAME TO verdicts`)
		}, []string{"(store verdicts run_id=run-a)", "a row was duplicated", "the table was rebuilt"}},
		{"extra table", func(t *testing.T, path string) { rawSQL(t, path, `CREATE TABLE notes (x VARCHAR)`) },
			[]string{"(store notes)", "not part of schema"}},
		{"truncated file", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, []string{"damaged", "truncated"}},
		{"corrupt block", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, _ := f.Stat()
			// Every block after the three 4 KiB headers: flip bytes past each block's checksum.
			for off := int64(3*4096 + 64); off < fi.Size(); off += 256 << 10 {
				buf := make([]byte, 64)
				if _, err := f.ReadAt(buf, off); err != nil {
					break
				}
				for i := range buf {
					buf[i] ^= 0xa5
				}
				if _, err := f.WriteAt(buf, off); err != nil {
					t.Fatal(err)
				}
			}
		}, []string{"damaged", "corrupt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := storeWithRuns(t, t.TempDir(), "run-a", "run-b")
			tc.damage(t, path)
			r := runCLI(t, "verify", "--store", path)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1: %s %s", r.code, r.stdout, r.stderr)
			}
			out := r.stdout + r.stderr
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, raw := range []string{"Catalog Error", "Binder Error"} {
				if strings.Contains(out, raw) {
					t.Errorf("a raw driver error reaches the user: %s", out)
				}
			}
			oneLine(t, r, "damaged")
		})
	}
}

// storeWithOpenRun is storeWithRuns plus a run left open by a writer that closed.
func storeWithOpenRun(t *testing.T, dir string) string {
	t.Helper()
	path := storeWithRuns(t, dir, "run-a")
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64)}
	if err := s.OpenRun(ctx, "run-left", env, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return path
}

// A refused command writes nothing: no writer session, no seal of the run left open, no lock file,
// the store byte-identical; readers never create a file.
func TestRefusalsAndReadersWriteNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := storeWithOpenRun(t, dir)
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, args := range [][]string{
		{"resume", "run-doesnotexist", "--out", dir},
		{"resume", "run-a", "--out", dir},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d, want 2: %s", args, r.code, r.stderr)
		}
		sameSnapshot(t, strings.Join(args, " "), before, snapshot(t, dir))
	}
	for _, args := range [][]string{
		{"verify", "--store", path},
		{"sql", "--store", path, "SELECT count(*) FROM runs"},
		{"verify", "--store", path, "--manifest", filepath.Join(t.TempDir(), "absent.json")},
	} {
		runCLI(t, args...)
		sameSnapshot(t, strings.Join(args, " "), before, snapshot(t, dir))
	}
	// The run left open is still open: only a writer that writes seals it.
	db, err := sql.Open("duckdb", path+"?access_mode=read_only")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status string
	var writers int
	if err := db.QueryRow(`SELECT status, (SELECT count(*) FROM writers) FROM runs WHERE run_id = 'run-left'`).Scan(&status, &writers); err != nil || status != "open" || writers != 2 {
		t.Fatalf("run-left %s, %d writer sessions, %v", status, writers, err)
	}
}

// A matrix run killed with SIGKILL mid-case leaves a run verify passes as interrupted, from then
// on: before any other writer, after the next writer seals it, and after a resume that links to it.
func TestKilledMatrixRunVerifiesAsInterrupted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end matrix runs in subprocesses; skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "out")
	run := killMatrixAfter(t, out, []string{"--formations", "sequential", "--reference-fault", "exec-1:1:slow"}, "double.go")

	before := snapshot(t, out)
	r := runCLI(t, "verify", "--out", out)
	if r.code != 0 || !strings.Contains(r.stdout, run+"  interrupted") || !strings.Contains(r.stdout, "no writer holds the store") {
		t.Fatalf("verify after the kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sameSnapshot(t, "verify", before, snapshot(t, out))

	r = runCLI(t, "resume", run, "--out", out, "--format", "json")
	var cr struct {
		RunID   string `json:"run_id"`
		Resumes string `json:"resumes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cr); err != nil || cr.Resumes != run {
		t.Fatalf("resume: exit %d %v %s %s", r.code, err, r.stdout, r.stderr)
	}
	r = runCLI(t, "verify", "--out", out)
	if r.code != 0 || !strings.Contains(r.stdout, run+"  interrupted") || !strings.Contains(r.stdout, "sealed by writer 2") {
		t.Fatalf("verify after the resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "sql", "--out", out, "--format", "json",
		`SELECT r.status, v.verdict, v.reasons[1] AS reason, (SELECT corrects_run_id FROM runs c WHERE c.run_id = '`+cr.RunID+`') AS resumed_by
		 FROM runs r JOIN verdicts v USING (run_id) WHERE run_id = '`+run+`'`)
	for _, w := range []string{`"status": "interrupted"`, `"verdict": "rejected"`, `"reason": "interrupted"`, `"resumed_by": "` + run + `"`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the interrupted run as the store shows it lacks %s: %s", w, r.stdout)
		}
	}
	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(report), "| interrupted |") || !strings.Contains(string(report), "**rejected** — interrupted;") {
		t.Errorf("the resume's report does not show the interrupted run: %v\n%s", err, report)
	}
}

func sqliteExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, st := range stmts {
		res, err := db.Exec(st)
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			t.Fatalf("%s changed nothing", st)
		}
	}
}

// Every column and file a verdict rests on is bound: an edit of a column that was outside every
// hash before schema 5, of the gateway's records or the effect service's receipts (or their loss)
// is caught; a case file on disk that differs from its artifact is noted, not failed.
func TestVerifyCatchesEditsOfEverythingAVerdictRestsOn(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a matrix case on the reference provider; skipped with -short")
	}
	src := filepath.Join(t.TempDir(), "out")
	language := caseLanguage(t)
	if r := runCLI(t, "matrix", "run", "--formations", "sequential+remote", "--out", src, "--language", language); r.code != 0 {
		t.Fatalf("matrix run: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "verify", "--out", src); r.code != 0 {
		t.Fatalf("verify before any edit: %d %s", r.code, r.stdout)
	}
	store := func(out string) string { return filepath.Join(out, "evidence.duckdb") }
	cases := []struct {
		name   string
		edit   func(t *testing.T, out string)
		code   int
		status string
		words  string
	}{
		{"runs.finalized_at", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE runs SET finalized_at = finalized_at + INTERVAL 1 SECOND`)
		}, 1, "tampered", "terminal hash mismatch"},
		{"runs.writer_id", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE runs SET writer_id = 7`)
		}, 1, "tampered", "writer 7, which is not recorded"},
		{"verdicts.decided_at", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE verdicts SET decided_at = decided_at - INTERVAL 1 HOUR`)
		}, 1, "tampered", "decided_at differs"},
		{"checks.recorded_at", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE checks SET recorded_at = recorded_at + INTERVAL 1 MINUTE WHERE name = 'tests'`)
		}, 1, "tampered", "recorded_at differs from the time of its check_recorded event"},
		{"writers.command", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE writers SET command = 'assay something else'`)
		}, 1, "tampered", "writer 1: hash mismatch"},
		{"writers.closed_at", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE writers SET closed_at = closed_at + INTERVAL 1 SECOND`)
		}, 1, "tampered", "closing hash mismatch"},
		{"writers row deleted", func(t *testing.T, out string) {
			rawSQL(t, store(out), `DELETE FROM writers`)
		}, 1, "tampered", "which is not recorded"},
		{"run_artifacts.linked_at", func(t *testing.T, out string) {
			rawSQL(t, store(out), `UPDATE run_artifacts SET linked_at = linked_at + INTERVAL 1 SECOND WHERE name = 'manifest.json'`)
		}, 1, "tampered", "terminal hash mismatch"},
		{"gateway record edited", func(t *testing.T, out string) {
			sqliteExec(t, filepath.Join(out, "gateway-usage.db"), `UPDATE requests SET completion_tokens = completion_tokens + 1 WHERE id = 2`)
		}, 1, "corrupt_payload", "gateway records differ"},
		{"gateway record's echoed session edited", func(t *testing.T, out string) {
			sqliteExec(t, filepath.Join(out, "gateway-usage.db"), `UPDATE requests SET echoed_session = 'another-session' WHERE id = 2`)
		}, 1, "corrupt_payload", "gateway records differ"},
		{"gateway record deleted", func(t *testing.T, out string) {
			sqliteExec(t, filepath.Join(out, "gateway-usage.db"), `DELETE FROM requests WHERE id = 3`)
		}, 1, "missing_payload", "records were deleted"},
		{"gateway database deleted", func(t *testing.T, out string) {
			if err := os.Remove(filepath.Join(out, "gateway-usage.db")); err != nil {
				t.Fatal(err)
			}
		}, 1, "missing_payload", "gateway records"},
		{"receipt edited", func(t *testing.T, out string) {
			sqliteExec(t, filepath.Join(out, "reference-effects.db"), `UPDATE effect_receipts SET puts = puts + 1`)
		}, 1, "corrupt_payload", "receipts records differ"},
		{"receipts database deleted", func(t *testing.T, out string) {
			if err := os.Remove(filepath.Join(out, "reference-effects.db")); err != nil {
				t.Fatal(err)
			}
		}, 1, "missing_payload", "receipts records"},
		{"case file edited on disk", func(t *testing.T, out string) {
			files, _ := filepath.Glob(filepath.Join(out, "cases", "*", "exec-1", caseFile(language, false)))
			if len(files) != 1 {
				t.Fatalf("case files %v", files)
			}
			if err := os.WriteFile(files[0], []byte("# edited\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, 0, "ok", "working copy differs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			copyTree(t, src, out)
			tc.edit(t, out)
			r := runCLI(t, "verify", "--out", out)
			if r.code != tc.code || !strings.Contains(r.stdout, "  "+tc.status+" ") || !strings.Contains(r.stdout, tc.words) {
				t.Fatalf("exit %d (want %d), want %s with %q:\n%s%s", r.code, tc.code, tc.status, tc.words, r.stdout, r.stderr)
			}
		})
	}
}

// killMatrixAfter runs `assay matrix run` with args in a child process writing to out, and SIGKILLs
// it as soon as the only case's exec-1 directory holds every one of files; it returns the run id.
func killMatrixAfter(t *testing.T, out string, args []string, files ...string) string {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"matrix", "run", "--out", out}, args...))
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "ASSAY_TEST_CLI="+string(argv))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var run string
	for run == "" {
		if time.Now().After(deadline) {
			_ = child.Process.Kill()
			t.Fatal("exec-1's writes never appeared")
		}
		if cases, err := os.ReadDir(filepath.Join(out, "cases")); err == nil && len(cases) == 1 {
			all := true
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(out, "cases", cases[0].Name(), "exec-1", f)); err != nil {
					all = false
				}
			}
			if all {
				run = cases[0].Name()
			}
		}
		if run == "" {
			time.Sleep(20 * time.Millisecond) // polling the other process's output, not waiting for time to pass
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	return run
}
