package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

func runCase(ctx context.Context, opts Options, c Case, env caseEnv, phase func(string)) (CaseResult, error) {
	start := time.Now()
	store := env.store
	runID := newRunID()
	cr, m, envelope, err := prepareCase(opts, c, runID, true)
	if err != nil {
		return CaseResult{}, err
	}
	// The envelope is bound before anything executes.
	if err := store.OpenRun(ctx, runID, envelope, ""); err != nil {
		return CaseResult{}, fmt.Errorf("open run %s: %w", runID, err)
	}
	cr.runID, cr.start, cr.phase = runID, start, phase
	cr.sink = &storeSink{store: store, runID: runID, redactor: env.redactor}
	if opts.hooks != nil {
		cr.sink.hook, cr.sink.artifactHook = opts.hooks.event, opts.hooks.artifact
	}
	manifestJSON, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return CaseResult{}, fmt.Errorf("run %s: manifest: %w", runID, err)
	}
	if _, err := store.PutArtifact(ctx, runID, manifestArtifact, "application/json", manifestJSON); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: store manifest: %w", runID, err)
	}
	if err := putEnvironment(ctx, store, runID, opts.ToolVersion); err != nil {
		return CaseResult{}, err
	}
	if err := putTask(ctx, store, runID, c.task()); err != nil {
		return CaseResult{}, err
	}
	return executeCase(ctx, opts, c, env, cr)
}

// caseRun is one run of a case as executeCase needs it: the evidence run (already open, its
// envelope bound), the team and its plans, and for a resumed run what it resumes.
type caseRun struct {
	runID   string // the evidence run
	caseDir string
	plans   []memberPlan
	spec    oracle.Spec
	team    runtime.Team // team.RunID is the identity run id (the first run's, for a resumed run)
	fopts   formation.Options
	sink    *storeSink
	start   time.Time
	resume  *resumePoint
	// phase is told each phase the run enters (PhaseTeam, ...); nil for none.
	phase func(string)
}

