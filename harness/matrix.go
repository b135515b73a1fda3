// Package harness runs the formation matrix: it resolves the provider (the embedded reference
// provider by default), puts the observing gateway in front of it, runs each case (formation x task
// profile x language) as a run in the evidence store, checks the case independently of what any
// member said, and finalizes the run with its acceptance verdict. DESIGN.md, "The main job's data
// flow", is the contract.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// CaseResult is one case's outcome as finalized in the evidence store.
type CaseResult struct {
	RunID string `json:"run_id"`
	Case  string `json:"case"`
	// Catalog is the catalog entry's name (e.g. "parallel+vote"); Formation the registry formation.
	Catalog   string `json:"catalog"`
	Formation string `json:"formation"`
	Profile   string `json:"profile"`
	Language  string `json:"language"`
	// Provider and Model are the provider and model id the envelope names (a matrix file's provider
	// name, else "reference" or the base URL); Task the team task ("double"); Repeat the repeat
	// index, 1-based, 0 when the matrix does not repeat.
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Task     string `json:"task"`
	Repeat   int    `json:"repeat,omitempty"`
	Members  int    `json:"members"`
	// ElapsedSeconds is the case's wall time, seconds.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Timings splits ElapsedSeconds, in seconds: "team" (the formation run: orchestration, provider
	// exchanges through the gateway, tool calls, event recording), "check:<name>" per check, and
	// "finalize".
	Timings      map[string]float64 `json:"timings"`
	Checks       []evidence.Check   `json:"checks"`
	Verdict      evidence.Verdict   `json:"verdict"`
	EventCount   int64              `json:"event_count"`
	TerminalHash string             `json:"terminal_hash"`
	// Paused is set when the run paused (a call awaiting approval, an effect awaiting
	// reconciliation): it is rejected, and 'assay resume RUN' continues it.
	Paused bool `json:"paused,omitempty"`
	// Resumes is the run this one resumed ("" for a first run).
	Resumes string `json:"resumes,omitempty"`
	// Tokens is the provider token usage of this run's own provider exchanges (not its lineage's),
	// from the harness's parse of the recorded response bytes (runTokens); counts are nil when
	// unknown, never 0.
	Tokens TokenUsage `json:"tokens"`
}

// Summary is the outcome of a matrix run.
type Summary struct {
	Provider string `json:"provider"`
	// Reference is true when results were obtained with the embedded reference provider (not a
	// language model); every report says so.
	Reference bool         `json:"reference"`
	Model     string       `json:"model"`
	OutDir    string       `json:"out_dir"`
	StorePath string       `json:"store_path"`
	GatewayDB string       `json:"gateway_db"`
	Cases     []CaseResult `json:"cases"`
	// Sealed are the runs an earlier process left unfinished (interrupted) that this one's store
	// session sealed: finalized rejected, reason "interrupted" (evidence.Store.Recovered).
	Sealed []string `json:"sealed,omitempty"`
	// ReferenceHandlerSeconds is the time the embedded reference provider spent answering, summed
	// over requests (0 with --base-url): the stand-in model's share of the wall time, not assay's.
	ReferenceHandlerSeconds float64 `json:"reference_handler_seconds,omitempty"`
	// Totals is the run's account at its end: cases by outcome, wall time, tokens (SummarizeRun).
	Totals Totals `json:"totals"`
}

// Accepted reports whether every case was accepted.
func (s Summary) Accepted() bool {
	if len(s.Cases) == 0 {
		return false
	}
	for _, c := range s.Cases {
		if c.Verdict.Verdict != evidence.VerdictAccepted {
			return false
		}
	}
	return true
}

