package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

// ApprovalsFileName is the approval file Grant writes by default, in the output directory beside
// the evidence store, and Resume reads by default.
const ApprovalsFileName = "approvals.json"

// ApprovalsPath returns the default approval file of the output directory outDir.
func ApprovalsPath(outDir string) string { return filepath.Join(outDir, ApprovalsFileName) }

// ApprovalPrefixLen is how many hex characters of the payload SHA-256 an approver types to confirm
// an approval (PendingApproval.ConfirmedBy): enough that approving without reading the hash shown
// is not an accident.
const ApprovalPrefixLen = 12

// ApprovalRequest asks for an approval of one call awaiting approval (PrepareApproval), and says
// how it is granted (PendingApproval.Grant).
type ApprovalRequest struct {
	// StorePath is the evidence store file, opened read-only.
	StorePath string
	// RunID is any run of the call's team run (the paused run, or a run that resumed it: the
	// approval binds the call, whose key keeps the first run's id); Call names the call as for
	// ReconcileRequest.
	RunID, Call string
	// File is the approval file the grant is added to; "" is ApprovalsPath of the store's
	// directory. Entries for other calls are kept; an earlier entry for the same call is replaced.
	File string
	// Approver is who approves; required.
	Approver string
	// Expires is how long the approval stays valid (> 0).
	Expires time.Duration
	// Disclose also approves showing the call's result to the member. Approval to act is not
	// approval to disclose: without it the member is told a write succeeded, not shown its output.
	Disclose bool
	// Wait and Command are as for evidence.OpenOptions.
	Wait    time.Duration
	Command string
}

// PendingApproval is a call awaiting approval, with everything an approval of it binds: the call
// id, the canonical payload's SHA-256, the tool's schema digest and access mode, the session and
// the policy scope (Effect.Intent).
type PendingApproval struct {
	// Effect is the call; Effect.Intent holds the binding and the arguments as recorded (with
	// credentials redacted; the hash is over the arguments as the member proposed them).
	Effect tool.Effect
	req    ApprovalRequest
}

// PrepareApproval finds the call req names and checks that an approval of it could ever be acted
// on, without writing anything: the call awaits approval, its intent records what an approval
// binds, and the newest run of its team run is not finalized without a pause (a run that completed,
// or whose formation does not resume durably, can dispatch nothing; a paused or interrupted durable
// run's approval is for Resume).
//
// Errors: an *OptionError (ErrBadOptions) for Expires not positive or no Approver; evidence.Open's
// errors; evidence.ErrNoRun; ErrNoCall; ErrEffectState for a call that is not awaiting approval,
// has no binding recorded, or that no run can dispatch.
func PrepareApproval(ctx context.Context, req ApprovalRequest) (*PendingApproval, error) {
	switch {
	case req.Expires <= 0:
		return nil, optionErr("Expires", "must be positive, got %s", req.Expires)
	case strings.TrimSpace(req.Approver) == "":
		return nil, optionErr("Approver", "is required: say who approves")
	}
	store, all, runs, err := openRuns(ctx, req.StorePath, evidence.OpenOptions{ReadOnly: true, Wait: req.Wait, Command: req.Command}, []string{req.RunID})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	effs, err := teamEffects(ctx, store, all, runs[0])
	if err != nil {
		return nil, err
	}
	if err := canStillDispatch(ctx, store, all, runs[0]); err != nil {
		return nil, err
	}
	e, err := findEffect(effs, req.RunID, req.Call)
	if err != nil {
		return nil, err
	}
	if e.State != effect.AwaitingApproval {
		return nil, fmt.Errorf("%w: call %s is %s, not awaiting approval; nothing approved", ErrEffectState, e.IdempotencyKey, stateOf(e))
	}
	in := e.Intent
	if in.Policy == nil || in.Policy.Scope == "" || in.SchemaSHA256 == "" || in.PayloadSHA256 == "" {
		return nil, fmt.Errorf("%w: call %s has no recorded policy scope, schema digest or payload hash to bind an approval to", ErrEffectState, e.IdempotencyKey)
	}
	return &PendingApproval{Effect: e, req: req}, nil
}

