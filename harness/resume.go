package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

// Durable pause and resume of a matrix case (SAFETY.md rule 14; docs/safety.md, "Pause and
// resume").
//
// A case of a durable formation (sequential, pipeline, parallel, hierarchical, consensus,
// reflection; not in an ensemble mode) runs with a durable engine: each member turn is
// checkpointed in the evidence store (a "checkpoint" event, then the state bound to it by
// evidence.SaveCheckpoint). When a call needs an approval nobody has given yet, or an effect ends
// unknown, the run pauses: it is finalized rejected, naming the pause.
//
// Resume continues such a run — paused, or interrupted by a crash — in a new run linked to it as a
// correction (evidence: corrects_run_id), whose run_resumed event (right after its boundary
// configuration) names the run and the checkpoint it continues from. The team keeps the first run's id, so session ids and idempotency
// keys continue. Before anything runs, resume re-checks the envelope against the current options
// (tenant, manifest, mode, policy: a changed policy file or case definition refuses), restores the
// boundary from every earlier run's journal (a call awaiting approval is asked again under the
// current policy, so stale approvals do not match; an intent without an outcome becomes unknown),
// dispatches the calls an approval now covers exactly, and reconciles unknown effects through the
// backend's receipt lookup. Then the formation replays over the checkpoint: ended turns are
// restored, paused turns continue, the rest run.

// ErrNotResumable is returned (wrapped, naming the reason) when a run cannot be resumed: unknown,
// still open, already resumed, completed without pausing, without a checkpoint, of a formation
// that does not resume, bound to an envelope the current options do not match, with a lineage or
// checkpoint that does not verify, or paused at calls no approval names. Nothing of any run was
// written when it is returned.
var ErrNotResumable = errors.New("run cannot be resumed")

// resumePoint is what a resumed run continues from.
type resumePoint struct {
	from       string   // the run resumed
	lineage    []string // the runs this one continues, first run first (from is last)
	journal    []tool.Record
	state      runtime.DurableState
	checkpoint evidence.Checkpoint
	consumed   map[string]runtime.Consumption
}

// recover records run_resumed, restores the boundary from the journal, dispatches what an approval
// now covers and reconciles unknown effects through the backend.
func (p *resumePoint) recover(ctx context.Context, e *runtime.Engine, team runtime.Team, prog *progress) error {
	if err := e.Emit(ctx, "", "", event.RunResumed{ResumesRunID: p.from, Lineage: p.lineage,
		TeamRunID: team.RunID, CheckpointSeq: p.checkpoint.Seq, CheckpointHash: p.checkpoint.Hash,
		CheckpointEventHash: p.checkpoint.EventHash, Turns: len(p.state.Turns), Pauses: p.state.Pauses}); err != nil {
		return fmt.Errorf("record run_resumed: %w", err)
	}
	members := func(id string) (tool.MemberContext, bool) {
		m, ok := team.Member(id)
		if !ok {
			return tool.MemberContext{}, false
		}
		allowed, ro := e.MemberTools(m)
		return tool.MemberContext{Root: m.Dir, Allowed: allowed, ReadOnly: ro}, true
	}
	b := e.Boundary()
	if _, err := b.Recover(ctx, p.journal, members); err != nil {
		return fmt.Errorf("restore the boundary: %w", err)
	}
	outs, err := b.DispatchApproved(ctx)
	if err != nil {
		return fmt.Errorf("dispatch approved calls: %w", err)
	}
	for _, o := range outs {
		prog.line("resume %s: approved call %s dispatched: %s", p.from, o.IdempotencyKey, o.State)
	}
	for _, r := range b.Effects(effect.AwaitingApproval) {
		if b.Approved(r.Key) {
			prog.line("resume %s: call %s is approved; it runs when its member reaches it, after the calls proposed before it", p.from, r.Key)
			continue
		}
		prog.line("resume %s: call %s still awaits approval", p.from, r.Key)
	}
	for _, r := range b.Effects(effect.Unknown) {
		o, err := b.Reconcile(ctx, r.Key)
		switch {
		case errors.Is(err, effect.ErrNoBackend):
			prog.line("resume %s: effect %s is unknown and no backend can be asked for its receipt; it stays unknown (assay reconcile)", p.from, r.Key)
		case err != nil:
			prog.line("resume %s: reconciling %s: %v; it stays unknown", p.from, r.Key, err)
		default:
			prog.line("resume %s: effect %s reconciled through the receipt lookup: %s", p.from, r.Key, o.State)
		}
	}
	return nil
}

