package evidence

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// envelopesBeforeV6 selects the envelope columns schemas 1 to 5 had from an
// attached store named src written through today's API.
const envelopesBeforeV6 = `SELECT * EXCLUDE (case_name, invocation_id, task_name, repeat_index) FROM src.envelopes`

// downgradeToV5Columns drops the envelope columns schemas v6 and v7 added
// (the caller sets schema_version).
func downgradeToV5Columns(t *testing.T, path string) {
	t.Helper()
	downgradeToV6Columns(t, path)
	rawExec(t, path, `ALTER TABLE envelopes DROP COLUMN case_name`, `ALTER TABLE envelopes DROP COLUMN invocation_id`)
}

// downgradeToV5 turns a store written through today's API, whose runs
// recorded neither case nor invocation, into one as schema v5 wrote it.
func downgradeToV5(t *testing.T, path string) {
	t.Helper()
	downgradeToV5Columns(t, path)
	rawExec(t, path, `UPDATE meta SET value = '5' WHERE key = 'schema_version'`)
}

// An envelope without case and invocation id hashes as it did before schema
// v6: the digest below was computed by the code of schema v5 for
// testEnvelope(ModeLive), so every run recorded before keeps its digest (and
// its checkpoints, admissions and terminal hashes, which cover it).
func TestEnvelopeDigestWithoutCaseIsUnchanged(t *testing.T) {
	const pinned = "d8d1d77da74c8e362cb6dc78028cf34a2905bdfbc9751f73d062e03b6e605f55"
	env := testEnvelope(ModeLive)
	if d, err := env.Digest(); err != nil || d != pinned {
		t.Fatalf("digest of a pre-v6 envelope = %s (%v), want %s", d, err, pinned)
	}
	withCase := env
	withCase.Case = "parallel+vote"
	withInv := env
	withInv.InvocationID = "inv-1"
	seen := map[string]string{pinned: "no case"}
	for name, e := range map[string]Envelope{"case": withCase, "invocation": withInv} {
		d, err := e.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[d]; ok {
			t.Fatalf("envelope with %s hashes like the one with %s: the digest does not bind it", name, prev)
		}
		seen[d] = name
	}
}

