// Package replay verifies replay envelopes (DESIGN.md, `assay replay verify`; docs/replay.md): it
// re-derives a finalized matrix run from its recorded evidence, under the authority the run had,
// and records each replay as a finalized, hash-chained run of kind replay linked to the run it
// replayed. The original is never changed.
//
// A replay (Verify):
//
//  1. refuses, executing nothing, when the authority it is asked to run under differs from the
//     recorded envelope — tenant, mode, policy digest, the case's manifest digest and dataset
//     digest as this build defines the case, or another tolerance policy than the recorded one (a
//     wider one is named as widening: RISKS.md R01, R05, R07);
//  2. is non_certifiable when the evidence cannot certify it: a run not finalized or interrupted,
//     a run that does not verify, a payload missing, stored masked or withheld, a run not live, an
//     entropy source the run did not declare, a recording format or tolerance version this build
//     does not honour (R03, R06, R11, R12);
//  3. re-executes the formation by the matrix run's own code path (harness.PrepareReplay,
//     ReplayCase.Execute) with the cassette (runtime/provider/cassette) answering every member
//     session's requests with its recorded responses, in order, each request checked against the
//     recorded request_sha256, and the recorded tool outcomes and receipts served instead of
//     dispatching any tool (serve.go);
//  4. compares the replayed trace with the recorded one under the run's tolerance policy
//     (compare.go, harness/replay/tolerance): exact, within_tolerance, or mismatch with the first
//     divergence;
//  5. with Checks, re-runs the acceptance checks on the replay and compares them and the verdict
//     with the recorded ones.
//
// The replay never reads a recorded verdict or decision as evidence of itself (DESIGN.md, "Checks
// re-derive"): it proves that the recorded evidence determines the recorded outcome under this
// code; it does not ask the model again.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/cassette"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// Replay verdicts (DESIGN.md vocabulary).
const (
	Exact           = "exact"
	WithinTolerance = "within_tolerance"
	Mismatch        = "mismatch"
	Refused         = "refused"
	NonCertifiable  = "non_certifiable"
)

// Format is the replay format this build honours: a run admitted and finalized under terminal
// version 3 (evidence schema v3 and later: checks and verdict in the run's own hash chain), whose
// provider exchanges carry their request and raw response bytes as artifacts.
const Format = "assay-replay/1"

// CheckName is the one acceptance check of a replay run: passed when its replay verdict is exact
// or within_tolerance.
const CheckName = "replay"

// ErrBadInput is returned (wrapped, naming the problem) for a request that cannot be replayed as
// asked: no store, no run or an unknown one, a replay run named, conflicting selections, an unknown
// tolerance policy, mode or an unreadable policy file. Nothing was written.
var ErrBadInput = errors.New("invalid replay request")

// Options configures Verify.
type Options struct {
	// Store is the evidence store file, default "assay-out/evidence.duckdb". Its directory is the
	// matrix run's output directory: the gateway's usage database and the effect service's are read
	// there, and each replay's members work in cases/<replay run id> there.
	Store string
	// Runs are the runs to replay; All selects every case run that no later run resumed (each
	// resumed lineage once, as a chain), Latest the most recent case run. Exactly one selection.
	Runs        []string
	All, Latest bool
	// Against names a second live run to compare the one run of Runs with, request by request,
	// instead of replaying it (against.go).
	Against string
	// PolicyFile, Mode, Tenant and Tolerance are the authority the replay is asked to run under;
	// "" takes the recorded value.
	PolicyFile, Mode, Tenant, Tolerance string
	// Checks re-runs the acceptance checks on each replay and compares them with the recorded ones.
	Checks bool
	// ModelAliases are the run's --model-alias values (the routing check reads them; they are not
	// recorded).
	ModelAliases map[string]string
	// TestDeadline bounds the independent test runner per member with Checks (default 120s).
	TestDeadline time.Duration
	// StoreWait is how long to wait for the store's writer lock.
	StoreWait time.Duration
	// ToolVersion is assay's version (the replay run's environment fingerprint); Command the lock
	// holder's command line.
	ToolVersion, Command string
	// Progress receives one line per replay; nil for none.
	Progress io.Writer

	// hooks stand, in tests, for a changed build (a formation constructing its prompts otherwise).
	hooks *hooks
}

