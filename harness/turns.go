package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
)

// caseTrace is a case's recorded evidence arranged for re-derivation: its events (a resumed run's
// lineage first), each member's turns with the provider exchanges inside them, and every exchange's
// recorded request and response bytes read back from the store (digest verified) and parsed by the
// harness's own reader (wire.go).
type caseTrace struct {
	// runs is the lineage, first run first; the last is the case's run, whose events are the
	// runtime's claims.
	runs []string
	// events are every run's events, run by run in lineage order, each run's in seq order.
	events []evidence.StoredEvent
	// turns lists each member's turns in invocation order.
	turns map[string][]*memberTurn
	// problems are anomalies of the trace itself (an exchange outside any turn, an unreadable
	// artifact, a turn that ended twice); every rule fails on them.
	problems []string
}

// pos orders events across a lineage: run index, then seq.
type pos struct {
	run int
	seq int64
}

func (p pos) before(q pos) bool { return p.run < q.run || p.run == q.run && p.seq < q.seq }
func (p pos) zero() bool        { return p.seq == 0 }

// memberTurn is one invocation of a member as the trace shows it.
type memberTurn struct {
	Member, Session string
	Invocation      int
	// Start and End are the positions of the events that started and ended it in the latest run
	// that did (a restored turn: its member_restored event, both); End is zero while it is open.
	Start, End pos
	// Ended is the type of the event that ended it last: member_completed, member_failed or
	// member_restored (then Restored says whether the runtime called it a success).
	Ended    string
	Restored bool
	// Started is true once a member_started began it (a deferred turn fails without starting).
	Started bool
	// Claimed is the runtime's account of the turn: its member_completed/member_failed payload
	// (or, restored, what member_restored said).
	ClaimedSuccess bool
	ClaimedOutput  string
	ClaimedError   string
	Exchanges      []*exchangeRec
}

// exchangeRec is one provider_exchange with its recorded bytes read back and parsed.
type exchangeRec struct {
	Run      string
	EventSeq int64
	P        event.ProviderExchange
	Request  []byte
	Reply    wireReply
	// ReplyErr says why Reply is not a complete reading of the response (unreadable artifact,
	// malformed bytes, an error object, a broken stream); nil when it is.
	ReplyErr error
	// Masked is true when a stored artifact holds the redaction mask: its bytes are not the ones
	// that crossed the wire, so their digest cannot be compared with the gateway's.
	Masked bool
}

// where names an exchange for a detail: "run R event N, response artifact <digest>".
func (x *exchangeRec) where() string {
	return fmt.Sprintf("run %s event %d, response artifact %s", x.Run, x.EventSeq, x.P.ResponseArtifact)
}

