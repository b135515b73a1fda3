package evidence

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// downgradeToV6Columns drops the envelope columns schema v7 added (the
// caller sets schema_version).
func downgradeToV6Columns(t *testing.T, path string) {
	t.Helper()
	rawExec(t, path, `ALTER TABLE envelopes DROP COLUMN task_name`, `ALTER TABLE envelopes DROP COLUMN repeat_index`)
}

// An envelope without task and repeat hashes as it did before schema v7: the
// digest below was computed by the code of schema v6 for testEnvelope(ModeLive)
// with a case and an invocation id, so every v6 run keeps its digest; a task or
// a repeat index changes the digest (the digest binds them).
func TestEnvelopeDigestWithoutTaskOrRepeatIsUnchanged(t *testing.T) {
	const pinnedV6 = "be3e91f1dc143fd5c33b4e3c0854e2d87dd04580de6447406250fc5acd190c45"
	env := testEnvelope(ModeLive)
	env.Case, env.InvocationID = "parallel+vote", "inv-1"
	if d, err := env.Digest(); err != nil || d != pinnedV6 {
		t.Fatalf("digest of a v6 envelope = %s (%v), want %s", d, err, pinnedV6)
	}
	seen := map[string]string{pinnedV6: "neither"}
	for name, mut := range map[string]func(*Envelope){
		"task double":  func(e *Envelope) { e.Task = "double" },
		"task other":   func(e *Envelope) { e.Task = "sort" },
		"repeat 1":     func(e *Envelope) { e.Repeat = 1 },
		"repeat 2":     func(e *Envelope) { e.Repeat = 2 },
		"task+repeat2": func(e *Envelope) { e.Task, e.Repeat = "double", 2 },
	} {
		e := env
		mut(&e)
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

func TestEnvelopeRecordsTaskAndRepeat(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	defer mustClose(t, s)
	env := testEnvelope(ModeLive)
	env.Case, env.Task, env.Repeat = "sequential", "double", 2
	if err := s.OpenRun(ctx, "r1", env, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.OpenRun(ctx, "r0", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	bad := env
	bad.Repeat = -1
	var fe *FieldError
	if err := s.OpenRun(ctx, "r2", bad, ""); !errors.As(err, &fe) || fe.Field != "repeat" {
		t.Fatalf("OpenRun with a negative repeat: %v, want a FieldError naming repeat", err)
	}
	got, err := s.Run(ctx, "r1")
	if err != nil || got.Envelope.Task != "double" || got.Envelope.Repeat != 2 {
		t.Fatalf("run r1 envelope %+v %v", got.Envelope, err)
	}
	if d, _ := env.Digest(); d != got.EnvelopeDigest {
		t.Fatalf("envelope digest %s, want %s", got.EnvelopeDigest, d)
	}
	if old, err := s.Run(ctx, "r0"); err != nil || old.Envelope.Task != "" || old.Envelope.Repeat != 0 {
		t.Fatalf("run r0 envelope %+v %v", old.Envelope, err)
	}
	if _, err := s.SaveCheckpoint(ctx, "r1", 0, payload(`{}`)); err != nil {
		t.Fatal(err)
	}
	req := ResumeRequest{Tenant: env.Tenant, ManifestDigest: env.ManifestDigest, Mode: env.Mode, PolicyDigest: env.PolicyDigest,
		Case: env.Case, Task: env.Task, Repeat: env.Repeat}
	if _, err := s.LoadCheckpoint(ctx, "r1", -1, req); err != nil {
		t.Fatalf("resume of the same task and repeat: %v", err)
	}
	for field, mut := range map[string]func(*ResumeRequest){
		"task":   func(r *ResumeRequest) { r.Task = "sort" },
		"repeat": func(r *ResumeRequest) { r.Repeat = 1 },
	} {
		r := req
		mut(&r)
		var me *EnvelopeMismatchError
		if _, err := s.LoadCheckpoint(ctx, "r1", -1, r); !errors.As(err, &me) || !strings.HasPrefix(strings.Join(me.Fields, ";"), field+" ") {
			t.Fatalf("resume with another %s: %v, want an EnvelopeMismatchError naming %s", field, err, field)
		}
	}
}

func TestMigrateV6AddsTaskAndRepeat(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "evidence.duckdb")
	s := mustOpen(t, path, OpenOptions{Command: "v6 writer"})
	env := testEnvelope(ModeLive)
	env.Case, env.InvocationID = "sequential", "inv-1"
	if err := s.OpenRun(ctx, "a", env, ""); err != nil {
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
	downgradeToV6Columns(t, path)
	rawExec(t, path, `UPDATE meta SET value = '6' WHERE key = 'schema_version'`)
	if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open of a v6 store: %v, want *SchemaVersionError", err)
	}
	res, err := Migrate(ctx, path, OpenOptions{Command: "assay store migrate"})
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if res.From != 6 || len(res.Steps) != 1 || !strings.Contains(res.Steps[0], "task_name") || len(res.Unverified()) != 0 {
		t.Fatalf("Migrate result %+v", res)
	}
	s = mustOpen(t, path, OpenOptions{})
	defer mustClose(t, s)
	after, err := s.Run(ctx, "a")
	if err != nil || after.Envelope.Case != "sequential" || after.Envelope.Task != "" || after.Envelope.Repeat != 0 ||
		after.EnvelopeDigest != before.EnvelopeDigest || after.TerminalHash != before.TerminalHash {
		t.Fatalf("the v6 run changed: %+v %v", after, err)
	}
	env.Task, env.Repeat = "double", 3
	if err := s.OpenRun(ctx, "b", env, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Run(ctx, "b"); err != nil || got.Envelope.Task != "double" || got.Envelope.Repeat != 3 {
		t.Fatalf("a run after the migration: %+v %v", got.Envelope, err)
	}
}
