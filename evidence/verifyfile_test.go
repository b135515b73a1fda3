package evidence

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// storeWithRunsFile writes a store at dir/evidence.duckdb holding the named runs, each finalized
// accepted with events step events and one file-backed artifact, and returns its path.
func storeWithRunsFile(t *testing.T, dir string, events int, runs ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "evidence.duckdb")
	s := mustOpen(t, path, OpenOptions{Command: "test"})
	for _, run := range runs {
		if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= events; i++ {
			if _, err := s.AppendEvent(ctx, run, Event{Type: "step", Time: time.Unix(int64(i), 0).UTC(), Payload: payload(`{"n":%d}`, i)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.PutArtifact(ctx, run, "big.bin", "", append(largeData(InlineLimit+1, byte(len(run))), run...)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCheck(ctx, run, Check{Name: "c", Required: true, Status: "passed"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finalize(ctx, run, Verdict{Verdict: VerdictAccepted}); err != nil {
			t.Fatal(err)
		}
	}
	mustClose(t, s)
	return path
}

func TestVerifyFileReportsEachRunAndWhatFailed(t *testing.T) {
	ctx := context.Background()
	path := storeWithRunsFile(t, t.TempDir(), 5, "run-good", "run-bad")
	rep, err := VerifyFile(ctx, path, VerifyOptions{})
	if err != nil || len(rep.Results) != 2 || rep.Failures() != nil {
		t.Fatalf("untampered: %+v, failures %v, %v", rep.Results, rep.Failures(), err)
	}
	rawExec(t, path, `UPDATE events SET payload = '{"n":99}' WHERE run_id = 'run-bad' AND seq = 3`)
	rep, err = VerifyFile(ctx, path, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Failures(); len(got) != 1 || got[0] != "run-bad tampered at seq 3" {
		t.Fatalf("failures %q, want [run-bad tampered at seq 3]", got)
	}
	// Only the named run.
	rep, err = VerifyFile(ctx, path, VerifyOptions{Runs: []string{"run-good"}})
	if err != nil || len(rep.Results) != 1 || rep.Failures() != nil {
		t.Fatalf("run-good alone: %+v %v", rep, err)
	}
	if _, err := VerifyFile(ctx, path, VerifyOptions{Runs: []string{"run-none"}}); !errors.Is(err, ErrNoRun) {
		t.Fatalf("an unknown run: %v, want ErrNoRun", err)
	}
}

func TestVerifyFileWritesAndChecksAManifest(t *testing.T) {
	ctx := context.Background()
	path := storeWithRunsFile(t, t.TempDir(), 5, "run-a", "run-b")
	manifest := filepath.Join(t.TempDir(), "manifest.json")
	rep, err := VerifyFile(ctx, path, VerifyOptions{Manifest: manifest, WriteManifest: true})
	if err != nil || rep.ManifestRuns != 2 {
		t.Fatalf("write manifest: %+v %v", rep, err)
	}
	rep, err = VerifyFile(ctx, path, VerifyOptions{Manifest: manifest})
	if err != nil || rep.Failures() != nil {
		t.Fatalf("check manifest: %+v %v", rep, err)
	}
	for _, r := range rep.Results {
		if r.Manifest != ManifestMatch {
			t.Fatalf("%s: manifest %q, want match", r.RunID, r.Manifest)
		}
	}
	// Another database that verifies on its own, with the same run id and other content: the
	// manifest kept elsewhere shows the replacement.
	forged := storeWithRunsFile(t, t.TempDir(), 6, "run-a")
	if rep, err := VerifyFile(ctx, forged, VerifyOptions{}); err != nil || rep.Failures() != nil {
		t.Fatalf("the forged store verifies on its own: %+v %v", rep, err)
	}
	rep, err = VerifyFile(ctx, forged, VerifyOptions{Manifest: manifest})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RunVerification{}
	for _, r := range rep.Results {
		got[r.RunID] = r
	}
	if got["run-a"].Manifest != ManifestDiffers || !strings.Contains(got["run-a"].Detail, "differs from the manifest") ||
		got["run-b"].Manifest != ManifestMissing || got["run-b"].Status != VerifyTampered {
		t.Fatalf("replaced database: %+v", rep.Results)
	}
	// A tampered store gets no manifest, and the report still holds every result.
	rawExec(t, path, `UPDATE events SET payload = '{"n":7}' WHERE run_id = 'run-a' AND seq = 1`)
	m2 := filepath.Join(t.TempDir(), "m2.json")
	rep, err = VerifyFile(ctx, path, VerifyOptions{Manifest: m2, WriteManifest: true})
	if !errors.Is(err, ErrManifestRefused) || len(rep.Results) != 2 || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("manifest of a tampered store: %+v %v, want ErrManifestRefused with the results", rep, err)
	}
	if _, err := os.Stat(m2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a manifest was written for a tampered store: %v", err)
	}
}

func TestVerifyFileRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := storeWithRunsFile(t, dir, 2, "run-a")
	notJSON := filepath.Join(dir, "notes.json")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	otherFormat := filepath.Join(dir, "other.json")
	if err := os.WriteFile(otherFormat, []byte(`{"format":"something/2","runs":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		opts VerifyOptions
		want error
	}{
		{"write without a manifest", path, VerifyOptions{WriteManifest: true}, ErrInvalidArgument},
		{"missing manifest", path, VerifyOptions{Manifest: filepath.Join(dir, "absent.json")}, ErrBadManifest},
		{"manifest that is not JSON", path, VerifyOptions{Manifest: notJSON}, ErrBadManifest},
		{"manifest of another format", path, VerifyOptions{Manifest: otherFormat}, ErrBadManifest},
		{"no store", filepath.Join(dir, "none", "evidence.duckdb"), VerifyOptions{}, ErrNoStore},
		{"negative wait", path, VerifyOptions{Wait: -time.Second}, ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := VerifyFile(ctx, c.path, c.opts); !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("verifying a missing store created its directory: %v", err)
	}
	wantFieldError(t, func() error { _, err := VerifyFile(ctx, path, VerifyOptions{WriteManifest: true}); return err }(), ErrInvalidArgument, "write_manifest")
}
