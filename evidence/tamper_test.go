package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixture is a finalized, accepted run written through the API.
type fixture struct {
	path        string
	runID       string
	smallDigest string
	largeDigest string
	largePath   string
	events      []StoredEvent
}

// finalizedRunCopy is buildFinalizedRun's store for verdict, written once per test binary and
// copied into a directory of t's own.
func finalizedRunCopy(t *testing.T, verdict string) fixture {
	t.Helper()
	var f fixture
	path := storeCopy(t, "buildFinalizedRun "+verdict, func(t *testing.T, path string) {
		finalizedRunFixtures.Store(verdict, buildFinalizedRunAt(t, path, verdict))
	})
	v, _ := finalizedRunFixtures.Load(verdict)
	f = v.(fixture)
	f.events = slices.Clone(f.events)
	// The template's paths, moved to the copy.
	f.largePath = filepath.Join(filepath.Dir(path), must(filepath.Rel(filepath.Dir(f.path), f.largePath)))
	f.path = path
	return f
}

// finalizedRunFixtures are the fixtures buildFinalizedRunAt returned for the templates, by verdict.
var finalizedRunFixtures sync.Map

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func buildFinalizedRun(t *testing.T, verdict string) fixture {
	t.Helper()
	return buildFinalizedRunAt(t, storePath(t), verdict)
}