// Resume continues run runID of the evidence store in opts.OutDir in a new run and returns that
// run's result (accepted, rejected, or paused again). The case is the one the run's manifest names;
// provider, policy, approvals, mode, budgets and tenant come from opts as for Run (the model and
// base URL default to the run's; ApprovalsFile defaults to ApprovalsPath(OutDir) when that file
// exists, where Grant writes). Errors: ErrBadOptions for options that cannot run,
// ErrNotResumable (nothing written) for a run that cannot be resumed, evidence.ErrLocked when
// another process holds the store, and what stopped the run itself.
func Resume(ctx context.Context, opts Options, runID string) (CaseResult, error) {
	sum, err := ResumeRun(ctx, opts, runID)
	if err != nil {
		return CaseResult{}, err
	}
	return sum.Cases[0], nil
}

// ResumeRun is Resume returning the summary a matrix run would (provider, store, output directory,
// and the one resumed case), for reports.
func ResumeRun(ctx context.Context, opts Options, runID string) (Summary, error) {
	start := time.Now()
	if opts.OutDir == "" {
		opts.OutDir = "assay-out"
	}
	if opts.Command == "" {
		opts.Command = "assay resume"
	}
	storePath := filepath.Join(opts.OutDir, "evidence.duckdb")
	if _, err := os.Stat(storePath); err != nil {
		return Summary{}, optionErr("OutDir", "%s holds no evidence store (it names the matrix run's output directory): %v", opts.OutDir, err)
	}
	if opts.ApprovalsFile == "" {
		// Where Grant writes by default: approving and resuming need no file named in between.
		if fi, err := os.Stat(ApprovalsPath(opts.OutDir)); err == nil && fi.Mode().IsRegular() {
			opts.ApprovalsFile = ApprovalsPath(opts.OutDir)
		}
	}
	// Every refusal is found on a read-only store first, so that a refused resume writes nothing:
	// no lock file, no writer session, no seal.
	ro, err := evidence.Open(ctx, storePath, evidence.OpenOptions{ReadOnly: true, Command: opts.Command, Wait: opts.StoreWait})
	if err != nil {
		return Summary{}, err
	}
	_, err = planResume(ctx, ro, storePath, opts, runID)
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Summary{}, err
	}
	store, err := evidence.Open(ctx, storePath, evidence.OpenOptions{Command: opts.Command, Wait: opts.StoreWait})
	if err != nil {
		return Summary{}, err
	}
	defer store.Close()
	p, err := planResume(ctx, store, storePath, opts, runID)
	if err != nil {
		return Summary{}, err
	}
	opts, c, cr, cp, state := p.opts, p.c, p.cr, p.checkpoint, p.state
	sum := Summary{Model: opts.Model, OutDir: opts.OutDir, StorePath: storePath, GatewayDB: filepath.Join(opts.OutDir, "gateway-usage.db")}
	env, closeEnv, err := openEnv(ctx, opts, store, &sum, 1)
	defer closeEnv()
	if err != nil {
		return Summary{}, err
	}
	newID := newRunID()
	if err := store.OpenRun(ctx, newID, p.envelope, runID); err != nil {
		return Summary{}, fmt.Errorf("open run %s: %w", newID, err)
	}
	manifestJSON, err := json.MarshalIndent(p.manifest, "", "  ")
	if err != nil {
		return Summary{}, err
	}
	if _, err := store.PutArtifact(ctx, newID, manifestArtifact, "application/json", manifestJSON); err != nil {
		return Summary{}, fmt.Errorf("run %s: store manifest: %w", newID, err)
	}
	if err := putTask(ctx, store, newID, c.task()); err != nil {
		return Summary{}, err
	}
	if err := putEnvironment(ctx, store, newID, opts.ToolVersion); err != nil {
		return Summary{}, err
	}
	env.progress.line("resuming run %s (case %s, checkpoint after event %d, %d turns) as run %s", runID, c.Name(), cp.Seq, len(state.Turns), newID)
	cr.runID, cr.start, cr.phase = newID, start, env.progress.start(0, c.Name())
	cr.sink = &storeSink{store: store, runID: newID, redactor: env.redactor}
	cr.resume = &resumePoint{from: runID, lineage: p.lineage, journal: p.journal, state: state, checkpoint: cp, consumed: p.consumed}
	res, err := executeCase(ctx, opts, c, env, cr)
	if err != nil {
		env.progress.stop(0, c.Name(), err)
		return sum, err
	}
	env.progress.finish(0, c.Name(), res)
	if sum.Sealed = store.Recovered(); len(sum.Sealed) > 0 {
		env.progress.line("sealed %d interrupted run(s), rejected as interrupted: %s", len(sum.Sealed), strings.Join(sum.Sealed, ", "))
	}
	if err := signRuns(ctx, opts, store, sum.Sealed...); err != nil {
		return sum, err
	}
	sum.Cases = []CaseResult{res}
	if env.reference != nil {
		sum.ReferenceHandlerSeconds = env.reference.HandlerTime().Seconds()
	}
	sum.Totals = SummarizeRun(sum.Cases, 1, time.Since(start))
	return sum, nil
}

