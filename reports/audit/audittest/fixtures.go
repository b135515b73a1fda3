package audittest

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// Fixtures returns one fixture per assessable rule's hazard (some rules have two), in rule order.
func Fixtures() []Fixture {
	return []Fixture{
		{Rule: "R01", Name: "resume under another policy digest", Build: resume(func(e *evidence.Envelope) { e.PolicyDigest = Sum("weaker policy") })},
		{Rule: "R01", Name: "replay under another tenant, not refused", Build: func(t testing.TB, dir string, hazard bool) string {
			var drift func(map[string]any)
			if hazard {
				drift = func(started map[string]any) { started["tenant"] = "tenant-b" }
			}
			return replay(t, dir, "exact@1", "exact", drift)
		}},
		{Rule: "R02", Name: "accepted run without provider exchanges", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			b.Open("r1", env, "")
			b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
			b.Event("r1", "member_started", "exec-1", map[string]any{"formation": env.Formation})
			if !hazard {
				b.Exchange("r1", "exec-1", 0)
			}
			b.Event("r1", "member_completed", "exec-1", map[string]any{"formation": env.Formation})
			b.Checks("r1", CaseChecks...)
			b.Finalize("r1", evidence.VerdictAccepted)
			return b.Close()
		}},
		{Rule: "R02", Name: "accepted run whose provider exchanges hold no response bytes", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			b.Open("r1", env, "")
			b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
			if hazard {
				b.Event("r1", "provider_exchange", "exec-1", map[string]any{"seq": 0, "status": 200, "request_sha256": Sum("req"),
					"response_sha256": Sum("resp"), "usage": nil})
			} else {
				b.Exchange("r1", "exec-1", 0)
			}
			b.Checks("r1", CaseChecks...)
			b.Finalize("r1", evidence.VerdictAccepted)
			return b.Close()
		}},
		{Rule: "R03", Name: "live run whose effects were simulated, effects check passed", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
				extra := map[string]any{}
				if hazard {
					extra = map[string]any{"mode": "dry_run", "simulated": true}
				}
				b.ToolCall("r1", "exec-1", "c2", "succeeded", extra)
			})
			return b.Close()
		}},
		{Rule: "R04", Name: "replay run accepted although its replay verdict is mismatch", Build: func(t testing.TB, dir string, hazard bool) string {
			verdict := "exact"
			if hazard {
				verdict = "mismatch"
			}
			return replay(t, dir, "exact@1", verdict, nil)
		}},
		{Rule: "R04", Name: "dry_run run whose verdict was edited to accepted", Also: []string{"R12"}, Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeDryRun), "", nil)
			path := b.Close()
			if hazard {
				Exec(t, path, `UPDATE verdicts SET verdict = 'accepted' WHERE run_id = 'r1'`)
			}
			return path
		}},
		{Rule: "R05", Name: "resume under another dataset digest", Build: resume(func(e *evidence.Envelope) { e.DatasetDigest = Sum("dataset v2") })},
		{Rule: "R06", Name: "run whose envelope declares no entropy source", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			if hazard {
				env.EntropySources = nil
			}
			b.CaseRun("r1", env, "", nil)
			return b.Close()
		}},
		{Rule: "R07", Name: "replay under a wider tolerance than the run bound", Build: func(t testing.TB, dir string, hazard bool) string {
			tol := "exact@1"
			if hazard {
				tol = "volatile@1"
			}
			return replay(t, dir, tol, "within_tolerance", nil)
		}},
		{Rule: "R08", Name: "accepted run without its usage check", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			b.Open("r1", env, "")
			b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
			b.Exchange("r1", "exec-1", 0)
			checks := CaseChecks
			if hazard {
				checks = CaseChecks[:len(CaseChecks)-1]
			}
			b.Checks("r1", checks...)
			b.Finalize("r1", evidence.VerdictAccepted)
			return b.Close()
		}},
		{Rule: "R09", Name: "an admission deleted from the store-wide chain", Also: []string{"R12"}, Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", nil)
			b.CaseRun("r2", Envelope(evidence.ModeLive), "", nil)
			path := b.Close()
			if hazard {
				Exec(t, path, `DELETE FROM admissions WHERE ordinal = 1`)
			}
			return path
		}},
		{Rule: "R10", Name: "dispatched intent without an outcome", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
				outcome := "succeeded"
				if hazard {
					outcome = ""
				}
				b.ToolCall("r1", "exec-1", "c2", outcome, nil)
			})
			return b.Close()
		}},
		{Rule: "R10", Name: "an outcome for a key no intent names", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
				if hazard {
					b.Event("r1", "tool_result", "exec-1", map[string]any{"call_id": "c9", "idempotency_key": "r1:exec-1:c9", "state": "succeeded",
						"receipt": map[string]any{"committed": true}})
				}
			})
			return b.Close()
		}},
		{Rule: "R10", Name: "an unknown effect left unreconciled across a resume", Build: func(t testing.TB, dir string, hazard bool) string {
			// r1 ends its effect unknown and is rejected; without the hazard, an operator's reconciliation
			// resolves it in correction run k1 (corrects r1) before r2 resumes r1: one effect family, clean.
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			b.Open("r1", env, "")
			b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
			b.Exchange("r1", "exec-1", 0)
			key := b.ToolCall("r1", "exec-1", "c1", "unknown", nil)
			seq, hash := b.Checkpoint("r1")
			b.Checks("r1", "files")
			b.Finalize("r1", evidence.VerdictRejected)
			if !hazard {
				b.Open("k1", env, "r1")
				b.Event("k1", "tool_result", "exec-1", map[string]any{"call_id": "c1", "idempotency_key": key, "state": "succeeded",
					"tool": "write_file", "source": "reconciliation", "receipt": map[string]any{"committed": true}})
				b.Finalize("k1", evidence.VerdictNonCertifiable)
			}
			b.Open("r2", env, "r1")
			b.Event("r2", "run_resumed", "", map[string]any{"resumes_run_id": "r1", "team_run_id": "r1", "checkpoint_seq": seq, "checkpoint_hash": hash})
			b.Event("r2", "boundary_configured", "", map[string]any{"mode": "live"})
			b.Exchange("r2", "exec-1", 1)
			b.ToolCall("r2", "exec-1", "c2", "succeeded", nil)
			b.Checks("r2", CaseChecks...)
			b.Finalize("r2", evidence.VerdictAccepted)
			return b.Close()
		}},
		{Rule: "R11", Name: "an inline artifact payload edited", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", nil)
			path := b.Close()
			if hazard {
				Exec(t, path, `UPDATE artifacts SET data = 'forged'::BLOB WHERE digest = (SELECT min(digest) FROM run_artifacts WHERE run_id = 'r1')`)
			}
			return path
		}},
		{Rule: "R11", Name: "a payload file above the inline limit deleted", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			var digest string
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
				big := bytes.Repeat([]byte("deliverable "), 30000) // 360 KB: stored as a file
				d, err := b.Store.PutArtifact(b.ctx, "r1", "deliverable/exec-1/big.txt", "text/plain", big)
				b.Must(err)
				digest = d
			})
			path := b.Close()
			if hazard {
				if err := os.Remove(b.Store.ArtifactPath(digest)); err != nil {
					t.Fatal(err)
				}
			}
			return path
		}},
		{Rule: "R12", Name: "the last event of a finalized run deleted", Build: func(t testing.TB, dir string, hazard bool) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", nil)
			path := b.Close()
			if hazard {
				Exec(t, path, `DELETE FROM events WHERE run_id = 'r1' AND seq = (SELECT max(seq) FROM events WHERE run_id = 'r1')`)
			}
			return path
		}},
	}
}

