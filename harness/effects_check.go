package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// effectsCheck reads the run's recorded tool calls back from the store, folds them through the
// effect lifecycle (tool.Replay: an intent without an outcome is unknown), and asks the effect
// service's database — not the runtime — about every remote_put.
var effectsCheck = Check{
	Name: "effects",
	Doc: "no tool call's effect is left unknown (unknown means it may have committed: reconciliation required) or awaiting " +
		"approval (an unapproved action is unfinished work); every " +
		"remote_put the evidence says succeeded has a committed receipt for its idempotency key, for the same payload, sent " +
		"once, in the effect service's database (OUT/" + EffectsDBName + ", read directly); one the evidence says failed has none",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := lineageToolRecords(ctx, s)
		if err != nil {
			return statusUnknown, "tool records unavailable: " + err.Error(), nil
		}
		effs, err := tool.Replay(records, false)
		if err != nil {
			return statusFailed, "the recorded tool calls do not replay: " + err.Error(), nil
		}
		// What the mode did instead of executing or enforcing: a dry_run outcome that only
		// simulated the tool, an observe-mode call policy asked an approval for that ran without one.
		var simulatedCalls, notEnforced []string
		for _, r := range records {
			if o := r.Outcome; o != nil && o.Simulated {
				simulatedCalls = append(simulatedCalls, fmt.Sprintf("%s (%s)", o.IdempotencyKey, o.Tool))
			} else if o != nil && o.PolicyNotEnforced != "" {
				notEnforced = append(notEnforced, fmt.Sprintf("%s (%s, policy %s)", o.IdempotencyKey, o.Tool, o.PolicyNotEnforced))
			}
		}
		var unknown, awaiting, problems []string
		var firstUnknown tool.Effect
		var remote []tool.Effect
		simulated := 0
		for _, e := range effs {
			if e.State == effect.AwaitingApproval {
				awaiting = append(awaiting, fmt.Sprintf("%s (%s)", e.IdempotencyKey, e.Tool))
			}
			if e.State == effect.Unknown {
				if len(unknown) == 0 {
					firstUnknown = e
				}
				unknown = append(unknown, fmt.Sprintf("%s (%s)", e.IdempotencyKey, e.Tool))
			}
			if e.Tool == tool.RemotePutName && e.Dispatched {
				if e.Mode == tool.DryRun {
					simulated++ // simulated, never sent: no receipt to expect (and dry_run certifies nothing)
					continue
				}
				remote = append(remote, e)
			}
		}
		// Fail closed: every publishing member must have a remote_put the receipts can be checked
		// for; one whose effects cannot be recognised (a tool name the redactor masked, say) is
		// not taken as having published nothing to check.
		for _, m := range s.entry.Members {
			if !m.Publishes {
				continue
			}
			if !slices.ContainsFunc(remote, func(e tool.Effect) bool { return e.MemberID == m.ID }) && simulated == 0 {
				problems = append(problems, fmt.Sprintf("publishing member %s has no remote_put effect whose receipt can be checked", m.ID))
			}
		}
		ev := map[string]any{"effects": len(effs), "unknown": unknown}
		receipts, stray, lookupErr := remoteReceipts(ctx, s, effs, remote)
		if len(remote) > 0 {
			ev["remote_put"] = receipts
		}
		ev["unrecorded_receipts"] = stray
		for _, r := range receipts {
			if r.Problem != "" {
				problems = append(problems, r.IdempotencyKey+": "+r.Problem)
			}
		}
		if len(stray) > 0 {
			problems = append(problems, fmt.Sprintf("the effect service committed %d effect(s) no recorded intent of this run accounts for: %s",
				len(stray), strings.Join(stray, ", ")))
		}
		if lookupErr != nil {
			if len(unknown) == 0 && len(problems) == 0 {
				// Nothing contradicts the evidence, and nothing confirms it either.
				return statusUnknown, "remote_put receipts cannot be checked: " + lookupErr.Error(), ev
			}
			problems = append(problems, "and the rest cannot be checked: "+lookupErr.Error())
		}
		if len(unknown) > 0 {
			// The effect's intent is in the run that dispatched it (the first of a resumed lineage).
			problems = append([]string{fmt.Sprintf("reconciliation required: %d effect(s) unknown (may have committed): %s; "+
				"see 'assay effects %s --state unknown', resolve with 'assay reconcile %s %s --lookup' (or --outcome)",
				len(unknown), strings.Join(unknown, ", "), firstUnknown.RunID, firstUnknown.RunID, firstUnknown.IdempotencyKey)}, problems...)
		}
		if len(awaiting) > 0 {
			// An action policy asked about and nobody approved is unfinished work, whatever the
			// member said and whatever is on disk.
			problems = append(problems, fmt.Sprintf("%d call(s) still await approval: %s", len(awaiting), strings.Join(awaiting, ", ")))
		}
		ev["awaiting_approval"] = awaiting
		ev["simulated"], ev["not_enforced"] = simulatedCalls, notEnforced
		switch {
		case len(problems) > 0:
			return statusFailed, strings.Join(problems, "; "), ev
		case len(simulatedCalls) > 0:
			return statusSimulated, fmt.Sprintf("%d of %d effects only simulated (dry_run), none executed: %s", len(simulatedCalls), len(effs),
				strings.Join(simulatedCalls, ", ")), ev
		case len(notEnforced) > 0:
			return statusNotEnforced, fmt.Sprintf("%d call(s) ran without the approval policy asked for (observe mode records asks, does not enforce them): %s",
				len(notEnforced), strings.Join(notEnforced, ", ")), ev
		}
		detail := fmt.Sprintf("%d effects, none unknown, none awaiting approval", len(effs))
		if len(remote) > 0 {
			detail += fmt.Sprintf("; %d remote_put receipt(s) match the evidence", len(remote))
		}
		if simulated > 0 {
			detail += fmt.Sprintf("; %d remote_put simulated (dry_run), no receipt expected", simulated)
		}
		return statusPassed, detail, ev
	},
}