type hooks struct {
	// request rewrites a replayed provider request before the client encodes it.
	request func(member string, req *provider.Request)
}

// Result is one replayed run's outcome.
type Result struct {
	RunID       string `json:"run_id"`
	ReplayRunID string `json:"replay_run_id"`
	// Catalog is the case's catalog name, Formation the registry formation.
	Catalog   string `json:"catalog,omitempty"`
	Formation string `json:"formation"`
	Verdict   string `json:"verdict"`
	// Reason says why a replay was refused, non_certifiable or a mismatch, in one line.
	Reason          string                   `json:"reason,omitempty"`
	FirstDivergence *event.ReplayDivergence  `json:"first_divergence"`
	Differences     []event.ReplayDifference `json:"differences,omitempty"`
	NotCompared     []string                 `json:"not_compared,omitempty"`
	// Tolerance is the policy compared under ("name@version").
	Tolerance string `json:"tolerance,omitempty"`
	// Chain lists, for a resumed run, each run of its lineage with its replay.
	Chain []ChainRun `json:"chain,omitempty"`
	// Checks compares the recorded and re-derived acceptance checks (Options.Checks).
	Checks []event.ReplayCheck `json:"checks,omitempty"`
	// AgainstRunID is the second run of a comparison (Options.Against).
	AgainstRunID string `json:"against_run_id,omitempty"`
	// Requests and ToolCalls are what the cassette and the tool server answered.
	Requests  int `json:"requests"`
	ToolCalls int `json:"tool_calls"`
	// Seconds is the replay's wall time.
	Seconds float64 `json:"seconds"`
}

// ChainRun is one run of a replayed lineage.
type ChainRun struct {
	RunID           string                  `json:"run_id"`
	ReplayRunID     string                  `json:"replay_run_id"`
	Verdict         string                  `json:"verdict"`
	FirstDivergence *event.ReplayDivergence `json:"first_divergence"`
}

// OK reports whether the verdict is exact or within_tolerance.
func (r Result) OK() bool { return r.Verdict == Exact || r.Verdict == WithinTolerance }

// Describe is the first divergence, or the reason, in one line.
func (r Result) Describe() string {
	if r.FirstDivergence != nil {
		return describe(r.FirstDivergence)
	}
	return r.Reason
}

// Verify replays the selected runs of the store opts.Store names and returns one result per run, in
// the order selected. Errors: ErrBadInput (nothing written); evidence.ErrLocked (a *LockedError)
// when another process holds the store; and what stopped a replay itself (the store failing). A
// replay that is refused, non_certifiable or a mismatch is a result, not an error.
func Verify(ctx context.Context, opts Options) ([]Result, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	storePath := opts.Store
	if _, err := os.Stat(storePath); err != nil {
		return nil, fmt.Errorf("%w: no evidence store at %s (--out names the matrix run's output directory)", ErrBadInput, storePath)
	}
	store, err := evidence.Open(ctx, storePath, evidence.OpenOptions{Command: opts.Command, Wait: opts.StoreWait, ReadOnly: opts.Against != ""})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	targets, err := selectRuns(ctx, store, runs, opts)
	if err != nil {
		return nil, err
	}
	if opts.Against != "" {
		res, err := against(ctx, store, runs, targets, opts)
		if err != nil {
			return nil, err
		}
		return []Result{res}, nil
	}
	r := &replayer{store: store, runs: runs, opts: opts, verified: map[string]evidence.RunVerification{}}
	// Every run replayed is verified first (R11, R12), all in one pass over the store.
	var ids []string
	for _, t := range targets {
		for _, l := range lineageOf(runs, t) {
			ids = append(ids, l.RunID)
		}
	}
	vs, err := store.Verify(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("verify the runs to replay: %w", err)
	}
	for _, v := range vs {
		r.verified[v.RunID] = v
	}
	var out []Result
	for _, t := range targets {
		res, err := r.replay(ctx, t)
		if err != nil {
			return out, fmt.Errorf("replay run %s: %w", t.RunID, err)
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "replay %s (%s): %s in %.2fs as run %s %s\n", res.RunID, res.Catalog, res.Verdict, res.Seconds, res.ReplayRunID, res.Describe())
		}
		out = append(out, res)
	}
	return out, nil
}

