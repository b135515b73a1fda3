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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
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
	// InvocationID names this `assay replay verify` invocation in each replay run's envelope
	// (harness.NewInvocationID); a replay is its own invocation, never the replayed run's.
	InvocationID string
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
	// With the records outside the store each run is bound to (the gateway's records, the effect
	// receipts): a run whose bound records were edited or removed does not verify, and a replay of
	// it certifies nothing.
	vs, err := store.VerifyWith(ctx, evidence.VerifyRequest{Runs: ids, Bindings: harness.BindingCheckers(filepath.Dir(opts.Store))})
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

func labelEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
