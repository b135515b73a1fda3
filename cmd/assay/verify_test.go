package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// Each tamper edits the database (or a payload file) directly; `assay verify`
// must report it with the right status and exit 1.
func TestVerifyCLIDetectsTampering(t *testing.T) {
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
			if r := runCLI(t, "verify", "--store", path); r.code != 0 {
				t.Fatalf("before tampering: exit %d %s", r.code, r.stderr)
			}
			tc.tamper(t, path)
			r := runCLI(t, "verify", "--store", path)
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
	dir := t.TempDir()
	path := storeWithRuns(t, dir, "run-a", "run-b")
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	if r := runCLI(t, "verify", "--store", path, "--manifest", manifest, "--write"); r.code != 0 {
		t.Fatalf("write manifest: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "verify", "--store", path, "--manifest", manifest); r.code != 0 || strings.Count(r.stdout, "match") != 2 {
		t.Fatalf("check manifest: %d %q %s", r.code, r.stdout, r.stderr)
	}
	// Replace the whole database with another that verifies on its own:
	// same run ids, different (consistent) content.
	other := t.TempDir()
	forged := storeWithEvents(t, other, 6, "run-a")
	if r := runCLI(t, "verify", "--store", forged); r.code != 0 {
		t.Fatalf("the forged store verifies on its own: %d", r.code)
	}
	r := runCLI(t, "verify", "--store", forged, "--manifest", manifest, "--format", "json")
	if r.code != 1 {
		t.Fatalf("replaced database: exit %d, want 1 (%s)", r.code, r.stdout)
	}
	if !strings.Contains(r.stdout, `"Manifest": "missing"`) {
		t.Errorf("run-b missing from the replaced store not reported: %s", r.stdout)
	}
	if !strings.Contains(r.stdout, `"Manifest": "differs"`) || !strings.Contains(r.stdout, "differs from the manifest") {
		t.Errorf("run-a's different terminal hash not reported: %s", r.stdout)
	}
	// A tampered store gets no manifest.
	rawSQL(t, path, `UPDATE events SET payload = '{"n":7}' WHERE run_id = 'run-a' AND seq = 1`)
	m2 := filepath.Join(t.TempDir(), "m2.json")
	if r := runCLI(t, "verify", "--store", path, "--manifest", m2, "--write"); r.code != 1 {
		t.Fatalf("manifest of a tampered store: exit %d", r.code)
	}
	if _, err := os.Stat(m2); err == nil {
		t.Fatal("a manifest was written for a tampered store")
	}
	for _, args := range [][]string{
		{"verify", "--store", path, "--write"},
		{"verify", "--store", path, "--manifest", filepath.Join(dir, "absent.json")},
	} {
		if r := runCLI(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
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
	if r := runCLI(t, "verify", "--store", path, "--wait", "50ms"); r.code != 2 || !strings.Contains(r.stderr, "assay-test-holder") {
		t.Fatalf("short wait: exit %d %q", r.code, r.stderr)
	}
	done := make(chan result, 1)
	go func() { done <- runCLI(t, "verify", "--store", path, "--wait", "2m") }()
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
