package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// What replay (harness/replay, docs/replay.md) needs of a case: the case a recorded run ran,
// rebuilt from its manifest and catalog entry under the authority the replay is asked to run under;
// the team started and run by the code path a matrix run takes (startTeam, runTeam), with the
// provider, tools and receipt lookup the replay gives; and the acceptance checks re-run on the
// replay's own evidence.

// ReplayProvider is the provider a replay run's envelope names: the cassette that served the
// recorded responses (runtime/provider/cassette).
const ReplayProvider = "cassette"

// IsReplayRun reports whether r is a run of kind replay: its envelope's provider is ReplayProvider
// (its first event is replay_started, and it is linked to the run it replays).
func IsReplayRun(r evidence.RunSummary) bool { return r.Envelope.Provider == ReplayProvider }

// Refusals of PrepareReplay.
var (
	// ErrNotACase: the run is not a matrix case run this build can rebuild (no case manifest, or a
	// case the catalog does not have).
	ErrNotACase = errors.New("not a matrix case run")
	// ErrPolicyUnavailable: the run was decided by a policy file, none was given, and the file its
	// boundary configuration names is gone or no longer has the recorded digest.
	ErrPolicyUnavailable = errors.New("the run's policy file is not available")
)

// ReplayAuthority is the authority a replay is asked to run under, given as a matrix run's is; an
// empty field takes the recorded value.
type ReplayAuthority struct {
	// PolicyFile is the policy file; "" uses the file the run's boundary configuration names, when
	// its bytes still have the recorded digest.
	PolicyFile string
	Mode       string
	Tenant     string
	// ToolVersion is assay's version, part of the environment fingerprint.
	ToolVersion string
}

// ReplayCase is a recorded case run rebuilt for re-execution.
type ReplayCase struct {
	// Run is the recorded run; Lineage its lineage, first run first (Run last).
	Run     evidence.RunSummary
	Lineage []evidence.RunSummary
	// Catalog is the case's catalog name.
	Catalog string
	// Envelope is what this build binds the case to under the asked authority: its manifest digest
	// is the case as this build defines it.
	Envelope evidence.Envelope
	// Boundary is the run's recorded boundary configuration; Resumed its run_resumed event (nil for
	// a first run).
	Boundary event.BoundaryConfigured
	Resumed  *event.RunResumed

	runs     []evidence.RunSummary
	opts     Options
	c        Case
	identity string
}

