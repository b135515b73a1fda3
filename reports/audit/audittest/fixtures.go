package audittest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// The stores the fixtures are built on without their hazard. Fixtures that name the same Base
// build the same store when clean, so a test may build it once and share it.
var (
	// liveCase is one clean, accepted live case run r1.
	liveCase = &Base{Name: "live case run", Build: func(t testing.TB, dir string) string {
		b := NewBuilder(t, dir)
		b.CaseRun("r1", Envelope(evidence.ModeLive), "", nil)
		return b.Close()
	}}
	// liveCaseTwoEffects is liveCase whose member makes a second effect c2, reconciled.
	liveCaseTwoEffects = &Base{Name: "live case run with a second effect", Build: func(t testing.TB, dir string) string {
		return caseWithSecondEffect(t, dir, "succeeded", nil)
	}}
	// resumed is a run r1 interrupted after a checkpoint and a run r2 resuming it under the same envelope.
	resumed = &Base{Name: "resumed run", Build: func(t testing.TB, dir string) string { return resume(t, dir, nil) }}
	// replayedExact is a case run r1 and an exact replay p1 of it under tolerance exact@1.
	replayedExact = &Base{Name: "exact replay", Build: func(t testing.TB, dir string) string {
		return replay(t, dir, "exact@1", "exact", nil)
	}}
	// replayedWithin is a case run r1 and a replay p1 within tolerance exact@1.
	replayedWithin = &Base{Name: "replay within tolerance", Build: func(t testing.TB, dir string) string {
		return replay(t, dir, "exact@1", "within_tolerance", nil)
	}}
	// memberRun is an accepted live run r1 whose member exec-1 made one provider exchange.
	memberRun = &Base{Name: "member run", Build: func(t testing.TB, dir string) string {
		b := NewBuilder(t, dir)
		env := Envelope(evidence.ModeLive)
		b.Open("r1", env, "")
		b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
		b.Event("r1", "member_started", "exec-1", map[string]any{"formation": env.Formation})
		b.Exchange("r1", "exec-1", 0)
		b.Event("r1", "member_completed", "exec-1", map[string]any{"formation": env.Formation})
		b.Checks("r1", CaseChecks...)
		b.Finalize("r1", evidence.VerdictAccepted)
		return b.Close()
	}}
	// oneExchange is an accepted live run r1 with one provider exchange and every case check.
	oneExchange = &Base{Name: "one exchange", Build: func(t testing.TB, dir string) string {
		return exchangeRun(t, dir, false, CaseChecks)
	}}
	// dryCase is a clean dry_run case run r1 (its verdict non-certifiable).
	dryCase = &Base{Name: "dry_run case run", Build: func(t testing.TB, dir string) string {
		b := NewBuilder(t, dir)
		b.CaseRun("r1", Envelope(evidence.ModeDryRun), "", nil)
		return b.Close()
	}}
	// twoCases is two clean live case runs r1 and r2.
	twoCases = &Base{Name: "two case runs", Build: func(t testing.TB, dir string) string {
		b := NewBuilder(t, dir)
		b.CaseRun("r1", Envelope(evidence.ModeLive), "", nil)
		b.CaseRun("r2", Envelope(evidence.ModeLive), "", nil)
		return b.Close()
	}}
	// reconciledResume is r1 ending its effect unknown, rejected; an operator's reconciliation
	// resolving it in correction run k1 (corrects r1); and r2 resuming r1: one effect family, clean.
	reconciledResume = &Base{Name: "reconciled resume", Build: func(t testing.TB, dir string) string {
		return unknownEffect(t, dir, true)
	}}
	// bigDeliverable is liveCase with a deliverable above the inline limit, stored as a file.
	bigDeliverable = &Base{Name: "live case run with a file-backed deliverable", Build: func(t testing.TB, dir string) string {
		b := NewBuilder(t, dir)
		b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
			_, err := b.Store.PutArtifact(b.ctx, "r1", "deliverable/exec-1/big.txt", "text/plain", bigDeliverableBytes)
			b.Must(err)
		})
		return b.Close()
	}}
)

// LiveCase is the store of one clean, accepted live case run r1 (audittest.Builder.CaseRun), the
// clean store of several fixtures.
func LiveCase() *Base { return liveCase }

// bigDeliverableBytes is 360 KB: above the inline limit, stored as a file.
var bigDeliverableBytes = bytes.Repeat([]byte("deliverable "), 30000)