// lineageToolRecords returns the journal records of the run and, for a resumed run, of the runs it
// continues and their corrections, in creation order (the records Replay needs: an outcome
// recorded by a resume or a reconciliation belongs to an intent of an earlier run).
func lineageToolRecords(ctx context.Context, s *caseState) ([]tool.Record, error) {
	runs, err := s.store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return FamilyRecords(ctx, s.store, runs, s.runID)
}

// remoteReceipt is what the effects check found at the backend for one remote_put.
type remoteReceipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	State          string `json:"state"`
	Found          bool   `json:"receipt_found"`
	Reference      string `json:"reference,omitempty"`
	Puts           int64  `json:"puts,omitempty"`
	PayloadMatches bool   `json:"payload_matches,omitempty"`
	// Problem says why the evidence and the backend disagree; "" when they agree.
	Problem string `json:"problem,omitempty"`
}

// remoteReceipts looks up every remote_put of remote in the effect service's database of the run's
// output directory (the case directory is OUT/cases/<run>, DESIGN.md's layout), and lists the
// receipts no recorded effect accounts for (stray): every receipt under an idempotency key of this
// run's lineage ("{run_id}:…", tool.Call.Key) that is not the key of one of effs, and every receipt
// committed while the team ran under a key that names no team run of this matrix. A missing
// database is no receipts at all when nothing was published (remote is empty); an error means the
// database could not be read: no receipt is then asserted either way.
func remoteReceipts(ctx context.Context, s *caseState, effs, remote []tool.Effect) (out []remoteReceipt, stray []string, err error) {
	outDir := filepath.Dir(filepath.Dir(s.caseDir))
	db, err := OpenEffectsBackend(ctx, outDir)
	if errors.Is(err, reference.ErrNoEffectsDB) && len(remote) == 0 {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("effect service database: %w", err)
	}
	defer db.Close()
	for _, e := range remote {
		r := remoteReceipt{IdempotencyKey: e.IdempotencyKey, State: string(e.State)}
		rc, found, err := db.Receipt(ctx, e.IdempotencyKey)
		if err != nil {
			return out, nil, fmt.Errorf("effect service database: %w", err)
		}
		r.Found = found
		if found {
			r.Reference, r.Puts, r.PayloadMatches = rc.Reference, rc.Puts, rc.PayloadSHA256 == e.PayloadSHA256
		}
		switch {
		case e.State == effect.Succeeded && !found:
			r.Problem = "the evidence says remote_put succeeded, but the effect service has no receipt for it"
		case e.State == effect.Failed && found:
			r.Problem = fmt.Sprintf("the evidence says remote_put failed, but the effect service committed it (receipt %s)", rc.Reference)
		case found && !r.PayloadMatches:
			r.Problem = fmt.Sprintf("the effect service committed another payload under this key (sha256 %s, intent %s)", rc.PayloadSHA256, e.PayloadSHA256)
		case found && rc.Puts > 1:
			r.Problem = fmt.Sprintf("the effect service received %d PUTs for this key: the effect was sent more than once", rc.Puts)
		}
		out = append(out, r)
	}
	all, err := db.Receipts(ctx)
	if err != nil {
		return out, nil, fmt.Errorf("effect service database: %w", err)
	}
	recorded := map[string]bool{}
	for _, e := range effs {
		recorded[e.IdempotencyKey] = true
	}
	lineage := append([]string{s.runID}, s.priorRuns...)
	for _, rc := range all {
		if recorded[rc.IdempotencyKey] {
			continue
		}
		ours := slices.ContainsFunc(lineage, func(run string) bool { return strings.HasPrefix(rc.IdempotencyKey, run+":") })
		during := !rc.Time.Before(s.teamFrom) && !rc.Time.After(s.teamTo)
		if ours || (during && (s.ownsKey == nil || !s.ownsKey(rc.IdempotencyKey))) {
			stray = append(stray, fmt.Sprintf("%s (name %q, receipt %s, %s)", rc.IdempotencyKey, rc.Name, rc.Reference, rc.Time.Format(time.RFC3339Nano)))
		}
	}
	return out, stray, nil
}