// PrepareReplay rebuilds the case run runID of store ran (runs is the store's run list) under the
// authority a asks for. It writes nothing. Errors: ErrNotACase; ErrPolicyUnavailable;
// ErrBadOptions (wrapped, naming the field) for an asked mode or policy file that cannot run; the
// store's errors.
func PrepareReplay(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, runID string, a ReplayAuthority) (*ReplayCase, error) {
	byID := map[string]evidence.RunSummary{}
	for _, r := range runs {
		byID[r.RunID] = r
	}
	run, ok := byID[runID]
	if !ok {
		return nil, fmt.Errorf("%w: run %s is not in the store", ErrNotACase, runID)
	}
	var m manifest
	if err := readManifest(ctx, store, run, &m); err != nil {
		return nil, fmt.Errorf("%w: run %s: %v", ErrNotACase, runID, err)
	}
	entry, err := LookupCase(m.Catalog)
	if err != nil {
		return nil, fmt.Errorf("%w: run %s: its case %q is not in this build's catalog", ErrNotACase, runID, m.Catalog)
	}
	if entry, err = entry.withFormationOptions(m.FormationOptions); err != nil {
		return nil, fmt.Errorf("%w: run %s: its formation options: %v", ErrNotACase, runID, err)
	}
	// The replay re-applies the run's recorded task file, never a live one.
	task, err := taskOfRun(ctx, store, run, m)
	if err != nil {
		return nil, fmt.Errorf("%w: run %s: its task: %w", ErrNotACase, runID, err)
	}
	lineage := []evidence.RunSummary{run}
	for r := run; r.CorrectsRunID != ""; {
		parent, ok := byID[r.CorrectsRunID]
		if !ok {
			return nil, fmt.Errorf("%w: run %s continues run %s, which is not in the store", ErrNotACase, r.RunID, r.CorrectsRunID)
		}
		lineage = append([]evidence.RunSummary{parent}, lineage...)
		r = parent
	}
	evs, err := store.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s events: %w", runID, err)
	}
	rc := &ReplayCase{Run: run, Lineage: lineage, Catalog: entry.Name, runs: runs, identity: lineage[0].RunID}
	seen := false
	for _, ev := range evs {
		switch ev.Type {
		case event.TypeBoundaryConfigured:
			if !seen {
				if rc.Boundary, err = event.Decode[event.BoundaryConfigured](ev.Type, ev.Payload); err != nil {
					return nil, fmt.Errorf("run %s event %d: %w", runID, ev.Seq, err)
				}
				seen = true
			}
		case event.TypeRunResumed:
			p, err := event.Decode[event.RunResumed](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", runID, ev.Seq, err)
			}
			rc.Resumed = &p
			rc.identity = p.TeamRunID
		}
	}
	if !seen {
		return nil, fmt.Errorf("%w: run %s recorded no boundary configuration", ErrNotACase, runID)
	}
	opts := Options{OutDir: filepath.Dir(store.Path()), Formations: []string{entry.Name}, Profile: m.Profile, Language: m.Language,
		Stream: m.Stream, BaseURL: run.Envelope.BaseURL, Model: run.Envelope.Model, Tenant: a.Tenant, Mode: a.Mode,
		ProviderName:    recordedProviderName(run.Envelope),
		ReplayTolerance: run.Envelope.ReplayTolerance, ToolVersion: a.ToolVersion, Command: "assay replay verify",
		MemberToolCalls: rc.Boundary.MemberToolCalls, TeamToolCalls: rc.Boundary.TeamToolCalls,
		MemberTokens: rc.Boundary.MemberTokens, TeamTokens: rc.Boundary.TeamTokens}
	if opts.Tenant == "" {
		opts.Tenant = run.Envelope.Tenant
	}
	if opts.Mode == "" {
		opts.Mode = run.Envelope.Mode
	}
	if _, err := tolerance.Lookup(opts.ReplayTolerance); err != nil {
		opts.ReplayTolerance = "" // not this build's: the replay says so; the case is rebuilt all the same
	}
	opts.PolicyFile = a.PolicyFile
	if opts.PolicyFile == "" {
		if opts.PolicyFile, err = recordedPolicyFile(rc.Boundary.PolicyFile, run.Envelope.PolicyDigest); err != nil {
			return nil, err
		}
	}
	if rc.Boundary.ApprovalsFile != "" {
		if _, err := os.Stat(rc.Boundary.ApprovalsFile); err == nil {
			opts.ApprovalsFile = rc.Boundary.ApprovalsFile
		}
	}
	if err := opts.Normalize(); err != nil {
		return nil, err
	}
	opts.task = task
	if opts.policyFile != nil && opts.policyDigest == run.Envelope.PolicyDigest && rc.Boundary.PolicyFile != "" {
		// The same policy under another name: it decides, and is named, as the run's file was.
		opts.PolicyFile = rc.Boundary.PolicyFile
	}
	rc.opts = opts
	rc.c = Case{Entry: entry, Profile: Profiles()[opts.Profile], Language: opts.Language, Task: task, Repeat: run.Envelope.Repeat}
	_, _, env, err := prepareCaseIn(opts, rc.c, rc.identity, filepath.Join(opts.OutDir, "cases", rc.identity), false)
	if err != nil {
		return nil, err
	}
	rc.Envelope = env
	return rc, nil
}

// recordedPolicyFile is the policy file a run's boundary configuration names (recorded), when the
// run was decided by one (digest, the envelope's policy digest, is not "") and the file still has
// that digest; "" when the run had no policy file. Replay and resume take it when given none.
//
// Errors: ErrPolicyUnavailable when the file is gone, changed or unnamed.
func recordedPolicyFile(recorded, digest string) (string, error) {
	if digest == "" {
		return "", nil
	}
	if err := policyStillThere(recorded, digest); err != nil {
		return "", fmt.Errorf("%w: %v; give the run's policy with --policy FILE", ErrPolicyUnavailable, err)
	}
	return recorded, nil
}

// policyStillThere checks the file at path still has the SHA-256 digest.
func policyStillThere(path, digest string) error {
	if path == "" {
		return fmt.Errorf("the run recorded no file for its policy (sha256 %s)", digest)
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s no longer exists", path)
	case err != nil:
		return fmt.Errorf("%s cannot be read (%v)", path, errors.Unwrap(err))
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("%s changed since the run (sha256 %s, the run's %s)", path, got, digest)
	}
	return nil
}

