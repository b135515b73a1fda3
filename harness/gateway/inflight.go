package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrRecordLost is matched (errors.Is) by a *RecordLostError: at least one
// request of the session was relayed but its row could not be written, so the
// gateway's view of that session is incomplete and must not be used as
// evidence.
var ErrRecordLost = errors.New("gateway: proxied request not recorded")

// RecordLostError reports requests of one session that were relayed but not
// recorded. errors.Is(err, ErrRecordLost) holds, and errors.Is/As also reach
// the first database error (Err).
type RecordLostError struct {
	SessionID string // session id of the lost requests ("" when the header was absent)
	Lost      int    // number of requests not recorded
	Err       error  // the first database error for this session
}

// Error names the session and count.
func (e *RecordLostError) Error() string {
	return fmt.Sprintf("gateway: %d request(s) of session %q relayed but not recorded: %v", e.Lost, e.SessionID, e.Err)
}

// Unwrap returns ErrRecordLost and the database error.
func (e *RecordLostError) Unwrap() []error { return []error{ErrRecordLost, e.Err} }

// inflight tracks requests between arrival and the end of their recording, and
// sessions whose recordings failed. All methods are safe for concurrent use.
type inflight struct {
	mu      sync.Mutex
	next    uint64
	active  map[uint64]string // request sequence -> session id
	changed chan struct{}     // closed (and replaced) whenever a request ends
	losses  map[string]*RecordLostError
}

func newInflight() *inflight {
	return &inflight{
		active:  make(map[uint64]string),
		changed: make(chan struct{}),
		losses:  make(map[string]*RecordLostError),
	}
}

// begin registers a request of session and returns its sequence number.
func (f *inflight) begin(session string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.active[f.next] = session
	return f.next
}

// end marks request seq as recorded (or as having failed to record) and wakes
// waiters.
func (f *inflight) end(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.active, seq)
	close(f.changed)
	f.changed = make(chan struct{})
}

// lost remembers that a request of session could not be recorded.
func (f *inflight) lost(session string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.losses[session]; ok {
		e.Lost++
		return
	}
	f.losses[session] = &RecordLostError{SessionID: session, Lost: 1, Err: err}
}

func matches(session, want string, prefix bool) bool {
	if prefix {
		return strings.HasPrefix(session, want)
	}
	return session == want
}

// wait blocks until every request of a matching session that is in flight now
// has ended (requests arriving later are not waited for, so a busy session
// cannot starve the caller). It then returns the recording losses of matching
// sessions, joined, or nil; or the context's error if ctx ends first.
func (f *inflight) wait(ctx context.Context, want string, prefix bool) error {
	f.mu.Lock()
	var pending []uint64
	for seq, s := range f.active {
		if matches(s, want, prefix) {
			pending = append(pending, seq)
		}
	}
	f.mu.Unlock()
	for {
		f.mu.Lock()
		for len(pending) > 0 {
			if _, ok := f.active[pending[0]]; ok {
				break
			}
			pending = pending[1:]
		}
		ch := f.changed
		f.mu.Unlock()
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway: waiting for %d in-flight request(s) of session %q to be recorded: %w", len(pending), want, ctx.Err())
		case <-ch:
		}
	}
	return f.lostError(func(s string) bool { return matches(s, want, prefix) })
}

// lostError returns the recording losses of the sessions keep accepts (every
// session when keep is nil), joined in session order, or nil.
func (f *inflight) lostError(keep func(string) bool) error {
	f.mu.Lock()
	lost := make([]*RecordLostError, 0, len(f.losses))
	for s, e := range f.losses {
		if keep == nil || keep(s) {
			cp := *e
			lost = append(lost, &cp)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(lost, func(a, b *RecordLostError) int { return strings.Compare(a.SessionID, b.SessionID) })
	errs := make([]error, len(lost))
	for i, e := range lost {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// counts returns the number of requests in flight and of requests relayed but
// not recorded.
func (f *inflight) counts() (inFlight, lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.losses {
		lost += e.Lost
	}
	return len(f.active), lost
}