func TestEnvelopeRecordsCaseAndInvocation(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	defer mustClose(t, s)
	env := testEnvelope(ModeLive)
	env.Case, env.InvocationID = "sequential+remote", "inv-20261201t215000-0a1b2c3d4e5f"
	if err := s.OpenRun(ctx, "r1", env, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.OpenRun(ctx, "r0", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	bad := env
	bad.InvocationID = "inv 1/.."
	var fe *FieldError
	if err := s.OpenRun(ctx, "r2", bad, ""); !errors.As(err, &fe) || fe.Field != "invocation_id" {
		t.Fatalf("OpenRun with a malformed invocation id: %v, want a FieldError naming invocation_id", err)
	}
	got, err := s.Run(ctx, "r1")
	if err != nil || got.Envelope.Case != env.Case || got.Envelope.InvocationID != env.InvocationID {
		t.Fatalf("run r1 envelope %+v %v", got.Envelope, err)
	}
	if d, _ := env.Digest(); d != got.EnvelopeDigest {
		t.Fatalf("envelope digest %s, want %s", got.EnvelopeDigest, d)
	}
	old, err := s.Run(ctx, "r0")
	if err != nil || old.Envelope.Case != "" || old.Envelope.InvocationID != "" {
		t.Fatalf("run r0 envelope %+v %v", old.Envelope, err)
	}
	// A resume is a new invocation: only the case is compared.
	if _, err := s.SaveCheckpoint(ctx, "r1", 0, payload(`{}`)); err != nil {
		t.Fatal(err)
	}
	req := ResumeRequest{Tenant: env.Tenant, ManifestDigest: env.ManifestDigest, Mode: env.Mode, PolicyDigest: env.PolicyDigest, Case: env.Case}
	if _, err := s.LoadCheckpoint(ctx, "r1", -1, req); err != nil {
		t.Fatalf("resume under another invocation: %v", err)
	}
	req.Case = "parallel+vote"
	var me *EnvelopeMismatchError
	if _, err := s.LoadCheckpoint(ctx, "r1", -1, req); !errors.As(err, &me) || !strings.Contains(strings.Join(me.Fields, ";"), "case") {
		t.Fatalf("resume of another case: %v, want an EnvelopeMismatchError naming case", err)
	}
}

func TestMigrateV5AddsCaseAndInvocation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	s := mustOpen(t, path, OpenOptions{Command: "v5 writer"})
	if err := s.OpenRun(ctx, "a", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, "a", Event{Type: "step", Payload: payload(`{"run":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, "a", Verdict{Verdict: VerdictAccepted}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Run(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	downgradeToV5(t, path)
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open of a v5 store: %v, want *SchemaVersionError", err)
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 5 || len(res.Steps) != SchemaVersion-5 || !strings.Contains(res.Steps[0], "case_name") || len(res.Unverified()) != 0 {
		t.Fatalf("Migrate result %+v", res)
	}
	s = mustOpen(t, path, OpenOptions{})
	defer mustClose(t, s)
	after, err := s.Run(ctx, "a")
	if err != nil || after.Envelope.Case != "" || after.EnvelopeDigest != before.EnvelopeDigest || after.TerminalHash != before.TerminalHash {
		t.Fatalf("the v5 run changed: %+v %v", after, err)
	}
	env := testEnvelope(ModeLive)
	env.Case = "parallel+judge"
	if err := s.OpenRun(ctx, "b", env, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, "b"); err != nil || got.Envelope.Case != "parallel+judge" {
		t.Fatalf("a run after the migration: %+v %v", got.Envelope, err)
	}
}

// The version 1 fingerprint (runs before schema v6) is SHA-256 of the canonical
// {"assay","go","goarch","goos"}; an Environment without a version or vcs facts
// re-derives it, and version 2 is a different preimage.
func TestEnvironmentFingerprintVersions(t *testing.T) {
	v1 := Environment{Assay: "dev", Go: "go1.26.8", GOOS: "linux", GOARCH: "amd64"}
	b, err := v1.Canonical()
	if err != nil || string(b) != `{"assay":"dev","go":"go1.26.8","goarch":"amd64","goos":"linux"}` {
		t.Fatalf("version 1 preimage %s %v", b, err)
	}
	if fp, _ := v1.Fingerprint(); fp != FingerprintOf(b) || fp != digestOf(`{"assay":"dev","go":"go1.26.8","goarch":"amd64","goos":"linux"}`) {
		t.Fatalf("version 1 fingerprint %s", fp)
	}
	dirty := true
	v2 := v1
	v2.FingerprintVersion, v2.VCSRevision, v2.VCSModified = EnvironmentFingerprintV2, "abc123", &dirty
	b2, _ := v2.Canonical()
	back, err := ParseEnvironment(b2)
	if err != nil || back.VCSRevision != "abc123" || back.VCSModified == nil || !*back.VCSModified {
		t.Fatalf("version 2 round trip %+v %v", back, err)
	}
	if again, _ := back.Canonical(); string(again) != string(b2) || FingerprintOf(b2) == FingerprintOf(b) {
		t.Fatalf("version 2 preimage %s does not round-trip or equals version 1's", again)
	}
}

// EventsOfRuns reads the same traces Events does, for many runs at once.
func TestEventsOfRunsMatchesEvents(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	defer mustClose(t, s)
	for _, id := range []string{"a", "b", "c"} {
		if err := s.OpenRun(ctx, id, testEnvelope(ModeLive), ""); err != nil {
			t.Fatal(err)
		}
		if id == "c" {
			continue // no events
		}
		for i := 0; i < 3; i++ {
			if _, err := s.AppendEvent(ctx, id, Event{Type: "step", Payload: payload(`{"run":%q,"i":%d}`, id, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := s.EventsOfRuns(ctx, []string{"a", "c", "none"})
	if err != nil || len(got) != 1 {
		t.Fatalf("EventsOfRuns: %v %v", got, err)
	}
	want, _ := s.Events(ctx, "a")
	if len(got["a"]) != 3 || got["a"][2].Hash != want[2].Hash || string(got["a"][1].Payload) != string(want[1].Payload) || got["a"][0].RunID != "a" {
		t.Fatalf("EventsOfRuns(a) = %+v, want %+v", got["a"], want)
	}
}