// Fixtures returns one fixture per assessable rule's hazard (some rules have two), in rule order.
func Fixtures() []Fixture {
	return []Fixture{
		{Rule: "R01", Name: "resume under another policy digest", Clean: resumed, Hazard: func(t testing.TB, dir string) string {
			return resume(t, dir, func(e *evidence.Envelope) { e.PolicyDigest = Sum("weaker policy") })
		}},
		{Rule: "R01", Name: "replay under another tenant, not refused", Clean: replayedExact, Hazard: func(t testing.TB, dir string) string {
			return replay(t, dir, "exact@1", "exact", func(started map[string]any) { started["tenant"] = "tenant-b" })
		}},
		{Rule: "R02", Name: "accepted run without provider exchanges", Clean: memberRun, Hazard: func(t testing.TB, dir string) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			b.Open("r1", env, "")
			b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
			b.Event("r1", "member_started", "exec-1", map[string]any{"formation": env.Formation})
			b.Event("r1", "member_completed", "exec-1", map[string]any{"formation": env.Formation})
			b.Checks("r1", CaseChecks...)
			b.Finalize("r1", evidence.VerdictAccepted)
			return b.Close()
		}},
		{Rule: "R02", Name: "accepted run whose provider exchanges hold no response bytes", Clean: oneExchange, Hazard: func(t testing.TB, dir string) string {
			return exchangeRun(t, dir, true, CaseChecks)
		}},
		{Rule: "R03", Name: "live run whose effects were simulated, effects check passed", Clean: liveCaseTwoEffects, Hazard: func(t testing.TB, dir string) string {
			return caseWithSecondEffect(t, dir, "succeeded", map[string]any{"mode": "dry_run", "simulated": true})
		}},
		{Rule: "R04", Name: "replay run accepted although its replay verdict is mismatch", Clean: replayedExact, Hazard: func(t testing.TB, dir string) string {
			return replay(t, dir, "exact@1", "mismatch", nil)
		}},
		{Rule: "R04", Name: "dry_run run whose verdict was edited to accepted", Also: []string{"R12"}, Clean: dryCase, Tamper: func(t testing.TB, path string) {
			Exec(t, path, `UPDATE verdicts SET verdict = 'accepted' WHERE run_id = 'r1'`)
		}},
		{Rule: "R05", Name: "resume under another dataset digest", Clean: resumed, Hazard: func(t testing.TB, dir string) string {
			return resume(t, dir, func(e *evidence.Envelope) { e.DatasetDigest = Sum("dataset v2") })
		}},
		{Rule: "R06", Name: "run whose envelope declares no entropy source", Clean: liveCase, Hazard: func(t testing.TB, dir string) string {
			b := NewBuilder(t, dir)
			env := Envelope(evidence.ModeLive)
			env.EntropySources = nil
			b.CaseRun("r1", env, "", nil)
			return b.Close()
		}},
		{Rule: "R07", Name: "replay under a wider tolerance than the run bound", Clean: replayedWithin, Hazard: func(t testing.TB, dir string) string {
			return replay(t, dir, "volatile@1", "within_tolerance", nil)
		}},
		{Rule: "R08", Name: "accepted run without its usage check", Clean: oneExchange, Hazard: func(t testing.TB, dir string) string {
			return exchangeRun(t, dir, false, CaseChecks[:len(CaseChecks)-1])
		}},
		{Rule: "R09", Name: "an admission deleted from the store-wide chain", Also: []string{"R12"}, Clean: twoCases, Tamper: func(t testing.TB, path string) {
			Exec(t, path, `DELETE FROM admissions WHERE ordinal = 1`)
		}},
		{Rule: "R10", Name: "dispatched intent without an outcome", Clean: liveCaseTwoEffects, Hazard: func(t testing.TB, dir string) string {
			return caseWithSecondEffect(t, dir, "", nil)
		}},
		{Rule: "R10", Name: "an outcome for a key no intent names", Clean: liveCase, Hazard: func(t testing.TB, dir string) string {
			b := NewBuilder(t, dir)
			b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() {
				b.Event("r1", "tool_result", "exec-1", map[string]any{"call_id": "c9", "idempotency_key": "r1:exec-1:c9", "state": "succeeded",
					"receipt": map[string]any{"committed": true}})
			})
			return b.Close()
		}},
		{Rule: "R10", Name: "an unknown effect left unreconciled across a resume", Clean: reconciledResume, Hazard: func(t testing.TB, dir string) string {
			return unknownEffect(t, dir, false)
		}},
		{Rule: "R11", Name: "an inline artifact payload edited", Clean: liveCase, Tamper: func(t testing.TB, path string) {
			Exec(t, path, `UPDATE artifacts SET data = 'forged'::BLOB WHERE digest = (SELECT min(digest) FROM run_artifacts WHERE run_id = 'r1')`)
		}},
		{Rule: "R11", Name: "a payload file above the inline limit deleted", Clean: bigDeliverable, Tamper: func(t testing.TB, path string) {
			// evidence.Store.ArtifactPath's layout: <dir of db>/artifacts/sha256/<2 hex>/<62 hex>.
			d := Sum(string(bigDeliverableBytes))
			if err := os.Remove(filepath.Join(filepath.Dir(path), "artifacts", "sha256", d[:2], d[2:])); err != nil {
				t.Fatal(err)
			}
		}},
		{Rule: "R12", Name: "the last event of a finalized run deleted", Clean: liveCase, Tamper: func(t testing.TB, path string) {
			Exec(t, path, `DELETE FROM events WHERE run_id = 'r1' AND seq = (SELECT max(seq) FROM events WHERE run_id = 'r1')`)
		}},
	}
}