// uncoveredWaits returns the keys of the calls a paused run waits for when every one of them awaits
// an approval that no entry of the approval file names (by run, member and call id) and nothing
// else could change: resuming it would only pause again. It returns nil when any paused call is
// unknown (a lookup may resolve it), any turn was in flight, or any awaited call is named.
func uncoveredWaits(state runtime.DurableState, journal []tool.Record, file *policy.ApprovalFile) []string {
	effs, err := tool.Replay(journal, false)
	if err != nil {
		return nil
	}
	states := map[string]effect.State{}
	for _, e := range effs {
		states[e.IdempotencyKey] = e.State
	}
	var waits []string
	for _, t := range state.Turns {
		switch t.Status {
		case runtime.TurnInFlight:
			return nil
		case runtime.TurnPaused:
			if len(t.Pending) == 0 {
				continue // stopped before a provider request because the run paused: it waits on nothing
			}
			key := state.RunID + ":" + t.MemberID + ":" + t.Pending[0].CallID
			if states[key] != effect.AwaitingApproval {
				return nil
			}
			if file != nil && slices.ContainsFunc(file.Approvals, func(a policy.FileApproval) bool {
				return (a.RunID == "" || a.RunID == state.RunID) && a.MemberID == t.MemberID && a.CallID == t.Pending[0].CallID
			}) {
				return nil
			}
			waits = append(waits, key)
		}
	}
	return waits
}

// resumePlan is what a resume continues from, once every check passed.
type resumePlan struct {
	opts       Options
	c          Case
	cr         caseRun
	manifest   manifest
	envelope   evidence.Envelope
	checkpoint evidence.Checkpoint
	state      runtime.DurableState
	lineage    []string
	journal    []tool.Record
	consumed   map[string]runtime.Consumption
}

// planResume makes every check a resume needs before anything is written: the run exists and is
// not open, it was not resumed already, its case is known, the envelope matches the options given
// now, the lineage verifies, the checkpoint is the one its chained event names, and there is
// something to resume. opts is completed from the run (case, model, base URL, budgets).
// recordedBoundaryOptions fills the options a resume was not given from what run recorded: its
// mode and tenant from the envelope, and, when the run was decided by a policy file, that file as
// its boundary_configured event names it, provided it still has the run's digest. An option that
// was given is kept: the envelope check refuses it when it differs from the run's.
//
// Errors: reading the run's events; ErrPolicyUnavailable when the recorded policy file is gone or
// changed and none was given.
func recordedBoundaryOptions(ctx context.Context, store *evidence.Store, run evidence.RunSummary, opts *Options) error {
	if opts.Mode == "" {
		opts.Mode = run.Envelope.Mode
	}
	if opts.Tenant == "" {
		opts.Tenant = run.Envelope.Tenant
	}
	if opts.PolicyFile != "" || run.Envelope.PolicyDigest == "" {
		return nil
	}
	evs, err := store.Events(ctx, run.RunID)
	if err != nil {
		return fmt.Errorf("its events: %w", err)
	}
	i := slices.IndexFunc(evs, func(ev evidence.StoredEvent) bool { return ev.Type == event.TypeBoundaryConfigured })
	if i < 0 {
		return nil // no policy file named: the envelope check decides
	}
	b, err := event.Decode[event.BoundaryConfigured](evs[i].Type, evs[i].Payload)
	if err != nil {
		return fmt.Errorf("its boundary configuration (event %d): %w", evs[i].Seq, err)
	}
	if b.PolicyFile == "" {
		return nil // no policy file named: the envelope check decides
	}
	opts.PolicyFile, err = recordedPolicyFile(b.PolicyFile, run.Envelope.PolicyDigest)
	return err
}

