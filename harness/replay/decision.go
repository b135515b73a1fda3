package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/replay/tolerance"
)

// decision is a verdict reached before anything executes.
type decision struct {
	verdict, reason string
}

// tolerances returns the policy asked for (the recorded one when none is) and the recorded one; a
// recorded policy this build does not honour makes the replay non_certifiable (the asked policy is
// then the one named, or exact).
func (r *replayer) tolerances(target evidence.RunSummary, pre *decision) (asked, recorded tolerance.Policy, _ *decision) {
	recorded, err := tolerance.Lookup(target.Envelope.ReplayTolerance)
	asked = recorded
	if r.opts.Tolerance != "" {
		asked, _ = tolerance.Lookup(r.opts.Tolerance) // normalize checked it
	}
	if err != nil {
		if r.opts.Tolerance == "" {
			asked = tolerance.Exact
		}
		if pre == nil {
			pre = &decision{NonCertifiable, fmt.Sprintf("run %s was recorded under replay tolerance %q, which this build cannot honour: %v",
				target.RunID, target.Envelope.ReplayTolerance, err)}
		}
	}
	return asked, recorded, pre
}

// refusal compares the authority the replay is asked to run under — as each lineage run's case is
// rebuilt with it — with the recorded envelopes (R01, R05, R07).
func refusal(cases []*harness.ReplayCase, asked, recorded tolerance.Policy) *decision {
	if asked.ID() != recorded.ID() {
		if wider, more := asked.Wider(recorded); wider {
			return &decision{Refused, fmt.Sprintf("tolerance %s asked is wider than %s, the run's, which it bound before it executed "+
				"(%s also allows: %s); a tolerance is never widened after the outcome is known", asked.ID(), recorded.ID(), asked.ID(), strings.Join(more, ", "))}
		}
		return &decision{Refused, fmt.Sprintf("tolerance %s asked, the run was bound to %s: a replay compares under the tolerance bound before the run", asked.ID(), recorded.ID())}
	}
	for _, rc := range cases {
		was, now := rc.Run.Envelope, rc.Envelope
		var drift []string
		for _, f := range []struct{ name, was, now, fix string }{
			{"tenant", was.Tenant, now.Tenant, "--tenant"},
			{"mode", was.Mode, now.Mode, "--mode"},
			{"policy digest", was.PolicyDigest, now.PolicyDigest, "--policy FILE"},
			{"manifest digest", was.ManifestDigest, now.ManifestDigest, "the case as this build defines it changed since the run"},
			{"dataset digest", was.DatasetDigest, now.DatasetDigest, "the dataset as this build resolves it changed since the run"},
		} {
			if f.was != f.now {
				drift = append(drift, fmt.Sprintf("%s %s recorded, %s asked (%s)", f.name, labelEmpty(f.was), labelEmpty(f.now), f.fix))
			}
		}
		if len(drift) > 0 {
			return &decision{Refused, fmt.Sprintf("run %s: authority drift: %s", rc.Run.RunID, strings.Join(drift, "; "))}
		}
	}
	return nil
}

// certify loads every run of the lineage and decides whether its evidence can certify a replay
// (R03, R06, R11, R12); it returns the recordings, or why not.
func (r *replayer) certify(ctx context.Context, lineage []evidence.RunSummary, pol tolerance.Policy) ([]*recording, *decision, error) {
	for _, run := range lineage {
		v, ok := r.verified[run.RunID]
		if !ok {
			vs, err := r.store.VerifyWith(ctx, evidence.VerifyRequest{Runs: []string{run.RunID},
				Bindings: harness.BindingCheckers(filepath.Dir(r.opts.Store))})
			if err != nil || len(vs) != 1 {
				return nil, nil, fmt.Errorf("verify %s: %v", run.RunID, err)
			}
			v = vs[0]
		}
		if v.Status != evidence.VerifyOK && v.Status != evidence.VerifyUnfinalized {
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s does not verify (%s: %s)", v.RunID, v.Status, v.Detail)}, nil
		}
	}
	var recs []*recording
	for _, run := range lineage {
		switch {
		case run.Status != evidence.StatusFinalized:
			why := "it is not finalized (still open)"
			if run.Status == evidence.StatusInterrupted {
				why = "it was interrupted"
				if n := len(run.StatusChanges); n > 0 {
					why += " (" + run.StatusChanges[n-1].Reason + ")"
				}
			}
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s: %s: its trace is not a complete history to replay", run.RunID, why)}, nil
		case run.TerminalVersion < evidence.TerminalV3:
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s was finalized under terminal version %d; this build replays %s, which needs terminal version %d or later",
				run.RunID, run.TerminalVersion, Format, evidence.TerminalV3)}, nil
		case run.Envelope.Mode != evidence.ModeLive:
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s ran in mode %s: its effects were %s, not executed, and it certifies nothing to replay",
				run.RunID, run.Envelope.Mode, map[string]string{evidence.ModeDryRun: "simulated", evidence.ModeObserve: "observed without enforcing its policy"}[run.Envelope.Mode])}, nil
		}
		rec, err := load(ctx, r.store, run)
		if err != nil {
			return nil, nil, err
		}
		if len(rec.problems) > 0 {
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s: %s", run.RunID, strings.Join(rec.problems, "; "))}, nil
		}
		if missing := undeclared(run.Envelope.EntropySources, pol, len(rec.exchanges) > 0); len(missing) > 0 {
			return nil, &decision{NonCertifiable, fmt.Sprintf("run %s: observed nondeterminism with no declared entropy source: %s", run.RunID, strings.Join(missing, "; "))}, nil
		}
		recs = append(recs, rec)
	}
	return recs, nil, nil
}

// undeclared lists the entropy sources the trace shows that the envelope does not declare: the
// clock its events and the policy's ignored fields read, the run id its sessions and keys derive
// from, and the provider's responses.
func undeclared(declared []string, pol tolerance.Policy, exchanges bool) []string {
	need := map[string]string{"wall_clock": "every event is stamped by the clock", "run_id": "session ids and idempotency keys derive from the random run id"}
	for _, s := range pol.Sources() {
		if _, ok := need[s]; !ok {
			need[s] = "the tolerance policy leaves its readings out of the comparison"
		}
	}
	if exchanges {
		need["provider_responses"] = "the members' replies come from the provider"
	}
	var out []string
	for _, s := range slices.Sorted(func(yield func(string) bool) {
		for k := range need {
			if !yield(k) {
				return
			}
		}
	}) {
		if !slices.Contains(declared, s) {
			out = append(out, s+" ("+need[s]+")")
		}
	}
	return out
}