// caseWithSecondEffect is a live case run r1 whose member makes a second effect c2 with outcome
// ("" for none) and the outcome's extra payload fields.
func caseWithSecondEffect(t testing.TB, dir, outcome string, extra map[string]any) string {
	b := NewBuilder(t, dir)
	b.CaseRun("r1", Envelope(evidence.ModeLive), "", func() { b.ToolCall("r1", "exec-1", "c2", outcome, extra) })
	return b.Close()
}

// exchangeRun is an accepted live run r1 with one provider exchange and the given checks; with
// unbacked, the exchange event names request and response digests but no artifact holds them.
func exchangeRun(t testing.TB, dir string, unbacked bool, checks []string) string {
	b := NewBuilder(t, dir)
	b.Open("r1", Envelope(evidence.ModeLive), "")
	b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
	if unbacked {
		b.Event("r1", "provider_exchange", "exec-1", map[string]any{"seq": 0, "status": 200, "request_sha256": Sum("req"),
			"response_sha256": Sum("resp"), "usage": nil})
	} else {
		b.Exchange("r1", "exec-1", 0)
	}
	b.Checks("r1", checks...)
	b.Finalize("r1", evidence.VerdictAccepted)
	return b.Close()
}

// unknownEffect builds r1 ending its effect unknown, rejected, and r2 resuming r1; with reconciled,
// an operator's reconciliation resolves the effect in correction run k1 (corrects r1) before r2.
func unknownEffect(t testing.TB, dir string, reconciled bool) string {
	return resumeChain(t, dir, "unknown", reconciled, nil)
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

// resume builds a run r1 interrupted after a checkpoint and a run r2 resuming it; drift (may be nil)
// changes r2's envelope.
func resume(t testing.TB, dir string, drift func(*evidence.Envelope)) string {
	return resumeChain(t, dir, "succeeded", false, drift)
}

// resumeChain builds r1, whose effect c1 ends in state c1State, checkpointed and rejected; with
// reconciled, correction run k1 (corrects r1) records an operator's reconciliation of c1 as
// committed; then r2 resumes r1 from its checkpoint, with r1's envelope changed by drift (may be
// nil), and is accepted.
func resumeChain(t testing.TB, dir, c1State string, reconciled bool, drift func(*evidence.Envelope)) string {
	b := NewBuilder(t, dir)
	env := Envelope(evidence.ModeLive)
	b.Open("r1", env, "")
	b.Event("r1", "boundary_configured", "", map[string]any{"mode": "live"})
	b.Exchange("r1", "exec-1", 0)
	key := b.ToolCall("r1", "exec-1", "c1", c1State, nil)
	seq, hash := b.Checkpoint("r1")
	b.Checks("r1", "files")
	b.Finalize("r1", evidence.VerdictRejected)
	if reconciled {
		b.Open("k1", env, "r1")
		b.Event("k1", "tool_result", "exec-1", map[string]any{"call_id": "c1", "idempotency_key": key, "state": "succeeded",
			"tool": "write_file", "source": "reconciliation", "receipt": map[string]any{"committed": true}})
		b.Finalize("k1", evidence.VerdictNonCertifiable)
	}
	env2 := env
	if drift != nil {
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