// ReplayEnv is what a replay gives the team it re-executes.
type ReplayEnv struct {
	Store *evidence.Store
	// RunID is the open replay run the replayed trace is recorded in.
	RunID string
	// Provider answers the members' requests (the cassette).
	Provider provider.Provider
	// Tools takes the case's tools (names, schemas, access modes as a matrix run has them) and
	// returns those the engine dispatches to.
	Tools func(map[string]tool.Tool) map[string]tool.Tool
	// Backend is the receipt lookup reconciliation asks (a resumed run recovers its journal).
	Backend effect.Backend
	// Progress receives progress lines; nil for none.
	Progress io.Writer
}

// ReplayTeam is a re-executed team: its result, and what its checks need.
type ReplayTeam struct {
	Result runtime.TeamResult
	Err    error
	// CaseDir is the directory the members worked in: OUT/cases/<replay run id>.
	CaseDir string
	// Paused is set when the replayed run paused (awaiting an approval or a reconciliation).
	Paused bool
	// Checkpoints are the checkpoint states the replayed run stored (canonical, as stored), in
	// order, each with the seq of the event it follows.
	Checkpoints []evidence.Checkpoint

	rc     *ReplayCase
	runID  string
	env    caseEnv
	cr     caseRun
	engine *runtime.Engine
}

// Execute re-executes the case in run e.RunID: members in OUT/cases/<run id>, a resumed run
// restored from the checkpoint its run_resumed event names with the journal and consumption of its
// lineage as they stood when it resumed, the boundary and engine as a matrix run builds them, the
// team through the formation registry. It returns an error only for what stopped the replay itself.
func (rc *ReplayCase) Execute(ctx context.Context, e ReplayEnv) (*ReplayTeam, error) {
	caseDir, err := filepath.Abs(filepath.Join(rc.opts.OutDir, "cases", e.RunID))
	if err != nil {
		return nil, err
	}
	cr, _, _, err := prepareCaseIn(rc.opts, rc.c, rc.identity, caseDir, true)
	if err != nil {
		return nil, err
	}
	redactor := newRedactor(rc.opts, os.Environ())
	env := caseEnv{store: e.Store, client: e.Provider, redactor: redactor, teams: newTeamRuns(),
		progress: newProgress(e.Progress, ProgressPlain, redactor, 1, 1), backend: e.Backend}
	if rc.c.Entry.publishes() {
		env.effectsURL = "http://effects.invalid" // names remote_put among the tools; e.Tools serves its calls
	}
	cr.runID, cr.start = e.RunID, time.Now()
	t := &ReplayTeam{CaseDir: caseDir, rc: rc, runID: e.RunID, env: env}
	cr.sink = &storeSink{store: e.Store, runID: e.RunID, redactor: redactor, batched: true,
		saved: func(seq int64, state json.RawMessage) {
			t.Checkpoints = append(t.Checkpoints, evidence.Checkpoint{RunID: e.RunID, CheckpointInfo: evidence.CheckpointInfo{Seq: seq}, State: state})
		}}
	if rc.Resumed != nil {
		if cr.resume, err = rc.resumePoint(ctx, e.Store); err != nil {
			return nil, err
		}
	}
	tools := caseTools(env, rc.c.Entry)
	if e.Tools != nil {
		tools = e.Tools(tools)
	}
	engine, fopts, err := startTeam(ctx, rc.opts, env, cr, tools)
	if err != nil {
		return nil, err
	}
	env.teams.add(cr.team, 0)
	t.Result, t.Err = runTeam(ctx, engine, cr.team, fopts)
	if err := cr.sink.Flush(ctx); err != nil {
		return nil, fmt.Errorf("run %s: record the replayed trace: %w", e.RunID, err)
	}
	t.Paused, _ = engine.Paused()
	t.cr, t.engine = cr, engine
	return t, nil
}