func planResume(ctx context.Context, store *evidence.Store, storePath string, opts Options, runID string) (*resumePlan, error) {
	notResumable := func(format string, args ...any) error {
		return fmt.Errorf("%w: run %s: %s", ErrNotResumable, runID, fmt.Sprintf(format, args...))
	}
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	byID := map[string]evidence.RunSummary{}
	for _, r := range runs {
		byID[r.RunID] = r
	}
	run, ok := byID[runID]
	switch {
	case !ok:
		return nil, notResumable("no such run in %s", storePath)
	case run.Status == evidence.StatusOpen && !run.Interrupted:
		return nil, notResumable("it is still open (being written)")
	}
	// The lineage: the run, and the runs it resumed, back to the first.
	lineage := []string{runID}
	for r := run; r.CorrectsRunID != ""; {
		parent, ok := byID[r.CorrectsRunID]
		if !ok {
			return nil, notResumable("the run it continues, %s, is not in the store", r.CorrectsRunID)
		}
		lineage = append([]string{parent.RunID}, lineage...)
		r = parent
	}
	identity := lineage[0]
	if by := ResumedBy(runs, runID); by != "" {
		// Name the newest run of the lineage, which is the one to resume if any is.
		last := by
		for next := ResumedBy(runs, last); next != ""; next = ResumedBy(runs, last) {
			last = next
		}
		lr := byID[last]
		switch {
		case lr.Status == evidence.StatusFinalized && lr.Verdict != nil && lr.Verdict.Verdict == evidence.VerdictAccepted:
			return nil, notResumable("it was already resumed, and its lineage ended in run %s, accepted: there is nothing left to resume", last)
		case last == by:
			return nil, notResumable("it was already resumed by run %s; resume that one", by)
		}
		return nil, notResumable("it was already resumed; the newest run of its lineage is %s: resume that one", last)
	}
	var m manifest
	if err := readManifest(ctx, store, run, &m); err != nil {
		return nil, notResumable("%v", err)
	}
	entry, err := LookupCase(m.Catalog)
	if err != nil {
		return nil, notResumable("its case %q is not in this catalog", m.Catalog)
	}
	if entry, err = entry.withFormationOptions(m.FormationOptions); err != nil {
		return nil, notResumable("its formation options: %v", err)
	}
	// The task is the run's recorded task file, re-applied; another one is refused.
	task, err := taskOfRun(ctx, store, run, m)
	if err != nil {
		return nil, fmt.Errorf("%w: run %s: its task: %w", ErrNotResumable, runID, err)
	}
	if err := sameTask(opts.Task, task); err != nil {
		return nil, fmt.Errorf("%w: run %s: %w", ErrNotResumable, runID, err)
	}
	opts.Formations, opts.Profile, opts.Language, opts.Stream = []string{entry.Name}, m.Profile, m.Language, m.Stream
	if err := recordedBoundaryOptions(ctx, store, run, &opts); err != nil {
		return nil, fmt.Errorf("%w: run %s: %w", ErrNotResumable, runID, err)
	}
	if opts.BaseURL == "" {
		opts.BaseURL = run.Envelope.BaseURL
	}
	if opts.Model == "" {
		opts.Model = run.Envelope.Model
	}
	// The provider name and repeat index are the run's as recorded, never the current invocation's
	// (the task is the run's recorded task file, re-applied below).
	opts.ProviderName, opts.Repeat = recordedProviderName(run.Envelope), 0
	// The budgets are the team run's, as its first run recorded them: a pause does not reset them
	// (and what was consumed before is charged again on restore).
	if err := budgetsOf(ctx, store, lineage[0], &opts); err != nil {
		return nil, notResumable("%v", err)
	}
	opts.Task = ""
	if err := opts.Normalize(); err != nil {
		return nil, err
	}
	opts.task = task
	c := Case{Entry: entry, Profile: Profiles()[opts.Profile], Language: opts.Language, Task: task, Repeat: run.Envelope.Repeat}
	cr, newManifest, envelope, err := prepareCase(opts, c, identity, false)
	if err != nil {
		return nil, err
	}
	if !formation.Resumable(c.Entry.Formation, c.Entry.Options()) {
		return nil, notResumable("formation %s does not resume durably", c.Entry.Formation)
	}
	req := evidence.ResumeRequest{Tenant: envelope.Tenant, ManifestDigest: envelope.ManifestDigest, Mode: envelope.Mode,
		PolicyDigest: envelope.PolicyDigest, DatasetDigest: envelope.DatasetDigest, Case: envelope.Case, Task: envelope.Task, Repeat: envelope.Repeat}
	// A resume that stopped before its first checkpoint continues from the checkpoint it started
	// from (its parent's): what it did meanwhile is in its journal, which recovery reads.
	cpRun := runID
	cp, err := store.LoadCheckpoint(ctx, runID, -1, req)
	if errors.Is(err, evidence.ErrNoCheckpoint) && len(lineage) > 1 && run.Interrupted {
		cpRun = lineage[len(lineage)-2]
		cp, err = store.LoadCheckpoint(ctx, cpRun, -1, req)
	}
	if err != nil {
		if errors.Is(err, evidence.ErrEnvelopeMismatch) {
			var em *evidence.EnvelopeMismatchError
			if errors.As(err, &em) {
				return nil, notResumable("the options given differ from the run's in %s (the mode, tenant and policy file default to the run's: give none of them, or the run's; a case definition changed since the run cannot be resumed)", strings.Join(em.Fields, ", "))
			}
			return nil, notResumable("%v (the mode, tenant and policy file default to the run's: give none of them, or the run's; a case definition changed since the run cannot be resumed)", err)
		}
		return nil, notResumable("%v", err)
	}
	// Nothing is resumed from evidence that does not verify: every run of the family must verify
	// (the run being resumed may be unfinalized when it was interrupted), and the checkpoint's state
	// must be the one its chained checkpoint event names.
	for _, v := range mustVerify(ctx, store, runs, runID, &err) {
		if v.Passed() {
			continue
		}
		return nil, notResumable("run %s of its lineage does not verify (%s: %s)", v.RunID, v.Status, v.Detail)
	}
	if err != nil {
		return nil, notResumable("verify its lineage: %v", err)
	}
	if err := checkpointEventMatches(ctx, store, cpRun, cp); err != nil {
		return nil, notResumable("%v", err)
	}
	var state runtime.DurableState
	if err := json.Unmarshal(cp.State, &state); err != nil {
		return nil, notResumable("its checkpoint state does not decode: %v", err)
	}
	if err := runtime.ValidateDurableState(&state); err != nil {
		return nil, notResumable("%v", err)
	}
	if state.RunID != identity {
		return nil, notResumable("its checkpoint is of team run %s, its lineage starts at %s", state.RunID, identity)
	}
	if run.Status == evidence.StatusFinalized && !state.Paused {
		return nil, notResumable("it completed without pausing; there is nothing to resume")
	}
	journal, err := FamilyRecords(ctx, store, runs, runID)
	if err != nil {
		return nil, err
	}
	used, err := consumed(ctx, store, runs, runID)
	if err != nil {
		return nil, err
	}
	if run.Status == evidence.StatusFinalized {
		if waits := uncoveredWaits(state, journal, opts.approvals); len(waits) > 0 {
			return nil, notResumable("nothing it waits for was given: no approval names %s (approvals read from: %s)",
				strings.Join(waits, ", "), labelOr(opts.ApprovalsFile, "none"))
		}
	}

	return &resumePlan{opts: opts, c: c, cr: cr, manifest: newManifest, envelope: envelope, checkpoint: cp, state: state,
		lineage: lineage, journal: journal, consumed: used}, nil
}