// First returns the first fixture of rule; it fails the test when there is none.
func First(t testing.TB, rule string) Fixture {
	t.Helper()
	for _, f := range Fixtures() {
		if f.Rule == rule {
			return f
		}
	}
	t.Fatalf("no fixture for %s", rule)
	return Fixture{}
}

// resume builds a run r1 interrupted after a checkpoint and a run r2 resuming it; with hazard, r2's
// envelope is changed by drift.
func resume(drift func(*evidence.Envelope)) func(t testing.TB, dir string, hazard bool) string {
	return func(t testing.TB, dir string, hazard bool) string {
		b := NewBuilder(t, dir)
		env := Envelope(evidence.ModeLive)
		b.Open("r1", env, "")
		b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
		b.Exchange("r1", "exec-1", 0)
		b.ToolCall("r1", "exec-1", "c1", "succeeded", nil)
		seq, hash := b.Checkpoint("r1")
		b.Checks("r1", "files")
		b.Finalize("r1", evidence.VerdictRejected)
		env2 := env
		if hazard {
			drift(&env2)
		}
		b.Open("r2", env2, "r1")
		b.Event("r2", "run_resumed", "", map[string]any{"resumes_run_id": "r1", "team_run_id": "r1", "checkpoint_seq": seq, "checkpoint_hash": hash})
		b.Event("r2", "boundary_configured", "", map[string]any{"mode": "live"})
		b.Exchange("r2", "exec-1", 1)
		b.ToolCall("r2", "exec-1", "c2", "succeeded", nil)
		b.Checks("r2", CaseChecks...)
		b.Finalize("r2", evidence.VerdictAccepted)
		return b.Close()
	}
}

// replay builds a case run r1 and a replay run p1 of it under tolerance, whose replay_verdict says
// verdict and whose replay check passed (accepted); drift (may be nil) edits the authority its
// replay_started event records.
func replay(t testing.TB, dir, tolerance, verdict string, drift func(started map[string]any)) string {
	b := NewBuilder(t, dir)
	env := Envelope(evidence.ModeLive)
	b.CaseRun("r1", env, "", nil)
	renv := env
	renv.Provider, renv.BaseURL = "cassette", ""
	b.Open("p1", renv, "r1")
	started := map[string]any{"replays_run_id": "r1", "lineage": []string{"r1"}, "format": "assay-replay/1",
		"tolerance": tolerance, "tenant": env.Tenant, "mode": env.Mode, "policy_digest": env.PolicyDigest, "dataset_digest": env.DatasetDigest,
		"manifest_digest": env.ManifestDigest}
	if drift != nil {
		drift(started)
	}
	b.Event("p1", "replay_started", "", started)
	b.Exchange("p1", "exec-1", 0)
	b.ToolCall("p1", "exec-1", "c1", "succeeded", nil)
	// replay verify --checks re-runs the acceptance checks on the replay: check_completed events,
	// and no check rows (the replay run is accepted on its replay check).
	for _, name := range CaseChecks {
		b.Event("p1", "check_completed", "", map[string]any{"check": name, "required": true, "status": "passed", "detail": "re-derived on the replay"})
	}
	b.Event("p1", "replay_verdict", "", map[string]any{"verdict": verdict, "first_divergence": nil})
	b.Must(b.Store.RecordCheck(b.ctx, "p1", evidence.Check{Name: "replay", Required: true, Status: evidence.CheckPassed, Detail: fmt.Sprintf("replay %s", verdict)}))
	b.Finalize("p1", evidence.VerdictAccepted)
	return b.Close()
}