// executeCase runs an open case run to its verdict: the boundary and engine (durable when the
// formation can resume), for a resumed run the recovery of its journal, the team, the checks and
// finalization.
func executeCase(ctx context.Context, opts Options, c Case, env caseEnv, cr caseRun) (CaseResult, error) {
	start, runID, store, team, plans, spec, caseDir := cr.start, cr.runID, env.store, cr.team, cr.plans, cr.spec, cr.caseDir
	timings := map[string]float64{}
	phase, inPhase := cr.phase, ""
	enter := func(p string) {
		if phase != nil && p != inPhase {
			inPhase = p
			phase(p)
		}
	}
	enter(PhaseTeam)
	engine, fopts, err := startTeam(ctx, opts, env, cr, caseTools(env, c.Entry))
	if err != nil {
		return CaseResult{}, err
	}
	gwFrom, windowFrom := env.gateway.Mark(), time.Now()
	env.teams.add(team, gwFrom)
	if opts.hooks != nil && opts.hooks.duringTeam != nil {
		opts.hooks.duringTeam(ctx, hookEnv{gatewayURL: env.gateway.URL(), effectsURL: env.effectsURL, runID: runID})
	}
	if opts.hooks != nil && opts.hooks.options != nil {
		opts.hooks.options(&fopts)
	}
	teamStart := time.Now()
	result, teamErr := runTeam(ctx, engine, team, fopts)
	teamEnd := time.Now()
	timings["team"] = teamEnd.Sub(teamStart).Seconds()

	gwTo := env.gateway.Mark()
	env.teams.close(team, gwTo)
	checkList := Checks()
	if h := opts.hooks; h != nil {
		if h.result != nil {
			h.result(&result)
		}
		if h.afterTeam != nil {
			h.afterTeam(ctx, filepath.Join(opts.OutDir, "gateway-usage.db"))
		}
		if h.checks != nil {
			checkList = h.checks(checkList)
		}
	}

	state := &caseState{runID: runID, caseDir: caseDir, model: opts.Model, team: team, plans: plans, result: result,
		teamErr: teamErr, gateway: env.gateway, store: store, testTime: opts.TestDeadline,
		oracle: oracle.Options{WorkDir: caseDir, Python: env.oraclePython}, entry: c.Entry, language: c.Language, spec: spec, profile: c.Profile.Name, goModule: c.task().GoModule(),
		oraclePythonErr: env.oraclePythonErr, pytestPython: env.pytestPython, pytestPythonErr: env.pytestPythonErr, redactor: env.redactor,
		mode: opts.Mode, modelAliases: opts.ModelAliases, reference: env.reference != nil, gwFrom: gwFrom, gwTo: gwTo, owned: env.teams.owns,
		ownsKey: env.teams.ownsKey, teamFrom: windowFrom, teamTo: teamEnd}
	if cr.resume != nil {
		state.priorRuns = cr.resume.lineage
	}
	enter(PhaseEvidence)
	prepStart := time.Now()
	if err := state.prepareEvidence(ctx); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: %w", runID, err)
	}
	timings["evidence"] = time.Since(prepStart).Seconds()
	tokens := runTokens(state.trace, state.traceErr, runID)
	var checks []evidence.Check
	for _, o := range evaluateChecks(ctx, state, checkList, env.redactor, func(ch Check) { enter(checkPhase(ch.Name)) }) {
		timings["check:"+o.rec.Name] = o.seconds
		if err := store.RecordCheck(ctx, runID, o.rec); err != nil {
			return CaseResult{}, fmt.Errorf("run %s: record check %s: %w", runID, o.rec.Name, err)
		}
		_ = engine.Emit(ctx, "", "", o.event)
		checks = append(checks, o.rec)
	}
	verdict := caseVerdict(checks, engine, runID)
	paused, _ := engine.Paused()
	enter(PhaseFinalize)
	finStart := time.Now()
	if err := bindExternal(ctx, env, opts.OutDir, runID, team.RunID, gwFrom, gwTo); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: %w", runID, err)
	}
	fin, err := store.Finalize(ctx, runID, verdict)
	if err != nil {
		return CaseResult{}, fmt.Errorf("finalize run %s: %w", runID, err)
	}
	if err := signRuns(ctx, opts, store, runID); err != nil {
		return CaseResult{}, err
	}
	timings["finalize"] = time.Since(finStart).Seconds()
	out := CaseResult{RunID: runID, Case: c.Name(), Catalog: c.Entry.Name, Formation: c.Entry.Formation, Profile: c.Profile.Name,
		Provider: providerName(opts), Model: opts.Model, Task: c.task().Name, Repeat: c.Repeat,
		Language: c.Language, Members: len(team.Members), ElapsedSeconds: time.Since(start).Seconds(), Timings: timings, Checks: checks,
		Verdict: fin.Verdict, EventCount: fin.EventCount, TerminalHash: fin.TerminalHash, Paused: paused, Tokens: tokens}
	if cr.resume != nil {
		out.Resumes = cr.resume.from
	}
	return out, nil
}

// startTeam builds an open case run's boundary and engine — durable when the formation can resume,
// with tools as the engine's tools — records its boundary configuration and, for a resumed run,
// recovers its journal. It returns the engine and the formation options to run the team with.
// Matrix runs, resumes and replays (replay_api.go) all start a team through it.
func startTeam(ctx context.Context, opts Options, env caseEnv, cr caseRun, tools map[string]tool.Tool) (*runtime.Engine, formation.Options, error) {
	runID, team, fopts, sink := cr.runID, cr.team, cr.fopts, cr.sink
	bopts, grants, err := boundaryOptions(opts, team, env.redactor)
	if err != nil {
		return nil, fopts, fmt.Errorf("run %s: %w", runID, err)
	}
	ecfg := runtime.EngineConfig{Provider: env.client, Model: opts.Model, Stream: opts.Stream, Sink: sink,
		BoundaryOptions: append(bopts, caseBackendOptions(env)...), Tools: tools}
	if formation.Resumable(team.Formation, fopts) {
		ecfg.Durable = &runtime.DurableConfig{Checkpoint: sink.Checkpoint}
		if cr.resume != nil {
			ecfg.Durable.Restore, ecfg.Durable.Consumed = &cr.resume.state, cr.resume.consumed
			fopts.Resume = true
		}
	}
	engine, err := runtime.NewEngine(ecfg)
	if err != nil {
		return nil, fopts, err
	}
	if err := engine.Emit(ctx, "", "", event.BoundaryConfigured{Mode: opts.Mode, PolicyFile: opts.PolicyFile,
		PolicyDigest: opts.policyDigest, ApprovalsFile: opts.ApprovalsFile, ApprovalsPreloaded: grants,
		MemberToolCalls: opts.MemberToolCalls, TeamToolCalls: opts.TeamToolCalls,
		MemberTokens: opts.MemberTokens, TeamTokens: opts.TeamTokens}); err != nil {
		return nil, fopts, fmt.Errorf("run %s: record boundary configuration: %w", runID, err)
	}
	if cr.resume != nil {
		if err := cr.resume.recover(ctx, engine, team, env.progress); err != nil {
			return nil, fopts, fmt.Errorf("run %s: %w", runID, err)
		}
	}
	return engine, fopts, nil
}

