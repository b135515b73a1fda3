package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/policy"
)

// storeSink adapts the evidence store to runtime.Sink for one run. Every event payload and every
// artifact passes the run's redaction projection before it is stored.
type storeSink struct {
	store    *evidence.Store
	runID    string
	redactor *policy.Redactor
	// hook and artifactHook, in harness tests, rewrite what the runtime emits and stores (a
	// defective runtime); nil otherwise.
	hook         func(runtime.Event) runtime.Event
	artifactHook func(name string, data []byte) []byte

	// batched, set for a replay, keeps events in pending and appends them in one transaction with
	// the next checkpoint event or at Flush: nothing a replay records gates an effect, so nothing
	// needs to be durable before the next step. saved, when set, receives each checkpoint state
	// as stored. Both are zero for a matrix run.
	batched bool
	saved   func(seq int64, state json.RawMessage)
	mu      sync.Mutex
	pending []evidence.Event
}

func (s *storeSink) Emit(ctx context.Context, ev runtime.Event) error {
	if s.hook != nil {
		ev = s.hook(ev)
	}
	stored := evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: s.redactor.String(ev.SessionID), Time: ev.Time,
		Payload: redactJSON(s.redactor, ev.Payload)}
	if s.batched {
		s.mu.Lock()
		s.pending = append(s.pending, stored)
		s.mu.Unlock()
		return nil
	}
	_, err := s.store.AppendEvent(ctx, s.runID, stored)
	return err
}

// appendNow appends ev after every pending event, in one transaction, and returns it as stored.
// The caller holds s.mu.
func (s *storeSink) appendNow(ctx context.Context, ev evidence.Event) (evidence.StoredEvent, error) {
	if len(s.pending) == 0 {
		return s.store.AppendEvent(ctx, s.runID, ev)
	}
	stored, err := s.store.AppendEvents(ctx, s.runID, append(s.pending, ev))
	s.pending = nil
	if err != nil {
		return evidence.StoredEvent{}, err
	}
	return stored[len(stored)-1], nil
}

// Flush appends the pending events of a batched sink and turns batching off: what is emitted from
// then on is appended at once.
func (s *storeSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batched = false
	if len(s.pending) == 0 {
		return nil
	}
	_, err := s.store.AppendEvents(ctx, s.runID, s.pending)
	s.pending = nil
	return err
}

// PutArtifact stores data with every secret value masked. A streamed response (text/event-stream)
// passes policy.Redactor.SSE, which also masks a secret split across chunks; anything else is
// masked byte-wise (policy.Redactor.String). A masked artifact's digest is that of the masked
// bytes; the provider_exchange event keeps the wire's own request hash.
func (s *storeSink) PutArtifact(ctx context.Context, name, mediaType string, data []byte) (string, error) {
	if s.artifactHook != nil {
		data = s.artifactHook(name, data)
	}
	if mediaType == "text/event-stream" {
		return s.store.PutArtifact(ctx, s.runID, name, mediaType, s.redactor.SSE(data))
	}
	return s.store.PutArtifact(ctx, s.runID, name, mediaType, []byte(s.redactor.String(string(data))))
}

// Checkpoint stores a durable state for the sink's run: a "checkpoint" event naming the state's
// SHA-256 and turn count, then the state (redacted) bound to that event.
func (s *storeSink) Checkpoint(ctx context.Context, state json.RawMessage) error {
	masked, err := jcs.Transform(redactJSON(s.redactor, state))
	if err != nil {
		return fmt.Errorf("checkpoint state: canonicalize (RFC 8785): %w", err)
	}
	var st runtime.DurableState
	if err := json.Unmarshal(masked, &st); err != nil {
		return fmt.Errorf("checkpoint state: %w", err)
	}
	ev, err := runtime.NewEvent("", "", event.Checkpoint{Turns: len(st.Turns), Paused: st.Paused,
		StateSHA256: hex.EncodeToString(sha256Sum(masked))})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.appendNow(ctx, evidence.Event{Type: ev.Type, Time: ev.Time, Payload: ev.Payload})
	if err != nil {
		return err
	}
	if _, err = s.store.SaveCheckpoint(ctx, s.runID, stored.Seq, masked); err != nil {
		return err
	}
	if s.saved != nil {
		s.saved(stored.Seq, masked)
	}
	return nil
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