// Run runs the matrix and returns its summary. Every case is finalized in the evidence store,
// accepted or rejected; a failed case is never re-run. Errors are for what stopped the matrix
// itself (bad options, the store locked by another process — evidence.ErrLocked —, a provider or
// gateway that could not start); a rejected case is not an error.
func Run(ctx context.Context, opts Options) (sum Summary, err error) {
	start := time.Now()
	defer func() {
		sum.Totals = SummarizeRun(sum.Cases, len(opts.Formations)*max(opts.Repeat, 1), time.Since(start))
	}()
	if err := opts.Normalize(); err != nil {
		return Summary{}, err
	}
	if opts.BaseURL != "" {
		// Before anything is written: an unreachable provider or an unserved model is bad input,
		// not a matrix of rejected cases.
		if err := preflight(ctx, opts); errors.Is(err, ErrBadOptions) {
			return Summary{}, err
		} else if err != nil {
			return Summary{}, fmt.Errorf("%w: %v", ErrBadOptions, err)
		}
	}
	if err := opts.resolveCapacity(ctx); err != nil {
		return Summary{}, err
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("create output directory: %w", err)
	}
	storePath := filepath.Join(opts.OutDir, "evidence.duckdb")
	store, err := evidence.Open(ctx, storePath, evidence.OpenOptions{Command: opts.Command, Wait: opts.StoreWait})
	if err != nil {
		return Summary{}, err
	}
	defer store.Close()

	sum = Summary{Model: opts.Model, OutDir: opts.OutDir, StorePath: storePath,
		GatewayDB: filepath.Join(opts.OutDir, "gateway-usage.db")}
	env, closeEnv, err := openEnv(ctx, opts, store, &sum, len(opts.Formations)*max(opts.Repeat, 1))
	if err != nil {
		return sum, err
	}
	defer closeEnv()
	refServer, prog := env.reference, env.progress
	profile := Profiles()[opts.Profile]
	if opts.PolicyFile != "" || opts.Mode != string(tool.Live) || opts.ApprovalsFile != "" {
		prog.line("mode %s, policy %s (sha256 %s), approvals %s", opts.Mode, labelOr(opts.PolicyFile, "built-in"),
			labelOr(opts.policyDigest, "none"), labelOr(opts.ApprovalsFile, "none"))
	}
	// Each repeat is its own case, run and verdict: a repeat is never a retry of another.
	var cases []Case
	for _, name := range opts.Formations {
		entry, _ := LookupCase(name)                                 // Normalize resolved every name
		entry, _ = entry.withFormationOptions(opts.FormationOptions) // and checked these
		if opts.Repeat == 0 {
			cases = append(cases, Case{Entry: entry, Profile: profile, Language: opts.Language, Task: opts.task})
		}
		for r := 1; r <= opts.Repeat; r++ {
			cases = append(cases, Case{Entry: entry, Profile: profile, Language: opts.Language, Task: opts.task, Repeat: r})
		}
	}
	results := make([]CaseResult, len(cases))
	errs := make([]error, len(cases))
	// Cases start in order, opts.Concurrency at a time; none starts once ctx is done. Each keeps
	// its own error, so the one returned is the first in case order, not in time.
	var g errgroup.Group
	g.SetLimit(opts.Concurrency)
	for i, c := range cases {
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			// A matrix file's cells share one progress: its case numbers run on across cells.
			at := opts.progressOffset + i
			opts := opts
			opts.hooks = opts.hooks.forCase(c)
			shown := c.Name()
			if opts.progressLabel != "" {
				shown += " (" + opts.progressLabel + ")"
			}
			cr, err := runCase(ctx, opts, c, env, prog.start(at, shown))
			if err != nil {
				errs[i] = fmt.Errorf("case %s: %w", c.Name(), err)
				prog.stop(at, shown, err)
				return nil
			}
			prog.finish(at, shown, cr)
			results[i] = cr
			return nil
		})
	}
	_ = g.Wait() // every function returns nil
	if sum.Sealed = store.Recovered(); len(sum.Sealed) > 0 {
		prog.line("sealed %d interrupted run(s) an earlier process left unfinished, rejected as interrupted: %s", len(sum.Sealed), strings.Join(sum.Sealed, ", "))
	}
	if err := signRuns(ctx, opts, store, sum.Sealed...); err != nil {
		return sum, err
	}
	for i := range cases {
		if errs[i] != nil {
			return sum, errs[i]
		}
		if results[i].RunID != "" {
			sum.Cases = append(sum.Cases, results[i])
		}
	}
	if refServer != nil {
		sum.ReferenceHandlerSeconds = refServer.HandlerTime().Seconds()
	}
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("matrix cancelled after %d of %d cases: %w", len(sum.Cases), len(cases), err)
	}
	return sum, nil
}