// loadTrace reads the case's lineage (s.priorRuns, then s.runID) from the store.
func loadTrace(ctx context.Context, s *caseState) (*caseTrace, error) {
	t := &caseTrace{runs: append(append([]string(nil), s.priorRuns...), s.runID), turns: map[string][]*memberTurn{}}
	type key struct {
		session    string
		invocation int
	}
	byKey := map[key]*memberTurn{}
	open := map[string]*memberTurn{} // session -> its open turn
	for ri, run := range t.runs {
		evs, err := s.store.Events(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("run %s events: %w", run, err)
		}
		t.events = append(t.events, evs...)
		for _, ev := range evs {
			at := pos{ri, ev.Seq}
			switch ev.Type {
			case event.TypeMemberStarted:
				p, err := event.Decode[event.MemberStarted](ev.Type, ev.Payload)
				if err != nil {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %v", run, ev.Seq, err))
					continue
				}
				k := key{ev.SessionID, p.Invocation}
				mt, ok := byKey[k]
				if !ok {
					mt = &memberTurn{Member: ev.MemberID, Session: ev.SessionID, Invocation: p.Invocation}
					byKey[k] = mt
					t.turns[ev.MemberID] = append(t.turns[ev.MemberID], mt)
				} else if !p.Resumed && mt.Started {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %s invocation %d started again without resuming", run, ev.Seq, ev.MemberID, p.Invocation))
				}
				mt.Start, mt.End, mt.Ended, mt.Started = at, pos{}, "", true
				open[ev.SessionID] = mt
			case event.TypeMemberCompleted, event.TypeMemberFailed:
				var p event.MemberTurn
				if ev.Type == event.TypeMemberCompleted {
					c, err := event.Decode[event.MemberCompleted](ev.Type, ev.Payload)
					p = c.MemberTurn
					if err != nil {
						t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %v", run, ev.Seq, err))
						continue
					}
				} else {
					f, err := event.Decode[event.MemberFailed](ev.Type, ev.Payload)
					p = f.MemberTurn
					if err != nil {
						t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %v", run, ev.Seq, err))
						continue
					}
				}
				mt := byKey[key{ev.SessionID, p.Invocation}]
				if mt == nil {
					// A turn that failed before it started (a deferred member, a refused resume).
					mt = &memberTurn{Member: ev.MemberID, Session: ev.SessionID, Invocation: p.Invocation, Start: at}
					byKey[key{ev.SessionID, p.Invocation}] = mt
					t.turns[ev.MemberID] = append(t.turns[ev.MemberID], mt)
				}
				if mt.Ended != "" && !mt.End.zero() && mt.End.run == ri {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %s invocation %d ended twice", run, ev.Seq, ev.MemberID, p.Invocation))
				}
				mt.End, mt.Ended, mt.Restored = at, ev.Type, false
				mt.ClaimedSuccess, mt.ClaimedOutput, mt.ClaimedError = ev.Type == event.TypeMemberCompleted, p.Output, p.Error
				if open[ev.SessionID] == mt {
					delete(open, ev.SessionID)
				}
			case event.TypeMemberRestored:
				p, err := event.Decode[event.MemberRestored](ev.Type, ev.Payload)
				if err != nil {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %v", run, ev.Seq, err))
					continue
				}
				mt := byKey[key{ev.SessionID, p.Invocation}]
				if mt == nil {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %s invocation %d is restored, but no earlier run of the lineage recorded it",
						run, ev.Seq, ev.MemberID, p.Invocation))
					mt = &memberTurn{Member: ev.MemberID, Session: ev.SessionID, Invocation: p.Invocation}
					byKey[key{ev.SessionID, p.Invocation}] = mt
					t.turns[ev.MemberID] = append(t.turns[ev.MemberID], mt)
				}
				mt.Start, mt.End, mt.Ended, mt.Restored = at, at, event.TypeMemberRestored, true
				mt.ClaimedSuccess, mt.ClaimedOutput, mt.ClaimedError = p.Success, p.Output, p.Error
			case event.TypeProviderExchange:
				p, err := event.Decode[event.ProviderExchange](ev.Type, ev.Payload)
				if err != nil {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: %v", run, ev.Seq, err))
					continue
				}
				mt := open[ev.SessionID]
				if mt == nil {
					t.problems = append(t.problems, fmt.Sprintf("run %s event %d: provider exchange of session %s outside any turn of its member", run, ev.Seq, ev.SessionID))
					continue
				}
				x := &exchangeRec{Run: run, EventSeq: ev.Seq, P: p}
				x.readArtifacts(ctx, s.store)
				mt.Exchanges = append(mt.Exchanges, x)
			}
		}
	}
	return t, nil
}

// readArtifacts reads the exchange's request and response bytes, verifying each against its
// digest (R11: a payload is verified before use), and parses the response.
func (x *exchangeRec) readArtifacts(ctx context.Context, store *evidence.Store) {
	if x.P.RequestArtifact != "" {
		if b, err := verifiedArtifact(ctx, store, x.P.RequestArtifact); err == nil {
			x.Request = b
			x.Masked = bytes.Contains(b, []byte(policy.Mask))
		}
	}
	if x.P.ResponseArtifact == "" {
		x.ReplyErr = fmt.Errorf("no response was recorded (%s)", labelOr(x.P.Error, "no error recorded"))
		return
	}
	raw, err := verifiedArtifact(ctx, store, x.P.ResponseArtifact)
	if err != nil {
		x.ReplyErr = err
		return
	}
	x.Masked = x.Masked || bytes.Contains(raw, []byte(policy.Mask))
	x.Reply, x.ReplyErr = parseWire(raw)
}

