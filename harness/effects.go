package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/runid"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// Operations on the effects a matrix run recorded: listing them (Effects), resolving one whose
// outcome is unknown (Reconcile) and approving one that awaits approval (PrepareApproval, Grant).
// Each reads the evidence store the way Resume does: the effects of a team run are its first
// run's, its resumed runs' and its corrections' tool events, folded through tool.Replay (Family).

var (
	// ErrNoCall: the run's team run has no tool call by that reference, or several members used
	// the call id given (the error names their idempotency keys). Nothing was written.
	ErrNoCall = errors.New("no such tool call")
	// ErrEffectState: the effect is not in the state the operation acts on (Reconcile: unknown;
	// an approval: awaiting_approval, with the policy scope, schema digest and payload hash an
	// approval binds), or its run cannot let it change (a run still executing; a finalized run
	// that did not pause, whose calls nothing can dispatch). Nothing was written.
	ErrEffectState = errors.New("the effect's state does not allow it")
)

// EffectsQuery selects what Effects lists.
type EffectsQuery struct {
	// StorePath is the evidence store file (e.g. "assay-out/evidence.duckdb"), opened read-only.
	StorePath string
	// Runs are runs whose team run's effects to list, each any run of its team run (the first
	// run, a resumed run or a correction), in order; none lists every team run once.
	Runs []string
	// State keeps only effects in this state (one of effect.States); "" keeps all.
	State string
	// Wait and Command are as for evidence.OpenOptions.
	Wait    time.Duration
	Command string
}