func (o *Options) normalize() error {
	if o.Store == "" {
		o.Store = filepath.Join("assay-out", "evidence.duckdb")
	}
	if o.Command == "" {
		o.Command = "assay replay verify"
	}
	selections := 0
	for _, on := range []bool{len(o.Runs) > 0, o.All, o.Latest} {
		if on {
			selections++
		}
	}
	if selections != 1 {
		return fmt.Errorf("%w: name the runs to replay, or --all, or --latest (exactly one of them)", ErrBadInput)
	}
	if o.Against != "" && (len(o.Runs) != 1 || o.Checks) {
		return fmt.Errorf("%w: --against compares one named run with another, without --checks", ErrBadInput)
	}
	if o.Tolerance != "" {
		if _, err := tolerance.Lookup(o.Tolerance); err != nil {
			return fmt.Errorf("%w: --tolerance: %v", ErrBadInput, err)
		}
	}
	// The asked mode and policy file are checked as a matrix run checks them.
	asked := harness.Options{OutDir: filepath.Dir(o.Store), Mode: o.Mode, PolicyFile: o.PolicyFile}
	if err := asked.Normalize(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	for req, ans := range o.ModelAliases {
		if req == "" || ans == "" || req == ans {
			return fmt.Errorf("%w: model alias %q=%q: both ids are required and must differ", ErrBadInput, req, ans)
		}
	}
	return nil
}

// caseRun reports whether r is a run the replay can be asked for by --all and --latest: a matrix
// case run (it holds a case manifest), not a replay.
func caseRun(r evidence.RunSummary) bool {
	return !harness.IsReplayRun(r) && slices.ContainsFunc(r.Artifacts, func(a evidence.ArtifactLink) bool { return a.Name == "manifest.json" })
}

// selectRuns resolves the selection to runs of the store.
func selectRuns(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, opts Options) ([]evidence.RunSummary, error) {
	byID := map[string]evidence.RunSummary{}
	for _, r := range runs {
		byID[r.RunID] = r
	}
	var out []evidence.RunSummary
	switch {
	case opts.All:
		for _, r := range runs {
			if caseRun(r) && harness.ResumedBy(runs, r.RunID) == "" {
				out = append(out, r)
			}
		}
	case opts.Latest:
		for _, r := range runs {
			if caseRun(r) && (len(out) == 0 || !r.CreatedAt.Before(out[0].CreatedAt)) {
				out = []evidence.RunSummary{r}
			}
		}
	default:
		names := slices.Clone(opts.Runs)
		if opts.Against != "" {
			names = append(names, opts.Against)
		}
		for _, id := range names {
			r, ok := byID[id]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: no run %s in %s", ErrBadInput, id, store.Path())
			case harness.IsReplayRun(r):
				return nil, fmt.Errorf("%w: run %s is a replay (of run %s); replay that run", ErrBadInput, id, r.CorrectsRunID)
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the store %s holds no case run to replay", ErrBadInput, store.Path())
	}
	return out, nil
}

// openGateway opens the observing gateway's usage database of the output directory as it stood at
// until, for the checks to read (it relays nothing: its upstream is never asked). A missing database
// is not created: the checks then read an empty one in a temporary directory, and fail as they
// would have.
func openGateway(ctx context.Context, outDir string, until time.Time) (*gateway.Gateway, func(), error) {
	db := filepath.Join(outDir, "gateway-usage.db")
	cleanup := func() {}
	if _, err := os.Stat(db); err != nil {
		tmp, err := os.MkdirTemp("", "assay-replay-gateway-*")
		if err != nil {
			return nil, nil, err
		}
		db, cleanup = filepath.Join(tmp, "gateway-usage.db"), func() { os.RemoveAll(tmp) }
	}
	gw, err := gateway.Start(ctx, gateway.Config{Upstream: "http://127.0.0.1:9", DBPath: db, Until: until})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("open the gateway's usage database %s: %w", db, err)
	}
	return gw, func() { gw.Close(); cleanup() }, nil
}

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

// decision is a verdict reached before anything executes.
type decision struct {
	verdict, reason string
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

func labelEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// certify loads every run of the lineage and decides whether its evidence can certify a replay
// (R03, R06, R11, R12); it returns the recordings, or why not.
func (r *replayer) certify(ctx context.Context, lineage []evidence.RunSummary, pol tolerance.Policy) ([]*recording, *decision, error) {
	for _, run := range lineage {
		v, ok := r.verified[run.RunID]
		if !ok {
			vs, err := r.store.Verify(ctx, run.RunID)
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

// compareChecks compares the recorded checks and verdict of run with the re-derived ones: a check
// whose status or requiredness differs, one on one side only, or another verdict is a divergence
// on the verdict, naming the check. Details are kept side by side; they carry measurements (a
// window's request count, a test's time) and do not decide acceptance.
func compareChecks(run evidence.RunSummary, rederived []evidence.Check, verdict evidence.Verdict) ([]event.ReplayCheck, []divergence) {
	byName := map[string]evidence.Check{}
	for _, c := range rederived {
		byName[c.Name] = c
	}
	var out []event.ReplayCheck
	var divs []divergence
	seen := map[string]bool{}
	add := func(name string, was, now *evidence.Check) {
		rc := event.ReplayCheck{Name: name}
		if was != nil {
			rc.RecordedRequired, rc.RecordedStatus, rc.RecordedDetail = was.Required, was.Status, was.Detail
		}
		if now != nil {
			rc.RederivedRequired, rc.RederivedStatus, rc.RederivedDetail = now.Required, now.Status, now.Detail
		}
		out = append(out, rc)
		if rc.RecordedStatus != rc.RederivedStatus || rc.RecordedRequired != rc.RederivedRequired {
			field, a, b := "/status", rc.RecordedStatus, rc.RederivedStatus
			if rc.RecordedStatus == rc.RederivedStatus {
				field, a, b = "/required", fmt.Sprint(rc.RecordedRequired), fmt.Sprint(rc.RederivedRequired)
			}
			divs = append(divs, divergence{order: 1<<63 - 1, rank: rankVerdict, d: event.ReplayDivergence{RunID: run.RunID, Check: name,
				Pointer: field, Recorded: quoteOrNull(a, was != nil), Replayed: quoteOrNull(b, now != nil),
				Detail: fmt.Sprintf("check %s: recorded %s, re-derived %s (%s)", name, labelEmpty(rc.RecordedStatus), labelEmpty(rc.RederivedStatus), clipText(rc.RederivedDetail))}})
		}
	}
	for i := range run.Checks {
		c := run.Checks[i]
		seen[c.Name] = true
		now, ok := byName[c.Name]
		if ok {
			add(c.Name, &c, &now)
		} else {
			add(c.Name, &c, nil)
		}
	}
	for _, c := range rederived {
		if !seen[c.Name] {
			c := c
			add(c.Name, nil, &c)
		}
	}
	recorded := ""
	if run.Verdict != nil {
		recorded = run.Verdict.Verdict
	}
	if recorded != verdict.Verdict {
		divs = append(divs, divergence{order: 1<<63 - 1, rank: rankVerdict, d: event.ReplayDivergence{RunID: run.RunID, Check: "verdict",
			Pointer: "/verdict", Recorded: quoteOrNull(recorded, run.Verdict != nil), Replayed: quoteOrNull(verdict.Verdict, true),
			Detail: fmt.Sprintf("the recorded verdict is %s, the re-derived one %s (%s)", labelEmpty(recorded), verdict.Verdict, strings.Join(verdict.Reasons, "; "))}})
	}
	return out, divs
}

func quoteOrNull(s string, present bool) json.RawMessage {
	if !present {
		return nil
	}
	b, _ := json.Marshal(s)
	return b
}

func clipText(s string) string {
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
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
