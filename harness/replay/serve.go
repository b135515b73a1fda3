package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/assay-audit/assay/internal/jsondiff"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/tool"
)

// toolServer stands for every tool of a replayed team: a tool call is not dispatched again, its
// recorded outcome is served. The boundary still does everything around the dispatch — validation,
// policy, approvals, budgets, intent and outcome records — by its own code path; only the tool's
// Run is the recording.
//
// A call is served when the recording holds a dispatched call under its idempotency key (the
// team's run id, the member and the call id) whose intent's payload SHA-256 is the replayed
// canonical arguments'. Anything else is a divergence, and the call fails without a result.
//
// A served call that succeeded leaves the member's directory as the boundary observed it after the
// recorded call (its outcome's files): each file is written with the bytes whose SHA-256 the
// observation names — the content of the write_file call itself, or a deliverable the recording
// stored — or removed when the observation says there was none. When the recording holds no such
// bytes the directory is left as it is, and the boundary's observation shows the difference.
type toolServer struct {
	rec *recording

	mu     sync.Mutex
	divs   []divergence
	served int
}

// divergence is a replay divergence with its place in the recording (the recorded event's seq)
// and a rank breaking ties: a request (the cassette) before a tool call before an event.
type divergence struct {
	order int64
	rank  int
	d     event.ReplayDivergence
}

// Ranks of divergences found at the same place.
const (
	rankRequest = iota
	rankTool
	rankEvent
	rankVerdict
)

// wrap returns the tools with each Run serving the recording.
func (s *toolServer) wrap(tools map[string]tool.Tool) map[string]tool.Tool {
	out := make(map[string]tool.Tool, len(tools))
	for name, t := range tools {
		t.Run = s.serve
		out[name] = t
	}
	return out
}

// indeterminate is a served error of an effect that may have committed: the boundary records it
// unknown, as it did.
type indeterminate struct{ text string }

func (e indeterminate) Error() string { return e.text }
func (e indeterminate) Unwrap() error { return tool.ErrIndeterminate }

func (s *toolServer) serve(ctx context.Context, root *os.Root, args json.RawMessage) (string, error) {
	key := tool.IdempotencyKey(ctx)
	c := s.rec.calls[key]
	if c == nil || c.outcome == nil {
		s.diverge(math.MaxInt64, event.ReplayDivergence{CallID: key, Event: event.TypeToolCall, Replayed: json.RawMessage(args),
			Detail: fmt.Sprintf("the replay dispatched tool call %s, which the recording did not dispatch", key)})
		return "", errors.New("replay: the recording has no such tool call; nothing was dispatched")
	}
	sum := sha256.Sum256(args)
	if got := hex.EncodeToString(sum[:]); got != c.intent.PayloadSHA256 {
		d := event.ReplayDivergence{Member: c.intent.MemberID, Session: c.intent.SessionID, CallID: key, Event: event.TypeToolCall,
			EventSeq: c.intentSeq, Detail: fmt.Sprintf("tool call %s (%s): the replayed arguments hash to %s, the recorded intent's to %s",
				key, c.intent.Tool, got, c.intent.PayloadSHA256)}
		if diff, found := jsondiff.FirstBytes(c.intent.Arguments, args); found {
			d.Pointer, d.Recorded, d.Replayed = "/payload/arguments"+diff.Pointer, jsondiff.Raw(diff.A, diff.InA), jsondiff.Raw(diff.B, diff.InB)
		}
		s.diverge(c.intentSeq, d)
		return "", errors.New("replay: the call's arguments are not the recorded ones; nothing was dispatched")
	}
	s.mu.Lock()
	s.served++
	s.mu.Unlock()
	o := c.outcome
	switch o.State {
	case tool.StateSucceeded:
		s.leave(root, c.intent.Tool, args, o.Files)
		return o.Result, nil
	case tool.StateUnknown:
		return "", indeterminate{o.Error}
	default:
		return "", errors.New(o.Error)
	}
}

// leave makes the files a served call's outcome observed.
func (s *toolServer) leave(root *os.Root, toolName string, args json.RawMessage, files map[string]string) {
	var written struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if toolName == "write_file" {
		_ = json.Unmarshal(args, &written)
	}
	for p, want := range files {
		if want == "" {
			_ = root.Remove(p)
			continue
		}
		data, ok := s.rec.files[want]
		if sum := sha256.Sum256([]byte(written.Content)); !ok && path.Clean(written.Path) == p && hex.EncodeToString(sum[:]) == want {
			data, ok = []byte(written.Content), true
		}
		if !ok {
			continue
		}
		if dir := path.Dir(p); dir != "." {
			_ = root.MkdirAll(dir, 0o755)
		}
		_ = root.WriteFile(p, data, 0o644)
	}
}

// Lookup serves the receipts reconciliation recorded: the effect.Backend of a replayed resume.
func (s *toolServer) Lookup(_ context.Context, q effect.Query) (effect.Receipt, bool, error) {
	r, ok := s.rec.receipts[q.IdempotencyKey]
	return r, ok, nil
}

func (s *toolServer) diverge(order int64, d event.ReplayDivergence) {
	d.RunID = s.rec.run.RunID
	if d.Member == "" {
		// The key is "{run}:{member}:{call}".
		if parts := strings.Split(d.CallID, ":"); len(parts) >= 3 {
			d.Member = parts[len(parts)-2]
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.divs = append(s.divs, divergence{order: order, rank: rankTool, d: d})
}

func (s *toolServer) divergences() []divergence {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]divergence(nil), s.divs...)
}

func (s *toolServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}
