package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/cassette"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// replayer replays runs of one store.
type replayer struct {
	store *evidence.Store
	runs  []evidence.RunSummary
	opts  Options
	// verified holds the verification of the runs to replay, by run id.
	verified map[string]evidence.RunVerification
	// pythons are the interpreters the checks of Python cases use, found at the first one.
	pythons *harness.Pythons
}

// lineageOf returns run r's recorded lineage, first run first (r last).
func lineageOf(runs []evidence.RunSummary, r evidence.RunSummary) []evidence.RunSummary {
	byID := map[string]evidence.RunSummary{}
	for _, x := range runs {
		byID[x.RunID] = x
	}
	out := []evidence.RunSummary{r}
	for seen := map[string]bool{r.RunID: true}; r.CorrectsRunID != ""; {
		p, ok := byID[r.CorrectsRunID]
		if !ok || seen[p.RunID] {
			break
		}
		seen[p.RunID] = true
		out = append([]evidence.RunSummary{p}, out...)
		r = p
	}
	return out
}

// replay replays target as a chain: each run of its lineage, in order.
func (r *replayer) replay(ctx context.Context, target evidence.RunSummary) (Result, error) {
	start := time.Now()
	res := Result{RunID: target.RunID, Formation: target.Envelope.Formation}
	lineage := lineageOf(r.runs, target)
	auth := harness.ReplayAuthority{PolicyFile: r.opts.PolicyFile, Mode: r.opts.Mode, Tenant: r.opts.Tenant, ToolVersion: r.opts.ToolVersion}
	var cases []*harness.ReplayCase
	var pre *decision
	for _, run := range lineage {
		rc, err := harness.PrepareReplay(ctx, r.store, r.runs, run.RunID, auth)
		switch {
		case errors.Is(err, harness.ErrNotACase):
			pre = &decision{NonCertifiable, err.Error()}
		case errors.Is(err, harness.ErrPolicyUnavailable):
			pre = &decision{Refused, err.Error()}
		case errors.Is(err, harness.ErrBadOptions):
			// The asked values passed normalize: what this build cannot run is the recorded case.
			pre = &decision{NonCertifiable, fmt.Sprintf("run %s: this build cannot rebuild its case: %v", run.RunID, err)}
		case err != nil:
			return res, err
		}
		if pre != nil {
			break
		}
		res.Catalog = rc.Catalog
		cases = append(cases, rc)
	}
	asked, recordedPolicy, pre := r.tolerances(target, pre)
	res.Tolerance = asked.ID()
	if pre == nil {
		pre = refusal(cases, asked, recordedPolicy)
	}
	var recs []*recording
	if pre == nil {
		var err error
		recs, pre, err = r.certify(ctx, lineage, recordedPolicy)
		if err != nil {
			return res, err
		}
	}
	if pre != nil {
		var rc *harness.ReplayCase
		if len(cases) > 0 {
			rc = cases[len(cases)-1]
		}
		id, err := r.record(ctx, target, rc, asked, lineage, nil, event.ReplayVerdict{Verdict: pre.verdict, Reason: pre.reason})
		if err != nil {
			return res, err
		}
		res.ReplayRunID, res.Verdict, res.Reason, res.Seconds = id, pre.verdict, pre.reason, time.Since(start).Seconds()
		return res, nil
	}
	res.Verdict = Exact
	res.NotCompared = notCompared(recordedPolicy)
	var chainIDs []string
	for i, rc := range cases {
		v, id, err := r.replayRun(ctx, rc, recs[i], recordedPolicy, lineage[:i+1], chainIDs)
		if err != nil {
			return res, err
		}
		chainIDs = append(chainIDs, id)
		res.ReplayRunID = id
		res.Requests += v.Requests
		res.ToolCalls += v.ToolCalls
		res.Differences = append(res.Differences, v.Differences...)
		res.Checks = append(res.Checks, v.Checks...)
		res.Chain = append(res.Chain, ChainRun{RunID: rc.Run.RunID, ReplayRunID: id, Verdict: v.Verdict, FirstDivergence: v.FirstDivergence})
		switch {
		case res.OK() && v.Verdict != Exact && v.Verdict != WithinTolerance:
			res.Verdict, res.Reason, res.FirstDivergence = v.Verdict, v.Reason, v.FirstDivergence
		case res.Verdict == Exact && v.Verdict == WithinTolerance:
			res.Verdict = WithinTolerance
		}
	}
	if len(res.Chain) == 1 {
		res.Chain = nil
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// record opens a replay run linked to the run it replays, records replay_started, then (for a
// verdict reached before executing anything) the verdict, and finalizes it. It returns the
// replay run's id. With v.Verdict "" it leaves the run open for the replay (record's caller
// finishes it).
func (r *replayer) record(ctx context.Context, replayed evidence.RunSummary, rc *harness.ReplayCase, pol tolerance.Policy,
	lineage []evidence.RunSummary, chain []string, v event.ReplayVerdict) (string, error) {
	id := harness.NewRunID()
	env := replayed.Envelope
	if rc != nil {
		env = rc.Envelope
		env.EntropySources = replayed.Envelope.EntropySources
	} else {
		if r.opts.Tenant != "" {
			env.Tenant = r.opts.Tenant
		}
		if r.opts.Mode != "" {
			env.Mode = r.opts.Mode
		}
	}
	env.Provider, env.BaseURL = harness.ReplayProvider, ""
	env.InvocationID = r.opts.InvocationID
	if r.opts.Tolerance != "" {
		env.ReplayTolerance = r.opts.Tolerance
	} else {
		env.ReplayTolerance = replayed.Envelope.ReplayTolerance
	}
	if err := r.store.OpenRun(ctx, id, env, replayed.RunID); err != nil {
		return "", fmt.Errorf("open replay run %s: %w", id, err)
	}
	var ids []string
	for _, l := range lineage {
		ids = append(ids, l.RunID)
	}
	started := event.ReplayStarted{ReplaysRunID: replayed.RunID, Lineage: ids, ChainReplays: append([]string{}, chain...), Format: Format,
		Tolerance: pol.ID(), Tenant: env.Tenant, Mode: env.Mode, PolicyDigest: env.PolicyDigest, DatasetDigest: env.DatasetDigest,
		ManifestDigest: env.ManifestDigest, RecordedEnvelopeDigest: replayed.EnvelopeDigest, Checks: r.opts.Checks}
	if err := r.append(ctx, id, started); err != nil {
		return id, err
	}
	if v.Verdict == "" {
		return id, nil
	}
	return id, r.finish(ctx, id, replayed.RunID, v)
}

func (r *replayer) append(ctx context.Context, runID string, p event.Payload) error {
	raw, err := event.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := r.store.AppendEvent(ctx, runID, evidence.Event{Type: p.EventType(), Time: time.Now().UTC(), Payload: raw}); err != nil {
		return fmt.Errorf("run %s: record %s: %w", runID, p.EventType(), err)
	}
	return nil
}

// finish records the replay verdict, the replay check and finalizes the replay run: accepted
// when the verdict is exact or within_tolerance, non_certifiable when the replay was, rejected
// otherwise.
func (r *replayer) finish(ctx context.Context, id, replayed string, v event.ReplayVerdict) error {
	if err := r.append(ctx, id, v); err != nil {
		return err
	}
	status, verdict := evidence.CheckFailed, evidence.Verdict{Verdict: evidence.VerdictRejected}
	switch v.Verdict {
	case Exact, WithinTolerance:
		status, verdict = evidence.CheckPassed, evidence.Verdict{Verdict: evidence.VerdictAccepted}
	case NonCertifiable:
		status, verdict = evidence.CheckUnknown, evidence.Verdict{Verdict: evidence.VerdictNonCertifiable}
	}
	detail := fmt.Sprintf("replay of run %s: %s", replayed, v.Verdict)
	if d := describe(v.FirstDivergence); d != "" {
		detail += ": first divergence " + d
	} else if v.Reason != "" {
		detail += ": " + v.Reason
	}
	if verdict.Verdict != evidence.VerdictAccepted {
		verdict.Reasons = []string{detail}
	}
	ev, err := json.Marshal(map[string]any{"replays_run_id": replayed, "verdict": v.Verdict, "first_divergence": v.FirstDivergence,
		"differences": v.Differences})
	if err != nil {
		return err
	}
	if err := r.store.RecordCheck(ctx, id, evidence.Check{Name: CheckName, Required: true, Status: status, Detail: detail, Evidence: ev}); err != nil {
		return fmt.Errorf("run %s: record check %s: %w", id, CheckName, err)
	}
	if _, err := r.store.Finalize(ctx, id, verdict); err != nil {
		return fmt.Errorf("finalize replay run %s: %w", id, err)
	}
	return nil
}

// replayRun re-executes one run of a lineage in a replay run of its own and compares.
func (r *replayer) replayRun(ctx context.Context, rc *harness.ReplayCase, rec *recording, pol tolerance.Policy,
	lineage []evidence.RunSummary, chain []string) (event.ReplayVerdict, string, error) {
	id, err := r.record(ctx, rc.Run, rc, pol, lineage, chain, event.ReplayVerdict{})
	if err != nil {
		return event.ReplayVerdict{}, id, err
	}
	cas := cassette.New("", rec.exchanges)
	client, err := cas.Client()
	if err != nil {
		return event.ReplayVerdict{}, id, err
	}
	var prov provider.Provider = client
	if h := r.opts.hooks; h != nil && h.request != nil {
		prov = hookedProvider{inner: client, team: strings.TrimSuffix(rc.Lineage[0].RunID, "-"), hook: h.request}
	}
	srv := &toolServer{rec: rec}
	team, err := rc.Execute(ctx, harness.ReplayEnv{Store: r.store, RunID: id, Provider: prov, Tools: srv.wrap, Backend: srv})
	if err != nil {
		v := event.ReplayVerdict{Verdict: NonCertifiable, Reason: "the run could not be re-executed from its evidence: " + err.Error()}
		return v, id, r.finish(ctx, id, rc.Run.RunID, v)
	}
	replayed, err := r.store.Events(ctx, id)
	if err != nil {
		return event.ReplayVerdict{}, id, err
	}
	replayedStates := states(team.Checkpoints)
	relocate := func(s string) string { return s }
	if rec.caseDir != "" && rec.caseDir != team.CaseDir {
		relocate = func(s string) string { return strings.ReplaceAll(s, team.CaseDir, rec.caseDir) }
	}
	cmp, err := compareRuns(pol, rec, replayed, replayedStates, relocate)
	if err != nil {
		return event.ReplayVerdict{}, id, err
	}
	divs := append(cassetteDivergences(rc.Run.RunID, cas), srv.divergences()...)
	divs = append(divs, cmp.divs...)
	v := event.ReplayVerdict{Requests: cas.Asked(), ToolCalls: srv.count(), Differences: cmp.diffs, NotCompared: notCompared(pol)}
	if r.opts.Checks {
		// The gateway's records as they stood when the run was finalized: a later resume of its team
		// run adds requests of the same sessions that the run's checks never saw.
		gw, closeGW, err := openGateway(ctx, filepath.Dir(r.opts.Store), *rc.Run.FinalizedAt)
		if err != nil {
			return event.ReplayVerdict{}, id, err
		}
		if rc.Run.Envelope.Language == reference.LanguagePython && r.pythons == nil {
			r.pythons = harness.FindPythons(ctx) // once, as a matrix run chooses them
		}
		checks, verdict, err := team.Checks(ctx, harness.ReplayCheckEnv{Gateway: gw, ModelAliases: r.opts.ModelAliases,
			TestDeadline: r.opts.TestDeadline, Pythons: r.pythons})
		closeGW()
		if err != nil {
			return event.ReplayVerdict{}, id, err
		}
		var cd []divergence
		v.Checks, cd = compareChecks(rc.Run, checks, verdict)
		divs = append(divs, cd...)
	}
	v.FirstDivergence = first(divs)
	v.Verdict, v.Reason = verdictOf(v.FirstDivergence, v.Differences)
	return v, id, r.finish(ctx, id, rc.Run.RunID, v)
}

// cassetteDivergences converts the cassette's divergences.
func cassetteDivergences(runID string, c *cassette.Cassette) []divergence {
	var out []divergence
	for _, d := range c.Divergences() {
		seq := d.Seq
		rd := event.ReplayDivergence{RunID: runID, Member: d.Member, Session: d.Session, Seq: &seq, Event: event.TypeProviderExchange,
			Pointer: d.Pointer, Recorded: d.Recorded, Replayed: d.Replayed, Detail: d.Detail}
		if d.Recorded != nil || d.Pointer != "" {
			rd.EventSeq = d.Order
		}
		out = append(out, divergence{order: d.Order, rank: rankRequest, d: rd})
	}
	return out
}

// hookedProvider lets a test stand for a build that constructs a member's requests otherwise.
type hookedProvider struct {
	inner provider.Provider
	team  string
	hook  func(member string, req *provider.Request)
}

func (h hookedProvider) Complete(ctx context.Context, req provider.Request) (*provider.Response, error) {
	req.Messages = slices.Clone(req.Messages)
	h.hook(strings.TrimPrefix(req.SessionID, h.team+"-"), &req)
	return h.inner.Complete(ctx, req)
}