// openEnv starts what every case of a matrix run shares: the embedded reference provider (when no
// base URL is given), the observing gateway on OUT/gateway-usage.db (which keeps the usage of
// earlier processes' requests, so a resumed run's sessions reconcile over both), the provider
// client, the redactor, the Python interpreters and the progress of a run of cases cases. sum
// receives the provider's description. The returned function stops what was started; it is also
// returned (and must be called) on error.
func openEnv(ctx context.Context, opts Options, store *evidence.Store, sum *Summary, cases int) (caseEnv, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	upstream := opts.BaseURL
	var refServer *reference.Server
	if upstream == "" {
		cfg := reference.Config{Faults: opts.ReferenceFaults, SessionHeader: opts.SessionHeader, EffectsDB: EffectsDBPath(opts.OutDir), Model: opts.Model}
		if opts.task != nil {
			cfg.Solutions = solutions(opts.task)
		}
		ref, err := reference.Start(ctx, cfg)
		if err != nil {
			return caseEnv{}, closeAll, fmt.Errorf("start the reference provider: %w", err)
		}
		closers = append(closers, func() { ref.Close() })
		refServer = ref.Server()
		upstream = ref.BaseURL()
		sum.Reference = true
		sum.Provider = "reference (embedded, " + opts.Model + ", not a language model)"
		if opts.task != nil {
			sum.Provider = "reference (embedded, " + opts.Model + ", not a language model: it answers with task " + opts.task.Name +
				"'s reference solution from its task file)"
		}
	} else {
		sum.Provider = opts.BaseURL
	}
	up, err := url.Parse(upstream)
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("provider URL %q: %w", upstream, err)
	}
	basePath := strings.TrimRight(up.Path, "/")
	up.Path, up.RawPath = "", ""
	gw, err := gateway.Start(ctx, gateway.Config{Upstream: up.String(), SessionHeader: opts.SessionHeader, DBPath: sum.GatewayDB})
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("start the observing gateway: %w", err)
	}
	closers = append(closers, func() { gw.Close() })
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: gw.URL() + basePath, APIKey: opts.APIKey,
		SessionHeader: opts.SessionHeader, Timeout: opts.RequestTimeout})
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("provider client: %w", err)
	}
	env := caseEnv{store: store, gateway: gw, client: client, redactor: newRedactor(opts, os.Environ()), teams: newTeamRuns()}
	if opts.Language == reference.LanguagePython {
		// One interpreter for the whole matrix, chosen deliberately (oracle.FindPython); when none
		// qualifies the tests and oracle checks fail as unavailable, never pass.
		py := FindPythons(ctx)
		env.oraclePython, env.oraclePythonErr = py.Oracle, py.OracleErr
		env.pytestPython, env.pytestPythonErr = py.Pytest, py.PytestErr
	}
	if opts.progressShared != nil {
		// A cell of a matrix file (RunMatrix): the matrix's progress, redacting this cell's secrets
		// while it runs (cells run one after another); RunMatrix closes it.
		env.progress = opts.progressShared
		env.progress.setRedactor(env.redactor)
	} else {
		env.progress = newProgress(opts.Progress, opts.ProgressStyle, env.redactor, cases, opts.Concurrency)
		closers = append(closers, env.progress.close)
	}
	env.reference = refServer
	if env.effectsURL, err = startEffectService(ctx, opts, refServer != nil, upstream, &closers); err != nil {
		return caseEnv{}, closeAll, err
	}
	return env, closeAll, nil
}

// caseEnv is what every case of one matrix run shares.
type caseEnv struct {
	store           *evidence.Store
	gateway         *gateway.Gateway
	client          provider.Provider
	oraclePython    oracle.Python
	oraclePythonErr error
	pytestPython    oracle.Python
	pytestPythonErr error
	// redactor is the run's one redaction projection (newRedactor).
	redactor *policy.Redactor
	// progress receives progress lines (never nil; it may discard them).
	progress *progress
	// reference is the embedded reference provider, nil with a base URL.
	reference *reference.Server
	// effectsURL is the base URL of the run's effect service (startEffectService), "" when none.
	effectsURL string
	// backend, when set, is the receipt lookup reconciliation asks instead of the effect service
	// (a replay serves the recorded receipts); nil otherwise.
	backend effect.Backend
	// teams are the team runs of this matrix run: their member sessions are the ones the gateway
	// may see.
	teams *teamRuns
}

// testHooks stand, in harness tests, for a defective runtime or a stray client: they change what
// the runtime records and returns, or send requests through the gateway while the team runs; they
// never touch the store.
type testHooks struct {
	// options rewrites the formation options the runtime is given (a runtime that runs with other
	// options than the case records).
	options func(*formation.Options)
	// event rewrites each event the runtime emits before it is recorded.
	event func(runtime.Event) runtime.Event
	// result rewrites the team result the runtime returned.
	result func(*runtime.TeamResult)
	// duringTeam runs just before the team, with where the case's services are and its run id.
	duringTeam func(ctx context.Context, env hookEnv)
	// afterTeam runs when the team returned, before the evidence is read, with the gateway's
	// usage database path (a defective gateway's records).
	afterTeam func(ctx context.Context, gatewayDB string)
	// artifact rewrites an artifact the runtime stores (a runtime that keeps other bytes than it
	// received).
	artifact func(name string, data []byte) []byte
	// checks narrows the checks a test needs (the tests and oracle build member code).
	checks func([]Check) []Check
	// byCase, when set, replaces these hooks for each case by its own, keyed by hookKey (nil for a
	// case it does not name): one matrix run stands a differently defective runtime in front of
	// each of its cases.
	byCase map[string]*testHooks
}

// hookKey is a case's key in testHooks.byCase: its catalog entry's name, with "#N" for repeat N.
func hookKey(catalog string, repeat int) string {
	if repeat > 0 {
		return fmt.Sprintf("%s#%d", catalog, repeat)
	}
	return catalog
}

// forCase returns the hooks of case c: byCase's when byCase is set.
func (h *testHooks) forCase(c Case) *testHooks {
	if h == nil || h.byCase == nil {
		return h
	}
	return h.byCase[hookKey(c.Entry.Name, c.Repeat)]
}

// hookEnv is what a duringTeam hook is told: the gateway's base URL, the effect service's ("" when
// none) and the case's run id.
type hookEnv struct{ gatewayURL, effectsURL, runID string }

func labelOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}