// verifiedArtifact returns the artifact's bytes after checking their SHA-256 is its digest.
func verifiedArtifact(ctx context.Context, store *evidence.Store, digest string) ([]byte, error) {
	b, err := store.Artifact(ctx, digest)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", digest, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("artifact %s: its bytes hash to %s", digest, hex.EncodeToString(sum[:]))
	}
	return b, nil
}

// reply is the turn's final reply as the recorded bytes say: the content of its last exchange,
// which must be a complete response without tool calls. It returns the exchange it read too.
func (mt *memberTurn) reply() (string, *exchangeRec, error) {
	if len(mt.Exchanges) == 0 {
		return "", nil, fmt.Errorf("%s invocation %d has no recorded provider exchange", mt.Member, mt.Invocation)
	}
	x := mt.Exchanges[len(mt.Exchanges)-1]
	if x.ReplyErr != nil {
		return "", x, fmt.Errorf("%s invocation %d: the last response cannot be read (%s): %v", mt.Member, mt.Invocation, x.where(), x.ReplyErr)
	}
	if len(x.Reply.ToolCalls) > 0 {
		return "", x, fmt.Errorf("%s invocation %d: the last response (%s) is a tool-call reply, not a final reply", mt.Member, mt.Invocation, x.where())
	}
	return x.Reply.Content, x, nil
}

// firstRequest is the user text of the turn's first request, as recorded.
func (mt *memberTurn) firstRequest() (string, error) {
	if len(mt.Exchanges) == 0 || mt.Exchanges[0].Request == nil {
		return "", fmt.Errorf("%s invocation %d has no recorded request", mt.Member, mt.Invocation)
	}
	r, err := parseWireRequest(mt.Exchanges[0].Request)
	if err != nil {
		return "", err
	}
	return r.userText(), nil
}

// contractLine is the contract the turn's first request asked for: the recorded user message's
// last line, "assay-contract: {...}" (runtime.Contract.Prompt ends the message with it). Only the
// last line counts, so text a member put into the context cannot pose as the contract.
func (mt *memberTurn) contractLine() (runtime.ContractLine, error) {
	text, err := mt.firstRequest()
	if err != nil {
		return runtime.ContractLine{}, err
	}
	last := text[strings.LastIndex(text, "\n")+1:]
	rest, ok := strings.CutPrefix(last, runtime.ContractPrefix)
	if !ok {
		return runtime.ContractLine{}, fmt.Errorf("%s invocation %d: the recorded request does not end with a contract line", mt.Member, mt.Invocation)
	}
	var line runtime.ContractLine
	if err := json.Unmarshal([]byte(rest), &line); err != nil {
		return line, fmt.Errorf("%s invocation %d: contract line: %v", mt.Member, mt.Invocation, err)
	}
	return line, nil
}

// claims returns the events of type typ of the case's own run (its last run), decoded, with
// their positions.
func claimsOf[T event.Payload](t *caseTrace) ([]T, []pos, error) {
	var zero T
	last := t.runs[len(t.runs)-1]
	var out []T
	var at []pos
	for _, ev := range t.events {
		if ev.RunID != last || ev.Type != zero.EventType() {
			continue
		}
		p, err := event.Decode[T](ev.Type, ev.Payload)
		if err != nil {
			return nil, nil, fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		out = append(out, p)
		at = append(at, pos{len(t.runs) - 1, ev.Seq})
	}
	return out, at, nil
}

// lastTurn returns the member's last turn, nil when it had none.
func (t *caseTrace) lastTurn(member string) *memberTurn {
	ts := t.turns[member]
	if len(ts) == 0 {
		return nil
	}
	return ts[len(ts)-1]
}
