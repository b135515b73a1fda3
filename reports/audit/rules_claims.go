package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/assay-audit/assay/evidence"
)

// caseChecks are the required acceptance checks of a matrix case run (docs/checks.md); a replay
// run's one required check is replayCheck (docs/replay.md). An accepted run lacking one of its
// kind's checks, required and passed, was accepted without that rule's coverage (R08).
var (
	caseChecks  = []string{"files", "tests", "oracle", "members", "formation", "effects", "sessions", "routing", "usage"}
	replayCheck = "replay"
)

// lineage returns the runs whose traces a run's execution spans, oldest first: the run and, through
// each run_resumed event, the runs it continues (read from the events, not the correction link).
func lineage(ctx context.Context, in *Input, runID string) ([]string, error) {
	var chain []string
	seen := map[string]bool{}
	for id := runID; id != "" && !seen[id] && in.Run(id) != nil; {
		seen[id] = true
		chain = append(chain, id)
		evs, err := in.Events(ctx, id)
		if err != nil {
			return nil, err
		}
		next := ""
		for _, ev := range evs {
			if ev.Type == "run_resumed" {
				next = str(payload(ev), "resumes_run_id")
				break
			}
		}
		id = next
	}
	slices.Reverse(chain)
	return chain, nil
}

// overAccepted evaluates check on every accepted run of the selection; add records a finding on
// the run.
func overAccepted(in *Input, check func(r *evidence.RunSummary, add func(msg string, ev ...Row)) error) (Outcome, error) {
	out := Outcome{Subject: "accepted runs"}
	for _, r := range in.Runs() {
		if !accepted(r) {
			continue
		}
		out.Evaluated++
		add := func(msg string, ev ...Row) {
			out.Findings = append(out.Findings, Finding{RunID: r.RunID, Message: msg, Evidence: ev})
		}
		if err := check(r, add); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// accepted reports whether the run's recorded verdict claims acceptance: the claim the rules check.
func accepted(r *evidence.RunSummary) bool {
	return r.Verdict != nil && r.Verdict.Verdict == evidence.VerdictAccepted
}

func ruleR02() *Rule {
	return &Rule{
		ID: "R02", Title: "Accepted without execution evidence", Severity: Critical,
		Hazard: "a plan's output is treated as an executed run",
		Doc: "For every run in the selection whose verdict is accepted, looks for the evidence of an execution in its " +
			"trace (and, for a resumed run, the traces of the runs it continues): at least one provider_exchange event " +
			"whose response artifact the run holds, " +
			"and, for a matrix case run (not a replay), a passed tests or oracle check row — the independent execution of " +
			"what the members produced. An accepted run with an empty trace, no provider exchange, or neither check is a " +
			"finding.",
		Procedure: "verdicts.verdict = 'accepted' ⋈ count(events type provider_exchange over the lineage), checks tests/oracle",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			return overAccepted(in, func(r *evidence.RunSummary, add func(string, ...Row)) error {
				chain, err := lineage(ctx, in, r.RunID)
				if err != nil {
					return err
				}
				// An exchange is execution evidence only with its bytes: a response artifact the run
				// holds (R11 checks that those bytes still hash to their digest).
				exchanges, withBytes, events := 0, 0, 0
				for _, id := range chain {
					evs, err := in.Events(ctx, id)
					if err != nil {
						return err
					}
					linked := map[string]bool{}
					for _, a := range in.Run(id).Artifacts {
						linked[a.Digest] = true
					}
					events += len(evs)
					for _, ev := range evs {
						if ev.Type == "provider_exchange" {
							exchanges++
							if d := str(payload(ev), "response_artifact"); d != "" && linked[d] {
								withBytes++
							}
						}
					}
				}
				row := Row{RunID: r.RunID, Table: "verdicts", Key: "verdict", Value: r.Verdict.Verdict}
				switch {
				case exchanges == 0:
					add(fmt.Sprintf("run %s is accepted, but its trace (%d events over %s) holds no provider_exchange: nothing shows it executed", r.RunID, events, strings.Join(chain, " → ")),
						row, Row{RunID: r.RunID, Table: "events", Key: "provider_exchange", Value: "0"})
				case withBytes == 0:
					add(fmt.Sprintf("run %s is accepted, but none of its %d provider exchanges has a response artifact the run holds: no recorded bytes show it executed", r.RunID, exchanges),
						row, Row{RunID: r.RunID, Table: "events", Key: "provider_exchange.response_artifact", Value: "0"})
				}
				replay, err := in.IsReplay(ctx, r.RunID)
				if err != nil {
					return err
				}
				if !replay && !slices.ContainsFunc(r.Checks, func(c evidence.Check) bool {
					return (c.Name == "tests" || c.Name == "oracle") && c.Status == evidence.CheckPassed
				}) {
					add(fmt.Sprintf("run %s is accepted, but no tests or oracle check passed: nothing executed what its members produced", r.RunID),
						row, Row{RunID: r.RunID, Table: "checks", Key: "tests,oracle"})
				}
				return nil
			})
		},
	}
}

func ruleR03() *Rule {
	return &Rule{
		ID: "R03", Title: "Simulated or observed work presented as live effect evidence", Severity: Critical,
		Hazard: "dry_run or observe treated as live effect evidence",
		Doc: "For every run in the selection, reads the mode each tool_call and tool_result event and the " +
			"boundary_configured event record (absent means live) and compares it with the envelope's mode: a trace whose " +
			"mode differs from the envelope's is a finding. A run whose tool outcomes were simulated (simulated: true) " +
			"with an effects or files check passed, or whose outcomes record a policy not enforced (observe) with an " +
			"effects check passed, has a check saying passed for work that did not happen as live: a finding.",
		Procedure: "events tool_call/tool_result/boundary_configured payload mode, simulated, policy_not_enforced ⋈ envelopes.mode, checks",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "runs with tool or boundary events"}
			for _, r := range in.Runs() {
				evs, err := in.Events(ctx, r.RunID)
				if err != nil {
					return Outcome{}, err
				}
				var simulated, notEnforced []int64
				var mismatch []Row
				seen := false
				for _, ev := range evs {
					if ev.Type != "tool_call" && ev.Type != "tool_result" && ev.Type != "boundary_configured" {
						continue
					}
					seen = true
					p := payload(ev)
					mode := str(p, "mode")
					if mode == "" && ev.Type != "boundary_configured" {
						mode = evidence.ModeLive
					}
					// A boundary configuration that records no mode (older runs) says nothing either way.
					if mode != r.Envelope.Mode && mode != "" {
						mismatch = append(mismatch, Row{RunID: r.RunID, Table: "events", Seq: ev.Seq, Key: ev.Type, Value: mode})
					}
					if b, _ := p["simulated"].(bool); b && ev.Type == "tool_result" {
						simulated = append(simulated, ev.Seq)
					}
					if str(p, "policy_not_enforced") != "" && ev.Type == "tool_result" {
						notEnforced = append(notEnforced, ev.Seq)
					}
				}
				if !seen {
					continue
				}
				out.Evaluated++
				if len(mismatch) > 0 {
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message: fmt.Sprintf("run %s's envelope says mode %q, but %d of its events record mode %q (first: event %d)",
							r.RunID, r.Envelope.Mode, len(mismatch), mismatch[0].Value, mismatch[0].Seq),
						Evidence: append([]Row{{RunID: r.RunID, Table: "envelopes", Key: "mode", Value: r.Envelope.Mode}}, mismatch...)})
				}
				for _, c := range r.Checks {
					if c.Status != evidence.CheckPassed {
						continue
					}
					var seqs []int64
					why := ""
					switch {
					case len(simulated) > 0 && (c.Name == "effects" || c.Name == "files"):
						seqs, why = simulated, "simulated (dry_run: not executed)"
					case len(notEnforced) > 0 && c.Name == "effects":
						seqs, why = notEnforced, "run under a policy that was not enforced (observe)"
					default:
						continue
					}
					rows := []Row{{RunID: r.RunID, Table: "checks", Key: c.Name, Value: c.Status}}
					for _, s := range seqs {
						rows = append(rows, Row{RunID: r.RunID, Table: "events", Seq: s, Key: "tool_result"})
					}
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message:  fmt.Sprintf("run %s's %s check says passed, but %d tool outcomes were %s", r.RunID, c.Name, len(seqs), why),
						Evidence: rows})
				}
			}
			return out, nil
		},
	}
}

