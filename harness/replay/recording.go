package replay

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/cassette"
	"github.com/assay-audit/assay/runtime/tool"
)

// recording is one recorded run's evidence as a replay serves and compares it, every payload read
// back from the store and verified against its digest before use (RISKS.md R11).
type recording struct {
	run    evidence.RunSummary
	events []evidence.StoredEvent
	// exchanges are the provider exchanges the cassette serves.
	exchanges []cassette.Exchange
	// calls are the dispatched tool calls by idempotency key; receipts the receipts reconciliation
	// recorded, by key.
	calls    map[string]*recordedCall
	receipts map[string]effect.Receipt
	// files are bytes the recording holds by SHA-256 (the run's deliverable artifacts), for the
	// files a served tool call left.
	files map[string][]byte
	// checkpoints are the run's checkpoint states in order.
	checkpoints []checkpointState
	// caseDir is the directory the recorded members worked in (OUT/cases/<team run>), "" when no
	// member_started names one.
	caseDir string
	// problems are why the recording cannot certify a replay (a payload missing, stored masked,
	// withheld, or not its digest's bytes).
	problems []string
}

// recordedCall is one dispatched tool call: its last dispatched intent and its invocation outcome.
type recordedCall struct {
	intent    tool.Intent
	intentSeq int64
	outcome   *tool.Outcome
}

type checkpointState struct {
	seq   int64
	state []byte
}

// load reads run r's recording.
func load(ctx context.Context, store *evidence.Store, r evidence.RunSummary) (*recording, error) {
	evs, err := store.Events(ctx, r.RunID)
	if err != nil {
		return nil, fmt.Errorf("run %s events: %w", r.RunID, err)
	}
	rec := &recording{run: r, events: evs, calls: map[string]*recordedCall{}, receipts: map[string]effect.Receipt{}, files: map[string][]byte{}}
	problem := func(format string, args ...any) { rec.problems = append(rec.problems, fmt.Sprintf(format, args...)) }
	for _, ev := range evs {
		switch ev.Type {
		case event.TypeMemberStarted:
			p, err := event.Decode[event.MemberStarted](ev.Type, ev.Payload)
			if err == nil && p.Dir != "" && rec.caseDir == "" {
				rec.caseDir = harness.CaseDirOf(p.Dir)
			}
		case event.TypeProviderExchange:
			p, err := event.Decode[event.ProviderExchange](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
			}
			x := cassette.Exchange{Session: ev.SessionID, Member: ev.MemberID, Seq: p.Seq, RequestSHA256: p.RequestSHA256,
				Status: p.Status, MediaType: "application/json", Error: p.Error, Attempts: max(p.Attempts, 1), Order: ev.Seq}
			if p.Stream {
				x.MediaType = "text/event-stream"
			}
			where := fmt.Sprintf("%s request %d (run %s event %d)", ev.MemberID, p.Seq, r.RunID, ev.Seq)
			if p.RequestSHA256 != "" {
				switch b, err := artifact(ctx, store, p.RequestArtifact); {
				case p.RequestArtifact == "":
					problem("%s: the request payload is missing (no request artifact)", where)
				case err != nil:
					problem("%s: the request payload: %v", where, err)
				case p.RequestArtifact != p.RequestSHA256:
					problem("%s: the stored request (artifact %s) is not the request sent (SHA-256 %s)", where, p.RequestArtifact, p.RequestSHA256)
				default:
					x.Request = b
				}
			}
			switch b, err := artifact(ctx, store, p.ResponseArtifact); {
			case p.ResponseArtifact == "" && p.RequestSHA256 != "" && p.Error == "":
				problem("%s: the response payload is missing (no response artifact)", where)
			case p.ResponseArtifact == "":
			case err != nil:
				problem("%s: the response payload: %v", where, err)
			case bytes.Contains(b, []byte(policy.Mask)):
				problem("%s: the response is stored masked (a credential was redacted): the bytes the runtime received are not in the evidence", where)
			default:
				x.Response = b
			}
			rec.exchanges = append(rec.exchanges, x)
		case event.TypeToolCall:
			p, err := event.Decode[event.ToolCall](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
			}
			if !p.Dispatched {
				continue
			}
			c := rec.calls[p.IdempotencyKey]
			if c == nil {
				c = &recordedCall{}
				rec.calls[p.IdempotencyKey] = c
			}
			c.intent, c.intentSeq = p.Intent, ev.Seq
		case event.TypeToolResult:
			p, err := event.Decode[event.ToolResult](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
			}
			o := p.Outcome
			if o.Source == "reconciliation" && o.Receipt != nil {
				rec.receipts[o.IdempotencyKey] = *o.Receipt
			}
			if o.Source != "invocation" {
				continue
			}
			if c := rec.calls[o.IdempotencyKey]; c != nil {
				c.outcome = &o
			}
			if o.State == tool.StateSucceeded && !o.Disclosed && !o.Simulated {
				problem("tool call %s (run %s event %d): its result was withheld from the member (disclosure not approved); the evidence holds only its digest",
					o.IdempotencyKey, r.RunID, ev.Seq)
			}
		}
	}
	for _, a := range r.Artifacts {
		if !strings.HasPrefix(a.Name, "deliverable/") {
			continue
		}
		if b, err := artifact(ctx, store, a.Digest); err == nil {
			rec.files[a.Digest] = b
		}
	}
	cps, err := checkpoints(ctx, store, r.RunID)
	if err != nil {
		problem("%v", err)
	}
	rec.checkpoints = cps
	return rec, nil
}

// artifact returns an artifact's bytes after checking they hash to its digest; nil for no digest.
func artifact(ctx context.Context, store *evidence.Store, digest string) ([]byte, error) {
	if digest == "" {
		return nil, nil
	}
	return harness.VerifiedArtifact(ctx, store, digest)
}

// checkpoints reads a run's checkpoint states, each verified (evidence.Store.Checkpoints).
func checkpoints(ctx context.Context, store *evidence.Store, runID string) ([]checkpointState, error) {
	cps, err := store.Checkpoints(ctx, runID)
	if err != nil {
		return nil, err
	}
	return states(cps), nil
}

func states(cps []evidence.Checkpoint) []checkpointState {
	out := make([]checkpointState, 0, len(cps))
	for _, c := range cps {
		out = append(out, checkpointState{seq: c.Seq, state: c.State})
	}
	return out
}
