package audit

import (
	"context"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/evidence"
)

// continuation is a run that claims to continue or re-execute another under the same authority: a
// resume (its run_resumed event) or a replay (its replay_started event).
type continuation struct {
	run     *evidence.RunSummary
	of      *evidence.RunSummary // the run it continues or replays; nil when the store lacks it
	ofID    string
	event   evidence.StoredEvent
	payload map[string]any
	replay  bool
	// verdict is the replay's own verdict as its replay_verdict event records it ("" for a
	// resume, or a replay that recorded none).
	verdict string
}

// continuations returns every resume and replay among the selected runs, each with the run it
// names, read from the events themselves (the correction link is compared, not trusted).
func continuations(ctx context.Context, in *Input) ([]continuation, error) {
	var out []continuation
	for _, r := range in.Runs() {
		evs, err := in.Events(ctx, r.RunID)
		if err != nil {
			return nil, err
		}
		var c *continuation
		for _, ev := range evs {
			switch ev.Type {
			case "run_resumed":
				if c == nil {
					p := payload(ev)
					c = &continuation{run: r, ofID: str(p, "resumes_run_id"), event: ev, payload: p}
				}
			case "replay_started":
				if c == nil {
					p := payload(ev)
					c = &continuation{run: r, ofID: str(p, "replays_run_id"), event: ev, payload: p, replay: true}
				}
			case "replay_verdict":
				if c != nil && c.replay {
					c.verdict = str(payload(ev), "verdict")
				}
			}
		}
		if c != nil {
			c.of = in.Run(c.ofID)
			out = append(out, *c)
		}
	}
	return out, nil
}

// refused reports a replay whose own verdict says it refused to run (or could not certify): the
// control caught the drift, so a drift there is the evidence of a refusal, not a hazard.
func (c continuation) refused() bool {
	return c.replay && (c.verdict == "refused" || c.verdict == "non_certifiable")
}

// what names the continuation for messages.
func (c continuation) what() string {
	if c.replay {
		return "replay"
	}
	return "resume"
}

// authority returns the value of an authority field the continuation ran under: a resume ran under
// its own envelope; a replay under the authority its replay_started event records.
func (c continuation) authority(field string) string {
	if c.replay {
		return str(c.payload, field)
	}
	return envelopeField(c.run.Envelope, field)
}

// envelopeField returns an envelope's value of an authority field.
func envelopeField(e evidence.Envelope, field string) string {
	switch field {
	case "tenant":
		return e.Tenant
	case "manifest_digest":
		return e.ManifestDigest
	case "mode":
		return e.Mode
	case "policy_digest":
		return e.PolicyDigest
	case "dataset_digest":
		return e.DatasetDigest
	case "tolerance":
		return e.ReplayTolerance
	}
	return ""
}

// compareAuthority returns a finding for each field whose value the continuation ran under differs
// from the envelope of the run it continues; refused replays are skipped (their refusal is the
// control working).
func compareAuthority(c continuation, fields []string, norm func(string) string) []Finding {
	if c.of == nil || c.refused() {
		return nil
	}
	var out []Finding
	for _, f := range fields {
		got, want := c.authority(f), envelopeField(c.of.Envelope, f)
		if norm != nil {
			got, want = norm(got), norm(want)
		}
		if got == want {
			continue
		}
		out = append(out, Finding{RunID: c.run.RunID,
			Message: fmt.Sprintf("%s %s ran under %s %q, but run %s was bound to %q", c.what(), c.run.RunID, f, got, c.ofID, want),
			Evidence: []Row{
				{RunID: c.run.RunID, Table: "events", Seq: c.event.Seq, Key: c.event.Type, Value: got},
				{RunID: c.ofID, Table: "envelopes", Key: f, Value: want, Digest: c.of.EnvelopeDigest},
			}})
	}
	return out
}