func ruleR04() *Rule {
	return &Rule{
		ID: "R04", Title: "Uncertifiable output presented as certified", Severity: Critical,
		Hazard: "unsafe output promoted to certifiable success",
		Doc: "For every finalized run in the selection, compares its recorded verdict with what can certify: a run whose " +
			"envelope mode is not live must be non_certifiable; an interrupted run must not be accepted; a replay run may " +
			"be accepted only when its replay_verdict event says exact or within_tolerance. Anything else presented as " +
			"accepted (or a non-live run as rejected, which drops the non_certifiable label) is a finding.",
		Procedure: "verdicts ⋈ envelopes.mode, runs.status, events replay_verdict.verdict",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "runs with a verdict"}
			for _, r := range in.Runs() {
				if r.Verdict == nil {
					continue
				}
				out.Evaluated++
				vrow := Row{RunID: r.RunID, Table: "verdicts", Key: "verdict", Value: r.Verdict.Verdict}
				if r.Envelope.Mode != evidence.ModeLive && r.Verdict.Verdict != evidence.VerdictNonCertifiable {
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message:  fmt.Sprintf("run %s ran in mode %q but its verdict is %q, not non_certifiable", r.RunID, r.Envelope.Mode, r.Verdict.Verdict),
						Evidence: []Row{vrow, {RunID: r.RunID, Table: "envelopes", Key: "mode", Value: r.Envelope.Mode}}})
				}
				if accepted(r) && r.Status != evidence.StatusFinalized {
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message:  fmt.Sprintf("run %s is %s but its verdict is accepted", r.RunID, r.Status),
						Evidence: []Row{vrow, {RunID: r.RunID, Table: "runs", Key: "status", Value: r.Status}}})
				}
				if !accepted(r) {
					continue
				}
				evs, err := in.Events(ctx, r.RunID)
				if err != nil {
					return Outcome{}, err
				}
				if len(evs) == 0 || evs[0].Type != "replay_started" {
					continue
				}
				verdict, seq := "", int64(0)
				for _, ev := range evs {
					if ev.Type == "replay_verdict" {
						verdict, seq = str(payload(ev), "verdict"), ev.Seq
					}
				}
				if verdict != "exact" && verdict != "within_tolerance" {
					out.Findings = append(out.Findings, Finding{RunID: r.RunID,
						Message:  fmt.Sprintf("replay run %s is accepted, but its replay_verdict says %q", r.RunID, verdict),
						Evidence: []Row{vrow, {RunID: r.RunID, Table: "events", Seq: seq, Key: "replay_verdict", Value: verdict}}})
				}
			}
			return out, nil
		},
	}
}