// resumePoint is what the recorded resumed run continued from: the checkpoint its run_resumed
// event names (verified as resume verifies it), and the journal and consumption of the runs of its
// family created before it.
func (rc *ReplayCase) resumePoint(ctx context.Context, store *evidence.Store) (*resumePoint, error) {
	p := rc.Resumed
	var cpRun *evidence.RunSummary
	for i := range rc.Lineage {
		for _, cp := range rc.Lineage[i].Checkpoints {
			if cp.Seq == p.CheckpointSeq && cp.Hash == p.CheckpointHash && rc.Lineage[i].RunID != rc.Run.RunID {
				cpRun = &rc.Lineage[i]
			}
		}
	}
	if cpRun == nil {
		return nil, fmt.Errorf("run %s resumed from checkpoint %s after event %d, which no earlier run of its lineage holds", rc.Run.RunID, p.CheckpointHash, p.CheckpointSeq)
	}
	env := cpRun.Envelope
	cp, err := store.LoadCheckpoint(ctx, cpRun.RunID, p.CheckpointSeq, evidence.ResumeRequest{Tenant: env.Tenant, ManifestDigest: env.ManifestDigest,
		Mode: env.Mode, PolicyDigest: env.PolicyDigest, DatasetDigest: env.DatasetDigest, Case: env.Case, Task: env.Task, Repeat: env.Repeat})
	if err != nil {
		return nil, fmt.Errorf("run %s: its checkpoint: %w", rc.Run.RunID, err)
	}
	var state runtime.DurableState
	if err := json.Unmarshal(cp.State, &state); err != nil {
		return nil, fmt.Errorf("run %s: its checkpoint state does not decode: %w", rc.Run.RunID, err)
	}
	if err := runtime.ValidateDurableState(&state); err != nil {
		return nil, fmt.Errorf("run %s: %w", rc.Run.RunID, err)
	}
	var before []evidence.RunSummary
	for _, r := range Family(rc.runs, rc.Run.RunID) {
		if r.CreatedAt.Before(rc.Run.CreatedAt) {
			before = append(before, r)
		}
	}
	journal, err := recordsIn(ctx, store, before)
	if err != nil {
		return nil, err
	}
	used, err := consumedIn(ctx, store, before)
	if err != nil {
		return nil, err
	}
	return &resumePoint{from: p.ResumesRunID, lineage: p.Lineage, journal: journal, state: state, checkpoint: cp, consumed: used}, nil
}

// Emit records a run-level event of the replay run through its engine (and so its sink).
func (t *ReplayTeam) Emit(ctx context.Context, p event.Payload) error {
	return t.engine.Emit(ctx, "", "", p)
}

// ReplayCheckEnv is what the acceptance checks of a replay read besides the replay's own evidence.
type ReplayCheckEnv struct {
	// Gateway serves the observing gateway's records of the original run (its usage database).
	Gateway *gateway.Gateway
	// ModelAliases are the model aliases the run was given (--model-alias); none are recorded.
	ModelAliases map[string]string
	// TestDeadline bounds the independent test runner per member (default 120s).
	TestDeadline time.Duration
	// Pythons are the interpreters Python cases are checked with; nil finds them for this replay.
	Pythons *Pythons
}

// Pythons are the Python interpreters a matrix run chooses once (oracle.FindPython): the oracle's
// driver and pytest's, each with why none qualified.
type Pythons struct {
	Oracle, Pytest       oracle.Python
	OracleErr, PytestErr error
}

// FindPythons chooses the interpreters as a matrix run of Python cases does.
// The two probes run at once (each is a few python3 starts, slow through a pyenv shim).
func FindPythons(ctx context.Context) *Pythons {
	p := &Pythons{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Pytest, p.PytestErr = oracle.FindPython(ctx, true)
	}()
	p.Oracle, p.OracleErr = oracle.FindPython(ctx, false)
	<-done
	return p
}

// Checks re-runs the matrix's acceptance checks on the replay: the deliverables materialised from
// the recorded run's deliverable artifacts (what was on disk when it was checked) into the replay's
// member directories, the replayed trace (after the recorded runs of its lineage), the replayed
// team result, the gateway's records of the team's requests made while the recorded run was open,
// and the effect service's database. It records check_completed events in the replay run (no check
// rows: the replay run is accepted on its replay verdict) and returns the checks and the
// acceptance verdict they give.
func (t *ReplayTeam) Checks(ctx context.Context, ce ReplayCheckEnv) ([]evidence.Check, evidence.Verdict, error) {
	rc := t.rc
	if err := t.materialise(ctx); err != nil {
		return nil, evidence.Verdict{}, err
	}
	testTime := ce.TestDeadline
	if testTime <= 0 {
		testTime = 120 * time.Second
	}
	var prior []string
	for _, r := range rc.Lineage[:len(rc.Lineage)-1] {
		prior = append(prior, r.RunID)
	}
	state := &caseState{runID: t.runID, caseDir: t.CaseDir, model: rc.opts.Model, team: t.cr.team, plans: t.cr.plans, result: t.Result,
		teamErr: t.Err, gateway: ce.Gateway, store: t.env.store, testTime: testTime, entry: rc.c.Entry, language: rc.c.Language,
		spec: t.cr.spec, redactor: t.env.redactor, priorRuns: prior, mode: rc.opts.Mode, modelAliases: ce.ModelAliases,
		reference: rc.Run.Envelope.BaseURL == "", owned: rc.ownedSession,
		// The task is the recorded run's stored task file, re-derived when the replay was prepared.
		task: rc.c.task(), profile: rc.c.Profile.Name, goModule: rc.c.task().GoModule()}
	state.oracle = oracle.Options{WorkDir: t.CaseDir}
	if rc.c.Language == reference.LanguagePython {
		py := ce.Pythons
		if py == nil {
			py = FindPythons(ctx)
		}
		state.oracle.Python, state.oraclePythonErr, state.pytestPython, state.pytestPythonErr = py.Oracle, py.OracleErr, py.Pytest, py.PytestErr
	}
	if ce.Gateway != nil {
		state.gwFrom, state.gwTo = rc.gatewayWindow(ctx, ce.Gateway)
	}
	if err := state.prepareEvidence(ctx); err != nil {
		return nil, evidence.Verdict{}, fmt.Errorf("run %s: %w", t.runID, err)
	}
	var checks []evidence.Check
	for _, o := range evaluateChecks(ctx, state, Checks(), t.env.redactor, nil) {
		if err := t.engine.Emit(ctx, "", "", o.event); err != nil {
			return nil, evidence.Verdict{}, fmt.Errorf("run %s: record check %s: %w", t.runID, o.rec.Name, err)
		}
		checks = append(checks, o.rec)
	}
	return checks, caseVerdict(checks, t.engine, rc.Run.RunID), nil
}

