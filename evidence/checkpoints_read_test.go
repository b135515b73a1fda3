package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckpointsReadsEveryStateVerified(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{})
	env := testEnvelope(ModeLive)
	if err := s.OpenRun(ctx, "r", env, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.AppendEvent(ctx, "r", Event{Type: "step", Payload: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var saved []Checkpoint
	for _, c := range []struct {
		seq   int64
		state string
	}{{0, `{"round":0}`}, {1, `{"round":1}`}, {3, `{"round":3}`}} {
		cp, err := s.SaveCheckpoint(ctx, "r", c.seq, json.RawMessage(c.state))
		if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, cp)
	}
	got, err := s.Checkpoints(ctx, "r")
	if err != nil || len(got) != 3 {
		t.Fatalf("Checkpoints = %+v, %v", got, err)
	}
	req := ResumeRequest{Tenant: env.Tenant, ManifestDigest: env.ManifestDigest, Mode: env.Mode, PolicyDigest: env.PolicyDigest, DatasetDigest: env.DatasetDigest}
	for i, cp := range got {
		one, err := s.LoadCheckpoint(ctx, "r", cp.Seq, req)
		if err != nil || cp.Seq != saved[i].Seq || cp.Hash != one.Hash || string(cp.State) != string(one.State) || cp.EventHash != one.EventHash {
			t.Errorf("checkpoint %d: %+v, LoadCheckpoint %+v (%v)", i, cp, one, err)
		}
	}
	if _, err := s.Checkpoints(ctx, "nope"); !errors.Is(err, ErrNoRun) {
		t.Errorf("unknown run: %v", err)
	}
	mustClose(t, s)
	for name, stmt := range map[string]string{
		"a state edited":       `UPDATE checkpoints SET state = '{"round":9}' WHERE seq = 1`,
		"the event it follows": `UPDATE events SET hash = '` + strings.Repeat("b", 64) + `' WHERE seq = 3`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "e.duckdb")
			copyFile(t, path, p)
			rawExec(t, p, stmt)
			ro := mustOpen(t, p, OpenOptions{ReadOnly: true})
			_, err := ro.Checkpoints(ctx, "r")
			var ce *CheckpointError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCheckpointCorrupt) {
				t.Fatalf("Checkpoints after %s: %v", name, err)
			}
		})
	}
}