func ruleR08() *Rule {
	return &Rule{
		ID: "R08", Title: "Accepted without rule coverage", Severity: Critical,
		Hazard: "verification or arbitration presented as factual truth",
		Doc: "For every accepted run in the selection: each required check of its kind (a matrix case run: " +
			strings.Join(caseChecks, ", ") + " (docs/checks.md); a replay run: replay) must have a row, required, " +
			"status passed; every check row must be recorded in the run's own chain by a check_recorded event with the same " +
			"name, requiredness and status and the SHA-256 of the row's detail, recomputed here; and every check the " +
			"harness reported (a check_completed event) must have a row with its status, except in a replay run, whose re-derived " +
			"checks are events only (replay verify --checks). A missing, unrecorded or " +
			"contradicted check is a finding.",
		Procedure: "verdicts.verdict = 'accepted' ⋈ checks ⋈ events check_recorded (sha256(detail)) ⋈ events check_completed",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			return overAccepted(in, func(r *evidence.RunSummary, add func(string, ...Row)) error {
				evs, err := in.Events(ctx, r.RunID)
				if err != nil {
					return err
				}
				want := caseChecks
				replayRun := len(evs) > 0 && evs[0].Type == "replay_started"
				if replayRun {
					want = []string{replayCheck}
				}
				rows := map[string]evidence.Check{}
				for _, c := range r.Checks {
					rows[c.Name] = c
				}
				for _, name := range want {
					c, ok := rows[name]
					switch {
					case !ok:
						add(fmt.Sprintf("run %s is accepted without a %s check row", r.RunID, name), Row{RunID: r.RunID, Table: "checks", Key: name})
					case !c.Required || c.Status != evidence.CheckPassed:
						add(fmt.Sprintf("run %s is accepted, but its %s check is required=%v status %q", r.RunID, name, c.Required, c.Status),
							Row{RunID: r.RunID, Table: "checks", Key: name, Value: c.Status})
					}
				}
				recorded := map[string]map[string]any{}
				var completed []evidence.StoredEvent
				for _, ev := range evs {
					switch ev.Type {
					case evidence.EventCheckRecorded:
						p := payload(ev)
						p["_seq"] = float64(ev.Seq)
						recorded[str(p, "name")] = p
					case "check_completed":
						completed = append(completed, ev)
					}
				}
				legacy, err := in.Legacy(ctx, r.RunID)
				if err != nil {
					return err
				}
				for _, c := range r.Checks {
					if legacy {
						break // no check_recorded events before schema 3: its terminal hash covers the rows (R12)
					}
					p, ok := recorded[c.Name]
					sum := sha256.Sum256([]byte(c.Detail))
					detail := hex.EncodeToString(sum[:])
					if !ok {
						add(fmt.Sprintf("run %s's %s check row has no check_recorded event in its chain", r.RunID, c.Name), Row{RunID: r.RunID, Table: "checks", Key: c.Name})
						continue
					}
					seq, _ := num(p, "_seq")
					req, _ := p["required"].(bool)
					if str(p, "status") != c.Status || req != c.Required || str(p, "detail_sha256") != detail {
						add(fmt.Sprintf("run %s's %s check row (required=%v, status %q, detail sha256 %s) differs from its check_recorded event (required=%v, status %q, detail sha256 %s)",
							r.RunID, c.Name, c.Required, c.Status, detail, req, str(p, "status"), str(p, "detail_sha256")),
							Row{RunID: r.RunID, Table: "checks", Key: c.Name, Value: c.Status, Digest: detail},
							Row{RunID: r.RunID, Table: "events", Seq: seq, Key: evidence.EventCheckRecorded, Value: str(p, "status")})
					}
				}
				for _, ev := range completed {
					if replayRun {
						// replay verify --checks re-derives the recorded run's checks on the replay and
						// records them as events only: the replay check (above) is what accepts it, and
						// the comparison with the recorded run's checks is the replay verdict's (R04).
						break
					}
					p := payload(ev)
					name := str(p, "check")
					c, ok := rows[name]
					if !ok || c.Status != str(p, "status") {
						got := "no row"
						if ok {
							got = "row status " + c.Status
						}
						add(fmt.Sprintf("run %s's harness reported check %s %q (event %d), but the store has %s", r.RunID, name, str(p, "status"), ev.Seq, got),
							Row{RunID: r.RunID, Table: "events", Seq: ev.Seq, Key: "check_completed", Value: str(p, "status")},
							Row{RunID: r.RunID, Table: "checks", Key: name, Value: c.Status})
					}
				}
				return nil
			})
		},
	}
}