// materialise writes each implementing member's declared files as the recorded run stored them
// when it was checked (its deliverable/<member>/<file> artifacts, digest verified) into the
// replay's member directories, and removes a file the run had no artifact for (it was missing).
func (t *ReplayTeam) materialise(ctx context.Context) error {
	links := map[string]string{}
	for _, a := range t.rc.Run.Artifacts {
		links[a.Name] = a.Digest
	}
	for _, p := range t.cr.plans {
		for _, f := range p.Deliverables {
			path := filepath.Join(p.Spec.Dir, filepath.FromSlash(f))
			digest, ok := links["deliverable/"+p.Spec.ID+"/"+f]
			if !ok {
				if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
				continue
			}
			data, err := verifiedArtifact(ctx, t.env.store, digest)
			if err != nil {
				return fmt.Errorf("run %s: deliverable %s/%s: %w", t.rc.Run.RunID, p.Spec.ID, f, err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// gatewayWindow bounds, by record id, the gateway's records of the team's sessions that arrived
// while the recorded run was open: the window its sessions check read.
func (rc *ReplayCase) gatewayWindow(ctx context.Context, gw *gateway.Gateway) (from, to int64) {
	recs, err := teamRecords(ctx, gw, rc.identity)
	if err != nil {
		return 0, 0
	}
	end := time.Now()
	if rc.Run.FinalizedAt != nil {
		end = *rc.Run.FinalizedAt
	}
	from, to = -1, 0
	for _, r := range recs {
		if r.StartedAt.Before(rc.Run.CreatedAt) || r.StartedAt.After(end) {
			continue
		}
		if from < 0 || r.ID-1 < from {
			from = r.ID - 1
		}
		to = max(to, r.ID)
	}
	if from < 0 {
		return 0, 0
	}
	return from, to
}

// ownedSession reports whether a session belongs to a team run of the store (a case of the matrix
// run that recorded it, as the original check knew them). The store does not record the gateway
// window each team ran in, so a replay's checks own a team's session in every record id (the
// matrix's own check, teamRuns.owns, owns it only inside the team's window): a request sent under
// a finished case's session during a later case, rejected by the recorded check, is not found by the
// replay's, and the replay reports the difference from the recorded verdict.
func (rc *ReplayCase) ownedSession(session string, _ int64) bool {
	for _, r := range rc.runs {
		// {run}-{member}, or a worktree member's {run}:{formation}:{member}.
		if !IsReplayRun(r) && (strings.HasPrefix(session, r.RunID+"-") || strings.HasPrefix(session, r.RunID+":")) {
			return true
		}
	}
	return false
}

// NewRunID returns a new globally unique run id (for a replay run).
func NewRunID() string { return newRunID() }

// VerifiedArtifact returns an artifact's bytes after checking their SHA-256 is its digest (a
// payload is verified before use, RISKS.md R11).
func VerifiedArtifact(ctx context.Context, store *evidence.Store, digest string) ([]byte, error) {
	return verifiedArtifact(ctx, store, digest)
}

// recordedProviderName is the ProviderName that names a recorded run's provider as its envelope
// did: "" for the default label ("reference", or the base URL), else the recorded name.
func recordedProviderName(e evidence.Envelope) string {
	if e.Provider == upstreamLabel(Options{BaseURL: e.BaseURL}) {
		return ""
	}
	return e.Provider
}