// ResumedBy returns a run that continues runID, "" when none: a run linked to it that holds a case
// manifest or checkpoints (what a resume writes first), or one not finalized (a resume that stopped
// early; a reconciliation correction is finalized when it is written). One run is resumed once, so
// its lineage never branches.
func ResumedBy(runs []evidence.RunSummary, runID string) string {
	for _, r := range runs {
		if r.CorrectsRunID != runID || IsReplayRun(r) {
			continue // a replay is linked to the run it replays, and continues nothing
		}
		if len(r.Checkpoints) > 0 || r.Status != evidence.StatusFinalized || slices.ContainsFunc(r.Artifacts,
			func(a evidence.ArtifactLink) bool { return a.Name == manifestArtifact }) {
			return r.RunID
		}
	}
	return ""
}

// mustVerify verifies runID's family and returns the results; an error is stored in *errp.
func mustVerify(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, runID string, errp *error) []evidence.RunVerification {
	var ids []string
	for _, r := range Family(runs, runID) {
		ids = append(ids, r.RunID)
	}
	vs, err := store.Verify(ctx, ids...)
	if err != nil {
		*errp = err
	}
	return vs
}

// checkpointEventMatches checks that the event a checkpoint follows is the checkpoint event that
// names the state's SHA-256, and that it is the run's last checkpoint event: the events are in the
// hash chain, so a state rewritten with its row hash recomputed does not match, and a deleted newer
// checkpoint does not let the resume start from an older one.
func checkpointEventMatches(ctx context.Context, store *evidence.Store, runID string, cp evidence.Checkpoint) error {
	evs, err := store.Events(ctx, runID)
	if err != nil {
		return fmt.Errorf("its events: %w", err)
	}
	var last int64 = -1
	matched := false
	for _, ev := range evs {
		if ev.Type == event.TypeCheckpoint {
			last = ev.Seq
		}
		if ev.Seq != cp.Seq {
			continue
		}
		sum := sha256.Sum256(cp.State)
		if p, err := event.Decode[event.Checkpoint](ev.Type, ev.Payload); err != nil || p.StateSHA256 != hex.EncodeToString(sum[:]) {
			return fmt.Errorf("its checkpoint after event %d is not the state its chained %s event names", cp.Seq, ev.Type)
		}
		matched = true
	}
	switch {
	case !matched:
		return fmt.Errorf("the event its checkpoint follows (%d) is missing", cp.Seq)
	case last != cp.Seq:
		// A later checkpoint event without its state: resuming from an older one would repeat work.
		return fmt.Errorf("its latest checkpoint event is %d, but the latest stored checkpoint follows event %d", last, cp.Seq)
	}
	return nil
}