func buildFinalizedRunAt(t *testing.T, path, verdict string) fixture {
	t.Helper()
	ctx := context.Background()
	f := fixture{path: path, runID: "run-tamper"}
	s := mustOpen(t, f.path, OpenOptions{Command: "assay matrix run"})
	if err := s.OpenRun(ctx, f.runID, testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if _, err := s.AppendEvent(ctx, f.runID, Event{Type: "step", MemberID: "m1", SessionID: "run-tamper-m1",
			Parent: int64(i - 1), Payload: payload(`{"step": %d, "tool": "write_file"}`, i)}); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.smallDigest, err = s.PutArtifact(ctx, f.runID, "cases/double.go", "text/x-go", []byte("package cases\n")); err != nil {
		t.Fatal(err)
	}
	if f.largeDigest, err = s.PutArtifact(ctx, f.runID, "provider/response/exec-1/0", "application/json", largeData(InlineLimit+100, 1)); err != nil {
		t.Fatal(err)
	}
	f.largePath = s.ArtifactPath(f.largeDigest)
	for _, c := range []Check{
		{Name: "files_exist", Required: true, Status: CheckPassed},
		{Name: "tests", Required: true, Status: CheckPassed, Evidence: json.RawMessage(`{"exit": 0}`)},
		{Name: "lint", Required: false, Status: CheckFailed},
	} {
		if err := s.RecordCheck(ctx, f.runID, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finalize(ctx, f.runID, Verdict{Verdict: verdict}); err != nil {
		t.Fatal(err)
	}
	if f.events, err = s.Events(ctx, f.runID); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	return f
}

func TestVerifyDetectsTampering(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name       string
		verdict    string // verdict requested when building the run
		tamper     func(t *testing.T, f fixture)
		wantStatus string
		wantSeq    int64
		wantDetail string // substring of Detail
	}{
		{"untouched", VerdictAccepted, func(*testing.T, fixture) {}, VerifyOK, 0, "terminal hash verified"},
		{"payload changed", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE events SET payload = '{"step":3,"tool":"delete_file"}' WHERE run_id = 'run-tamper' AND seq = 3`)
		}, VerifyTampered, 3, "event 3: hash mismatch"},
		{"payload changed and its hash recomputed", VerdictAccepted, func(t *testing.T, f fixture) {
			e := f.events[2]
			e.Payload = json.RawMessage(`{"step":3,"tool":"delete_file"}`)
			h, err := EventHash(e.PrevHash, e)
			if err != nil {
				t.Fatal(err)
			}
			rawExec(t, f.path, fmt.Sprintf(`UPDATE events SET payload = '%s', hash = '%s' WHERE run_id = 'run-tamper' AND seq = 3`, e.Payload, h))
		}, VerifyTampered, 4, "event 4: prev_hash does not link"},
		{"payload re-encoded in an equivalent non-canonical form", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE events SET payload = '{"tool": "write_file", "step": 2}' WHERE run_id = 'run-tamper' AND seq = 2`)
		}, VerifyTampered, 2, "not in the canonical form the store writes"},
		{"terminal hash changed", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE runs SET terminal_hash = '`+strings.Repeat("a", 64)+`'`)
		}, VerifyTampered, 0, "terminal hash mismatch"},
		{"event deleted", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `DELETE FROM events WHERE run_id = 'run-tamper' AND seq = 4`)
		}, VerifyTampered, 4, "event count 10 != 9"},
		{"last event (run_finalized) deleted", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `DELETE FROM events WHERE run_id = 'run-tamper' AND seq = 10`)
		}, VerifyTampered, 0, "no run_finalized event records the verdict; event count 10 != 9"},
		{"two events' seqs swapped", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path,
				`UPDATE events SET seq = -1 WHERE run_id = 'run-tamper' AND seq = 2`,
				`UPDATE events SET seq = 2 WHERE run_id = 'run-tamper' AND seq = 3`,
				`UPDATE events SET seq = 3 WHERE run_id = 'run-tamper' AND seq = -1`)
		}, VerifyTampered, 2, "event 2:"},
		{"event time changed", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE events SET time = time + INTERVAL 1 SECOND WHERE run_id = 'run-tamper' AND seq = 5`)
		}, VerifyTampered, 5, "event 5: hash mismatch"},
		{"event appended after finalize with a valid chain hash", VerdictAccepted, func(t *testing.T, f fixture) {
			last := f.events[len(f.events)-1]
			e := StoredEvent{RunID: f.runID, Seq: 11, Type: "step", Time: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Payload: json.RawMessage(`{}`)}
			h, err := EventHash(last.Hash, e)
			if err != nil {
				t.Fatal(err)
			}
			rawExec(t, f.path, fmt.Sprintf(`INSERT INTO events VALUES ('run-tamper', 11, 0, 'step', '', '', TIMESTAMP '2030-01-01 00:00:00', '{}', '%s', '%s')`, last.Hash, h))
		}, VerifyTampered, 0, "run_finalized event (seq 10) is not the last event (seq 11): events were added after finalization; event count 10 != 11"},
		{"rejected verdict flipped to accepted", VerdictRejected, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE verdicts SET verdict = 'accepted', reasons = []`)
		}, VerifyTampered, 0, "terminal hash mismatch"},
		{"failed optional check flipped to passed", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE checks SET status = 'passed' WHERE name = 'lint'`)
		}, VerifyTampered, 0, "terminal hash mismatch"},
		{"required check deleted", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `DELETE FROM checks WHERE name = 'tests'`)
		}, VerifyTampered, 0, "terminal hash mismatch"},
		{"envelope mode changed", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE envelopes SET mode = 'dry_run'`)
		}, VerifyTampered, 0, "envelope digest mismatch"},
		// Schema v7's columns: a report groups by them, so an edited task or repeat must not read as
		// what the run was bound to (the fixture's envelope has none: setting one is the edit).
		{"envelope task set", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE envelopes SET task_name = 'triple'`)
		}, VerifyTampered, 0, "envelope digest mismatch"},
		{"envelope repeat set", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE envelopes SET repeat_index = 2`)
		}, VerifyTampered, 0, "envelope digest mismatch"},
		{"run reopened", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE runs SET status = 'open'`)
		}, VerifyTampered, 0, "a status change on a finalized run"},
		{"artifact relinked", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE run_artifacts SET name = 'cases/other.go' WHERE name = 'cases/double.go'`)
		}, VerifyTampered, 0, "terminal hash mismatch"},
		{"large artifact file altered", VerdictAccepted, func(t *testing.T, f fixture) {
			data, err := os.ReadFile(f.largePath)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x01
			if err := os.Chmod(f.largePath, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f.largePath, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, VerifyCorruptPayload, 0, "artifact provider/response/exec-1/0: artifact corrupt"},
		{"large artifact file removed", VerdictAccepted, func(t *testing.T, f fixture) {
			if err := os.Remove(f.largePath); err != nil {
				t.Fatal(err)
			}
		}, VerifyMissingPayload, 0, "artifact provider/response/exec-1/0: artifact missing"},
		{"inline artifact altered", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `UPDATE artifacts SET data = 'package evil'::BLOB WHERE storage = 'inline'`)
		}, VerifyCorruptPayload, 0, "artifact cases/double.go: artifact corrupt"},
		// The artifacts row is covered by terminal hash version 5: its
		// deletion is tampering as well as a missing payload.
		{"artifact row deleted", VerdictAccepted, func(t *testing.T, f fixture) {
			rawExec(t, f.path, `DELETE FROM artifacts WHERE storage = 'inline'`)
		}, VerifyTampered, 0, "artifact cases/double.go: artifact missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := finalizedRunCopy(t, tc.verdict)
			tc.tamper(t, f)
			ro := mustOpen(t, f.path, OpenOptions{ReadOnly: true})
			vs, err := ro.Verify(ctx, f.runID)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			v := vs[0]
			t.Logf("Verify: %+v", v)
			if v.Status != tc.wantStatus || v.FirstBadSeq != tc.wantSeq || !strings.Contains(v.Detail, tc.wantDetail) {
				t.Errorf("Verify = %+v\nwant status %s, first bad seq %d, detail containing %q", v, tc.wantStatus, tc.wantSeq, tc.wantDetail)
			}
		})
	}
}