// canStillDispatch refuses an approval that no run could ever act on: the newest run of r's team
// run (r, or the run that resumed it, and so on) is finalized and its last checkpoint event does
// not say it paused.
func canStillDispatch(ctx context.Context, store *evidence.Store, all []evidence.RunSummary, r evidence.RunSummary) error {
	for by := ResumedBy(all, r.RunID); by != ""; by = ResumedBy(all, r.RunID) {
		i := slices.IndexFunc(all, func(x evidence.RunSummary) bool { return x.RunID == by })
		if i < 0 {
			break
		}
		r = all[i]
	}
	if r.Status != evidence.StatusFinalized {
		return nil
	}
	evs, err := store.Events(ctx, r.RunID)
	if err != nil {
		return fmt.Errorf("run %s events: %w", r.RunID, err)
	}
	paused := false
	for _, ev := range evs {
		if ev.Type == (event.Checkpoint{}).EventType() {
			p, err := event.Decode[event.Checkpoint](ev.Type, ev.Payload)
			if err != nil {
				return fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
			}
			paused = p.Paused
		}
	}
	if !paused {
		return fmt.Errorf("%w: run %s is finalized and did not pause with a checkpoint (its formation does not resume durably, or it completed): no run can dispatch this call; nothing approved", ErrEffectState, r.RunID)
	}
	return nil
}

// ConfirmedBy reports whether answer confirms this exact action: it is the first
// ApprovalPrefixLen characters of the payload SHA-256 (what an approver types after reading the
// hash shown).
func (p *PendingApproval) ConfirmedBy(answer string) bool {
	return len(answer) == ApprovalPrefixLen && strings.HasPrefix(p.Effect.Intent.PayloadSHA256, answer)
}

// GrantedApproval is what Grant wrote.
type GrantedApproval struct {
	// Entry is the approval added to the file.
	Entry policy.FileApproval
	// File is the approval file's path.
	File string
}

// Grant writes an approval bound to exactly the pending call into the request's approval file,
// atomically: single use, expiring Expires after now (truncated to the second), disclosing the
// result only with Disclose. payloadSHA256 is the payload SHA-256 the approver confirmed: the
// whole hash, which must be the pending payload's.
//
// Errors: an *OptionError (ErrBadOptions, field PayloadSHA256) when payloadSHA256 is not the
// pending payload's hash; policy.ErrInvalidApprovalFile for an existing file that is not an
// approval file; the file system's errors writing it. Nothing is written on error.
func (p *PendingApproval) Grant(payloadSHA256 string, now time.Time) (GrantedApproval, error) {
	in := p.Effect.Intent
	if payloadSHA256 != in.PayloadSHA256 {
		return GrantedApproval{}, optionErr("PayloadSHA256", "%s is not the pending payload's hash; nothing approved", payloadSHA256)
	}
	path := p.req.File
	if path == "" {
		path = ApprovalsPath(filepath.Dir(p.req.StorePath))
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return GrantedApproval{}, optionErr("ApprovalsFile", "%s is not a regular file: name the approval file to write (JSON)", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return GrantedApproval{}, optionErr("ApprovalsFile", "%s: its directory %s does not exist", path, filepath.Dir(path))
	}
	file := &policy.ApprovalFile{Version: 1}
	if prev, err := policy.LoadApprovalFile(path); err == nil {
		file = prev
	} else if !errors.Is(err, fs.ErrNotExist) {
		return GrantedApproval{}, err
	}
	entry := policy.FileApproval{RunID: in.RunID, SessionID: in.SessionID, MemberID: in.MemberID, CallID: in.CallID, Tool: in.Tool,
		PayloadSHA256: in.PayloadSHA256, SchemaSHA256: in.SchemaSHA256, Access: string(in.Access), PolicyScope: in.Policy.Scope,
		Revision: in.Revision, Approver: p.req.Approver, ExpiresAt: now.UTC().Add(p.req.Expires).Truncate(time.Second),
		Disclose: p.req.Disclose}
	file.Approvals = slices.DeleteFunc(file.Approvals, func(a policy.FileApproval) bool {
		return a.RunID == entry.RunID && a.MemberID == entry.MemberID && a.CallID == entry.CallID
	})
	file.Approvals = append(file.Approvals, entry)
	if err := writeApprovalFile(path, file); err != nil {
		return GrantedApproval{}, err
	}
	return GrantedApproval{Entry: entry, File: path}, nil
}

// writeApprovalFile writes f as indented JSON to path, mode 0600, through internal/atomicfile, so a
// reader never sees half a file.
func writeApprovalFile(path string, f *policy.ApprovalFile) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}