// runTeam runs the team through the formation registry; a team that did not complete leaves a
// warning event saying why.
func runTeam(ctx context.Context, engine *runtime.Engine, team runtime.Team, fopts formation.Options) (runtime.TeamResult, error) {
	result, err := formation.RunWith(ctx, engine, team, fopts)
	if err != nil {
		_ = engine.Emit(ctx, "", "", event.Warning{Warning: "team did not complete: " + err.Error()})
	}
	return result, err
}

// checkOutcome is one check's result: the record for the store (detail and evidence redacted), the
// check_completed event, and its time in seconds.
type checkOutcome struct {
	rec     evidence.Check
	event   event.CheckCompleted
	seconds float64
}

// evaluateChecks runs the checks in order over the prepared case state and returns their results;
// it records nothing. before, when not nil, is called with each check before it runs.
func evaluateChecks(ctx context.Context, state *caseState, checkList []Check, r *policy.Redactor, before func(Check)) []checkOutcome {
	var out []checkOutcome
	for _, ch := range checkList {
		if before != nil {
			before(ch)
		}
		checkStart := time.Now()
		status, detail, ev := ch.safeRun(ctx, state)
		out = append(out, checkOutcome{seconds: time.Since(checkStart).Seconds(),
			rec: evidence.Check{Name: ch.Name, Required: ch.Required, Status: status, Detail: r.String(detail),
				Evidence: redactJSON(r, marshalEvidence(ev))},
			event: event.CheckCompleted{Check: ch.Name, Required: ch.Required, Status: status, Detail: detail}})
	}
	return out
}

// caseVerdict is the acceptance verdict a case run asks Finalize for: accepted when every required
// check passed, else rejected naming them; a paused run is never accepted, whatever its checks say
// (its work is not finished).
func caseVerdict(checks []evidence.Check, engine *runtime.Engine, runID string) evidence.Verdict {
	verdict := evidence.Verdict{Verdict: evidence.VerdictAccepted}
	if failed := failedRequired(checks); len(failed) > 0 {
		verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: failed}
	}
	if paused, pauses := engine.Paused(); paused {
		reasons := []string{fmt.Sprintf("paused: %s; continue it with 'assay resume %s'", strings.Join(pauses, "; "), runID)}
		verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: append(reasons, verdict.Reasons...)}
	}
	return verdict
}

// boundaryOptions builds one case's tool boundary configuration: its policy engine (from the
// policy file, else the built-in policy), an approval store with the approval file's grants
// preloaded for this run (it returns how many), the mode, the tool-call and token budgets of the
// case's team (one policy.Budget, which the runtime also reserves provider tokens from) and the
// run's redactor.
func boundaryOptions(opts Options, team runtime.Team, r *policy.Redactor) ([]tool.Option, int, error) {
	bopts := []tool.Option{tool.WithRedactor(r)}
	if opts.Mode != "" && opts.Mode != string(tool.Live) {
		bopts = append(bopts, tool.WithMode(tool.Mode(opts.Mode)))
	}
	if opts.policyFile != nil {
		bopts = append(bopts, tool.WithPolicy(policy.NewEngine(opts.policyDigest, 0, opts.policyFile.Policy(filepath.Base(opts.PolicyFile)))))
	}
	approvals := policy.NewApprovals(nil)
	grants := 0
	if opts.approvals != nil {
		grants = approvals.Preload(opts.approvals, team.RunID, func(memberID string) string {
			if m, ok := team.Member(memberID); ok {
				return team.SessionID(m)
			}
			return ""
		})
	}
	bopts = append(bopts, tool.WithApprovals(approvals))
	budget, err := policy.NewBudget(policy.Limits{ToolCalls: opts.TeamToolCalls, Tokens: opts.TeamTokens},
		policy.Limits{ToolCalls: opts.MemberToolCalls, Tokens: opts.MemberTokens})
	if err != nil {
		return nil, 0, fmt.Errorf("budget: %w", err)
	}
	return append(bopts, tool.WithBudget(budget)), grants, nil
}