// Effects returns the effects of the team runs q selects, as everything recorded establishes
// them: each team run's tool_call and tool_result events, from its first run, the runs that
// resumed it and its reconciliation corrections, folded through tool.Replay in creation order (an
// in-flight call of a run still open is running; of a finished or interrupted run, unknown). The
// slice is in team run order, then call order; nil when nothing matches.
//
// Errors: an *OptionError (ErrBadOptions) for a State that is not an effect state; evidence.Open's
// (ErrNoStore, ErrLocked, ...); evidence.ErrNoRun for a named run the store lacks.
func Effects(ctx context.Context, q EffectsQuery) ([]tool.Effect, error) {
	if q.State != "" && !effect.State(q.State).Valid() {
		return nil, optionErr("State", "%q is not one of %s", q.State, stateNames())
	}
	store, all, runs, err := openRuns(ctx, q.StorePath, evidence.OpenOptions{ReadOnly: true, Wait: q.Wait, Command: q.Command}, q.Runs)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	var out []tool.Effect
	for _, r := range runs {
		effs, err := teamEffects(ctx, store, all, r)
		if err != nil {
			return nil, err
		}
		for _, e := range effs {
			if q.State == "" || string(e.State) == q.State {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// stateNames is "awaiting_approval, pending, ..." for messages.
func stateNames() string {
	var names []string
	for _, s := range effect.States() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// openRuns opens the store at path, lists its runs (all) and selects the named ones (selectRuns).
// The caller closes the store; on error it is closed already.
func openRuns(ctx context.Context, path string, opts evidence.OpenOptions, names []string) (*evidence.Store, []evidence.RunSummary, []evidence.RunSummary, error) {
	store, err := evidence.Open(ctx, path, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := store.Runs(ctx)
	if err != nil {
		store.Close()
		return nil, nil, nil, fmt.Errorf("list runs: %w", err)
	}
	selected, err := selectRuns(all, store.Path(), names)
	if err != nil {
		store.Close()
		return nil, nil, nil, err
	}
	return store, all, selected, nil
}

// selectRuns returns the named runs of all (each must exist: no fallback to another), or, with none
// named, every run that is not itself a continuation or correction: each team run once.
func selectRuns(all []evidence.RunSummary, storePath string, names []string) ([]evidence.RunSummary, error) {
	if len(names) == 0 {
		return slices.DeleteFunc(slices.Clone(all), func(r evidence.RunSummary) bool { return r.CorrectsRunID != "" }), nil
	}
	var out []evidence.RunSummary
	for _, n := range names {
		i := slices.IndexFunc(all, func(r evidence.RunSummary) bool { return r.RunID == n })
		if i < 0 {
			return nil, fmt.Errorf("%w %q in %s", evidence.ErrNoRun, n, storePath)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// teamEffects replays the tool events of r's team run (Family) in creation order, and says of each
// effect which run of the family first recorded it and which recorded its dispatch.
func teamEffects(ctx context.Context, store *evidence.Store, all []evidence.RunSummary, r evidence.RunSummary) ([]tool.Effect, error) {
	family := Family(all, r.RunID)
	var records []tool.Record
	proposed, dispatched := map[string]string{}, map[string]string{}
	for _, f := range family {
		recs, err := ToolRecords(ctx, store, f.RunID)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.Intent == nil {
				continue
			}
			key := rec.Intent.IdempotencyKey
			if _, ok := proposed[key]; !ok {
				proposed[key] = f.RunID
			}
			if rec.Intent.Dispatched {
				dispatched[key] = f.RunID
			}
		}
		records = append(records, recs...)
	}
	open := slices.ContainsFunc(family, func(f evidence.RunSummary) bool { return f.Status == evidence.StatusOpen })
	effs, err := tool.Replay(records, open)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", r.RunID, err)
	}
	for i := range effs {
		key := effs[i].IdempotencyKey
		effs[i].ProposedIn = proposed[key]
		if d, ok := dispatched[key]; ok {
			effs[i].DispatchedIn = &d
		}
	}
	return effs, nil
}

// findEffect returns the effect of effs that call names: its idempotency key, MEMBER:CALL_ID, or
// a call id exactly one member used. A missing or ambiguous call is ErrNoCall; nothing is guessed.
func findEffect(effs []tool.Effect, runID, call string) (tool.Effect, error) {
	var match []tool.Effect
	for _, e := range effs {
		if e.IdempotencyKey == call || e.CallID == call || e.MemberID+":"+e.CallID == call {
			match = append(match, e)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return tool.Effect{}, fmt.Errorf("%w: run %s has no tool call %q", ErrNoCall, runID, call)
	}
	var keys []string
	for _, e := range match {
		keys = append(keys, e.IdempotencyKey)
	}
	return tool.Effect{}, fmt.Errorf("%w: call id %q is used by several members of run %s; name one of %s", ErrNoCall, call, runID, strings.Join(keys, ", "))
}

// stateOf is the effect state name for messages.
func stateOf(e tool.Effect) string {
	if e.State == effect.Unknown {
		return "unknown (reconciliation required)"
	}
	return string(e.State)
}

// ReconcileRequest asks Reconcile to resolve one effect whose outcome is unknown: by the effect
// service's receipt (Lookup) or by an operator's decision (Outcome, Note, Operator).
type ReconcileRequest struct {
	// StorePath is the evidence store file, opened for writing.
	StorePath string
	// RunID is any run of the effect's team run; Call names the call in it (see Effects): its
	// idempotency key (RUN:MEMBER:CALL_ID), MEMBER:CALL_ID, or a call id one member used.
	RunID, Call string
	// Lookup resolves the effect from the receipt the effect service keeps under its idempotency
	// key, read from EffectsDB (default EffectsDBPath of the store's directory, where the embedded
	// reference provider keeps it), so it works after the service is gone.
	Lookup    bool
	EffectsDB string
	// Outcome is an operator's decision, tool.StateSucceeded or tool.StateFailed, instead of
	// Lookup; Note (the evidence it rests on) and Operator (who decides) are then required.
	Outcome, Note, Operator string
	// Wait and Command are as for evidence.OpenOptions.
	Wait    time.Duration
	Command string
}

// Reconciliation is what Reconcile recorded.
type Reconciliation struct {
	// Effect is the effect as it was (unknown); Outcome the tool_result recorded for it.
	Effect  tool.Effect
	Outcome tool.Outcome
	// How is "operator decision" or "receipt lookup, receipt REF".
	How string
	// RunID is the run the request named; CorrectionRunID the new finalized run holding the
	// outcome, linked to it (corrects_run_id).
	RunID, CorrectionRunID string
}

// Reconcile resolves one effect whose outcome is unknown and records the resolution as a
// tool_result event in a new correction run linked to the request's run (finalized runs are
// immutable), finalized non_certifiable: recording a resolution certifies nothing; the case's
// checks decide acceptance. Effects folds the correction in. The state change goes through the
// same transition guard as the runtime: only an unknown effect can be resolved, only to succeeded
// or failed, and a terminal outcome is never revised. The note recorded passes the redaction of
// secret-looking environment variables (policy.SecretsFromEnv over os.Environ).
//
// Errors, with nothing recorded: an *OptionError (ErrBadOptions) for a request that says neither
// or both of Lookup and Outcome, an Outcome that is not succeeded or failed, a missing Note or
// Operator, or no effects database at EffectsDB (or at the default); evidence.Open's errors;
// evidence.ErrNoRun; ErrNoCall; ErrEffectState for a run still open or an effect that is not
// unknown; with Lookup, ErrNoReceipt (the effect stays unknown) or ErrReceiptPayloadMismatch,
// reference.ErrNotEffectsDB, or the database's read error. An error after the correction run was
// opened names it.
func Reconcile(ctx context.Context, req ReconcileRequest) (Reconciliation, error) {
	if err := req.validate(); err != nil {
		return Reconciliation{}, err
	}
	// Every refusal is found on a read-only store first, so that a refused reconciliation writes
	// nothing: no store created where none was, no lock file, no writer session.
	ro, all, runs, err := openRuns(ctx, req.StorePath, evidence.OpenOptions{ReadOnly: true, Wait: req.Wait, Command: req.Command}, []string{req.RunID})
	if err != nil {
		return Reconciliation{}, err
	}
	r, e, err := unknownEffect(ctx, ro, all, runs[0], req.Call)
	if cerr := ro.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Reconciliation{}, err
	}
	redact := policy.NewRedactor(policy.SecretsFromEnv(os.Environ())...)
	rec := Reconciliation{Effect: e, RunID: r.RunID, How: "operator decision"}
	if req.Lookup {
		if rec.Outcome, err = req.lookup(ctx, e); err != nil {
			return Reconciliation{}, err
		}
		rec.Outcome.Note = redact.String(rec.Outcome.Note)
		rec.How = "receipt lookup, receipt " + rec.Outcome.Receipt.Reference
	} else {
		to := effect.State(req.Outcome)
		if _, err := effect.Transition(e.State, effect.Event{Kind: effect.Reconcile, To: to}); err != nil {
			return Reconciliation{}, fmt.Errorf("%w: effect %s: %w; nothing recorded", ErrEffectState, e.IdempotencyKey, err)
		}
		rec.Outcome = tool.Outcome{RunID: e.RunID, MemberID: e.MemberID, SessionID: e.SessionID, CallID: e.CallID,
			IdempotencyKey: e.IdempotencyKey, Tool: e.Tool, State: req.Outcome, Source: "operator", Mode: e.Mode,
			Note: redact.String(fmt.Sprintf("%s (operator %s)", req.Note, req.Operator)), Revision: e.Intent.Revision}
		if to == effect.Succeeded {
			rec.Outcome.Result = "effect confirmed by operator"
		}
	}
	if rec.CorrectionRunID, err = correctionRunID(r.RunID); err != nil {
		return Reconciliation{}, err
	}
	// The writer re-reads the effect under its lock: another process may have reconciled it since.
	store, all, runs, err := openRuns(ctx, req.StorePath, evidence.OpenOptions{Wait: req.Wait, Command: req.Command}, []string{req.RunID})
	if err != nil {
		return Reconciliation{}, err
	}
	defer store.Close()
	if r, _, err = unknownEffect(ctx, store, all, runs[0], e.IdempotencyKey); err != nil {
		return Reconciliation{}, err
	}
	reason := fmt.Sprintf("reconciliation of %s in run %s (%s): %s; a recorded resolution certifies nothing",
		e.IdempotencyKey, r.RunID, rec.How, rec.Outcome.State)
	if err := recordCorrection(ctx, store, r, rec.CorrectionRunID, rec.Outcome, reason); err != nil {
		return Reconciliation{}, err
	}
	return rec, nil
}

// unknownEffect returns run r (any run of its team run) and its team run's effect call names,
// when r has ended and that effect's outcome is unknown. Errors: ErrEffectState for a run still
// open or an effect in another state; ErrNoCall; the store's.
func unknownEffect(ctx context.Context, store *evidence.Store, all []evidence.RunSummary, r evidence.RunSummary, call string) (evidence.RunSummary, tool.Effect, error) {
	if r.Status == evidence.StatusOpen {
		return r, tool.Effect{}, fmt.Errorf("%w: run %s is still executing (status open); reconcile its effects after it ends", ErrEffectState, r.RunID)
	}
	effs, err := teamEffects(ctx, store, all, r)
	if err != nil {
		return r, tool.Effect{}, err
	}
	e, err := findEffect(effs, r.RunID, call)
	if err != nil {
		return r, tool.Effect{}, err
	}
	if e.State != effect.Unknown {
		return r, tool.Effect{}, fmt.Errorf("%w: effect %s is %s, not unknown: nothing to reconcile, nothing recorded", ErrEffectState, e.IdempotencyKey, stateOf(e))
	}
	return r, e, nil
}

// validate refuses a request that cannot say how the effect is resolved.
func (req ReconcileRequest) validate() error {
	switch {
	case req.Lookup && req.Outcome != "":
		return optionErrRelated("Lookup", []string{"Outcome"}, "excludes Outcome: the receipt decides, or the operator does")
	case req.Lookup:
		return nil
	case req.Outcome == "":
		return optionErrRelated("Outcome", []string{"Lookup", "Note"}, "is required without Lookup: say how to resolve it, Lookup (the backend's receipt) "+
			"or Outcome succeeded or failed with a Note")
	case req.Outcome != tool.StateSucceeded && req.Outcome != tool.StateFailed:
		return optionErr("Outcome", "must be %s or %s, got %q", tool.StateSucceeded, tool.StateFailed, req.Outcome)
	case strings.TrimSpace(req.Note) == "":
		return optionErr("Note", "is required: say what evidence the decision rests on")
	case strings.TrimSpace(req.Operator) == "":
		return optionErr("Operator", "is required: say who decides")
	}
	return nil
}

// lookup resolves e through the effect service's receipt (ReconcileThroughLookup) in the database
// req names, or the one beside the store.
func (req ReconcileRequest) lookup(ctx context.Context, e tool.Effect) (tool.Outcome, error) {
	path := req.EffectsDB
	if path == "" {
		path = EffectsDBPath(filepath.Dir(req.StorePath))
	}
	db, err := reference.OpenEffectsReader(ctx, path)
	switch {
	case errors.Is(err, reference.ErrNoEffectsDB) && req.EffectsDB != "":
		return tool.Outcome{}, optionErrRelated("EffectsDB", []string{"Outcome"}, "names no file: there is no effects database at %s; name the file the effect service kept its receipts in, or decide with Outcome", path)
	case errors.Is(err, reference.ErrNoEffectsDB):
		return tool.Outcome{}, optionErrRelated("EffectsDB", []string{"Outcome"}, "is not given and there is no effects database at %s: the run's effects were not served by the embedded effect service there; name the database, or decide with Outcome", path)
	case err != nil:
		return tool.Outcome{}, err
	}
	defer db.Close()
	out, err := ReconcileThroughLookup(ctx, db, e)
	switch {
	case errors.Is(err, ErrNoReceipt):
		return tool.Outcome{}, fmt.Errorf("%w %s in %s: the effect stays unknown, nothing recorded", ErrNoReceipt, e.IdempotencyKey, db.Path())
	case err != nil:
		return tool.Outcome{}, fmt.Errorf("receipt lookup for %s did not resolve it: %w; nothing recorded", e.IdempotencyKey, err)
	}
	return out, nil
}

// recordCorrection records out as a tool_result event in a new run corrID linked to r (with r's
// envelope) and finalizes it non_certifiable, giving reason.
func recordCorrection(ctx context.Context, store *evidence.Store, r evidence.RunSummary, corrID string, out tool.Outcome, reason string) error {
	ev, err := runtime.NewEvent(out.MemberID, out.SessionID, event.ToolResult{Outcome: out})
	if err != nil {
		return err
	}
	if err := store.OpenRun(ctx, corrID, r.Envelope, r.RunID); err != nil {
		return fmt.Errorf("open correction run for %s: %w", r.RunID, err)
	}
	if _, err := store.AppendEvent(ctx, corrID, evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: ev.SessionID,
		Time: ev.Time, Payload: ev.Payload}); err != nil {
		return fmt.Errorf("record the resolution in correction run %s: %w", corrID, err)
	}
	if _, err := store.Finalize(ctx, corrID, evidence.Verdict{Verdict: evidence.VerdictNonCertifiable, Reasons: []string{reason}}); err != nil {
		return fmt.Errorf("finalize correction run %s: %w", corrID, err)
	}
	return nil
}

// correctionRunID returns a new globally unique run id for a correction of runID: runID, then
// "-reconcile-" and internal/runid's time and random suffix, runID cut so the id keeps to the
// store's 128 characters at most.
func correctionRunID(runID string) (string, error) {
	const infix = "-reconcile-"
	if max := 128 - len(infix) - runid.SuffixLen; len(runID) > max {
		runID = runID[:max]
	}
	return runid.New(runID+infix, time.Now()), nil
}