// budgetsOf sets opts' tool-call and token limits to those run runID recorded in its
// boundary_configured event.
func budgetsOf(ctx context.Context, store *evidence.Store, runID string, opts *Options) error {
	evs, err := store.Events(ctx, runID)
	if err != nil {
		return fmt.Errorf("run %s events: %w", runID, err)
	}
	for _, ev := range evs {
		if ev.Type != event.TypeBoundaryConfigured {
			continue
		}
		b, err := event.Decode[event.BoundaryConfigured](ev.Type, ev.Payload)
		if err != nil {
			return fmt.Errorf("run %s boundary_configured: %w", runID, err)
		}
		opts.MemberToolCalls, opts.TeamToolCalls, opts.MemberTokens, opts.TeamTokens = b.MemberToolCalls, b.TeamToolCalls, b.MemberTokens, b.TeamTokens
		return nil
	}
	return fmt.Errorf("run %s recorded no boundary configuration (its budgets are unknown)", runID)
}

// readManifest reads run r's stored case manifest into m.
func readManifest(ctx context.Context, store *evidence.Store, r evidence.RunSummary, m *manifest) error {
	for _, a := range r.Artifacts {
		if a.Name != manifestArtifact {
			continue
		}
		b, err := store.Artifact(ctx, a.Digest)
		if err != nil {
			return fmt.Errorf("its manifest: %w", err)
		}
		if err := json.Unmarshal(b, m); err != nil {
			return fmt.Errorf("its manifest does not decode: %w", err)
		}
		return nil
	}
	return errors.New("it has no case manifest (not a matrix case run)")
}