func ruleR01() *Rule {
	return &Rule{
		ID: "R01", Title: "Authority drift on resume or replay", Severity: Critical,
		Hazard: "tenant, manifest, mode or policy changes during resume",
		Doc: "For every resumed run (a run_resumed event) and every replay (a replay_started event) in the selection, " +
			"compares the authority it ran under — a resume's own envelope, a replay's recorded authority — with the " +
			"envelope of the run it names: tenant, manifest digest, mode and policy digest must be equal. A resume must " +
			"also name a checkpoint the resumed run holds at the recorded seq with the recorded hash, and its correction " +
			"link (runs.corrects_run_id) must name the same run as the event. A replay whose own verdict is refused or " +
			"non_certifiable caught the drift itself and is not a finding.",
		Procedure: "events run_resumed/replay_started ⋈ envelopes of the named run; checkpoints(run, seq, hash)",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			cs, err := continuations(ctx, in)
			if err != nil {
				return Outcome{}, err
			}
			out := Outcome{Subject: "resumed or replay runs", Evaluated: len(cs)}
			for _, c := range cs {
				if c.of == nil {
					out.Findings = append(out.Findings, Finding{RunID: c.run.RunID,
						Message:  fmt.Sprintf("%s %s names run %q, which the store does not hold: its authority cannot be compared", c.what(), c.run.RunID, c.ofID),
						Evidence: []Row{{RunID: c.run.RunID, Table: "events", Seq: c.event.Seq, Key: c.event.Type, Value: c.ofID}}})
					continue
				}
				out.Findings = append(out.Findings, compareAuthority(c, []string{"tenant", "manifest_digest", "mode", "policy_digest"}, nil)...)
				if c.run.CorrectsRunID != c.ofID {
					out.Findings = append(out.Findings, Finding{RunID: c.run.RunID,
						Message: fmt.Sprintf("%s %s's event names run %q, its correction link names %q", c.what(), c.run.RunID, c.ofID, c.run.CorrectsRunID),
						Evidence: []Row{{RunID: c.run.RunID, Table: "events", Seq: c.event.Seq, Key: c.event.Type, Value: c.ofID},
							{RunID: c.run.RunID, Table: "runs", Key: "corrects_run_id", Value: c.run.CorrectsRunID}}})
				}
				if !c.replay {
					if f, ok := checkpointNamed(c); !ok {
						out.Findings = append(out.Findings, f)
					}
				}
			}
			return out, nil
		},
	}
}

// checkpointNamed checks that the checkpoint a resume names is one the resumed run holds, at the
// recorded seq with the recorded hash.
func checkpointNamed(c continuation) (Finding, bool) {
	seq, _ := num(c.payload, "checkpoint_seq")
	hash := str(c.payload, "checkpoint_hash")
	for _, cp := range c.of.Checkpoints {
		if cp.Seq == seq && cp.Hash == hash {
			return Finding{}, true
		}
	}
	return Finding{RunID: c.run.RunID,
		Message: fmt.Sprintf("resume %s names checkpoint seq %d hash %s of run %s, which holds no such checkpoint", c.run.RunID, seq, hash, c.ofID),
		Evidence: []Row{{RunID: c.run.RunID, Table: "events", Seq: c.event.Seq, Key: c.event.Type, Digest: hash},
			{RunID: c.ofID, Table: "checkpoints", Seq: seq}}}, false
}

func ruleR05() *Rule {
	return &Rule{
		ID: "R05", Title: "Dataset identity drift on resume or replay", Severity: Critical,
		Hazard: "dataset identity resolves to changed content or state",
		Doc: "For every resumed run and replay in the selection, compares the dataset digest it ran under with the " +
			"dataset digest of the run it names. When neither side binds a dataset (dataset_digest empty on both), there " +
			"is no dataset identity to compare: the rule is not assessable on that pair, never passed; a digest on one " +
			"side only is a finding. Replays that refused are not findings (as R01).",
		Procedure: "events run_resumed/replay_started ⋈ envelopes.dataset_digest of the named run",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			cs, err := continuations(ctx, in)
			if err != nil {
				return Outcome{}, err
			}
			out := Outcome{Subject: "resumed or replay runs binding a dataset"}
			unbound := 0
			for _, c := range cs {
				if c.of == nil {
					continue // R01 reports it
				}
				if c.authority("dataset_digest") == "" && c.of.Envelope.DatasetDigest == "" {
					unbound++
					continue
				}
				out.Evaluated++
				out.Findings = append(out.Findings, compareAuthority(c, []string{"dataset_digest"}, nil)...)
			}
			if out.Evaluated == 0 && unbound > 0 {
				out.NotAssessable = fmt.Sprintf("%d resumed or replay runs, none binding a dataset (dataset_digest empty on both sides): no dataset identity to compare", unbound)
			}
			return out, nil
		},
	}
}

// toleranceName normalizes a tolerance policy name: a bare name means version 1 (docs/replay.md).
func toleranceName(s string) string {
	if s != "" && !strings.Contains(s, "@") {
		return s + "@1"
	}
	return s
}

func ruleR07() *Rule {
	return &Rule{
		ID: "R07", Title: "Replay tolerance changed after the output was known", Severity: Critical,
		Hazard: "replay tolerance widened after the output is known",
		Doc: "For every replay in the selection, compares the tolerance policy its replay_started event records with " +
			"the replay tolerance the replayed run bound in its envelope before it executed (a bare name is version 1: " +
			"exact = exact@1). Any difference is a finding unless the replay's own verdict refused it; resumed runs must " +
			"keep the tolerance of the run they resume.",
		Procedure: "events replay_started.tolerance, run_resumed ⋈ envelopes.replay_tolerance of the named run",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			cs, err := continuations(ctx, in)
			if err != nil {
				return Outcome{}, err
			}
			out := Outcome{Subject: "resumed or replay runs"}
			for _, c := range cs {
				if c.of == nil {
					continue
				}
				out.Evaluated++
				out.Findings = append(out.Findings, compareAuthority(c, []string{"tolerance"}, toleranceName)...)
			}
			return out, nil
		},
	}
}
