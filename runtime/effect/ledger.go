package effect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Receipt is a backend's evidence that an effect committed (or was rejected). It is what
// reconciliation looks for; a model's words are never a receipt.
type Receipt struct {
	// IdempotencyKey is the effect's own key, "{run_id}:{member_id}:{call_id}".
	IdempotencyKey string `json:"idempotency_key"`
	// BatchKey is the key actually sent when the effect went out in a batch, "" otherwise. It is
	// recorded separately from IdempotencyKey so reconciliation can find batch members (rule 10).
	BatchKey string `json:"batch_key,omitempty"`
	// Committed is true when the backend applied the effect, false when it rejected it.
	Committed bool `json:"committed"`
	// Reference is the backend's own id for the committed effect (a transaction id, a file digest).
	Reference string `json:"reference,omitempty"`
	// Time is when the backend recorded the receipt (UTC), zero when it did not say.
	Time time.Time `json:"time,omitzero"`
	// PayloadSHA256 is the SHA-256 hex of the payload the backend committed under the key, ""
	// when the backend does not say. A receipt whose payload differs from the effect's intent is
	// evidence of another effect and never resolves this one.
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
}

// Query asks a backend for the receipt of one effect.
type Query struct {
	IdempotencyKey string
	// PayloadSHA256 is the SHA-256 hex of the effect's canonical payload as its intent recorded it
	// ("" when unknown); a receipt naming another payload is refused (ErrUnrelatedReceipt).
	PayloadSHA256 string
	// BatchKey is set when the effect was dispatched in a batch: the backend may know it only by it.
	BatchKey string
}

// Backend is where effects land. Reconciliation asks it, never the model, whether an effect whose
// outcome is unknown committed. Implementations must be safe for concurrent use.
type Backend interface {
	// Lookup returns the receipt for q, found=false when the backend has none (the effect did not
	// commit, or has not yet), or an error when the backend could not answer.
	Lookup(ctx context.Context, q Query) (r Receipt, found bool, err error)
}

// ErrNoSuchEffect is returned for an explicit effect key the ledger does not hold. There is no
// fallback to "the latest" effect (SAFETY.md rule 3).
var ErrNoSuchEffect = errors.New("no such effect")

// ErrEffectExists is returned when an effect key is added twice.
var ErrEffectExists = errors.New("effect already in the ledger")

// ErrNoBackend is returned when reconciliation is asked of a ledger without a backend.
var ErrNoBackend = errors.New("no backend to reconcile against")

// Change is one applied (or refused) event, kept in an effect's history.
type Change struct {
	Event Event     `json:"event"`
	From  State     `json:"from"`
	To    State     `json:"to"`
	Time  time.Time `json:"time"`
	// Refused holds the refusal ("late effect event ignored ...") when the event changed nothing.
	Refused string `json:"refused,omitempty"`
}

// Record is a snapshot of one effect in the ledger.
type Record struct {
	Key      string   `json:"idempotency_key"`
	State    State    `json:"state"`
	Revision int      `json:"revision"`
	BatchKey string   `json:"batch_key,omitempty"`
	Receipt  *Receipt `json:"receipt,omitempty"`
	// Lookups counts receipt lookups sent to the backend for this effect.
	Lookups int      `json:"lookups"`
	History []Change `json:"history"`
}

// Ledger holds the states of a run's effects. Every change goes through Transition under the
// ledger's lock. It is safe for concurrent use.
type Ledger struct {
	backend Backend
	now     func() time.Time

	mu      sync.Mutex
	effects map[string]*Record
	lookups singleflight.Group
}

// NewLedger returns an empty ledger reconciling against backend (nil: reconciliation returns
// ErrNoBackend). now is the clock for history times (nil: time.Now).
func NewLedger(backend Backend, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{backend: backend, now: now, effects: map[string]*Record{}}
}

// Add registers an effect in its initial state (awaiting_approval or pending; unknown for an
// effect recovered from an intent without an outcome). It returns ErrEffectExists for a key
// already present.
func (l *Ledger) Add(key string, initial State) error {
	if !initial.Valid() {
		return fmt.Errorf("add effect %s: %w: initial state %q", key, ErrIllegalTransition, initial)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.effects[key]; ok {
		return fmt.Errorf("%w: %s", ErrEffectExists, key)
	}
	l.effects[key] = &Record{Key: key, State: initial}
	return nil
}

// Apply runs ev through Transition for the effect key and stores the result. It returns the state
// after the event and the refusal, if any (the state is then unchanged and the refusal is kept in
// the history). An unknown key is ErrNoSuchEffect.
func (l *Ledger) Apply(key string, ev Event) (State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applyLocked(key, ev)
}

func (l *Ledger) applyLocked(key string, ev Event) (State, error) {
	r, ok := l.effects[key]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNoSuchEffect, key)
	}
	next, err := Transition(r.State, ev)
	c := Change{Event: ev, From: r.State, To: next, Time: l.now().UTC()}
	if err != nil {
		c.Refused = err.Error()
		r.History = append(r.History, c)
		return r.State, fmt.Errorf("effect %s: %w", key, err)
	}
	if ev.Kind == Revise {
		r.Revision++
	}
	r.State = next
	r.History = append(r.History, c)
	return next, nil
}

// Get returns a copy of the effect's record.
func (l *Ledger) Get(key string) (Record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.effects[key]
	if !ok {
		return Record{}, false
	}
	return copyRecord(r), true
}

// List returns copies of every record in state (all states when state is ""), ordered by key.
func (l *Ledger) List(state State) []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for _, r := range l.effects {
		if state == "" || r.State == state {
			out = append(out, copyRecord(r))
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return out
}

func copyRecord(r *Record) Record {
	c := *r
	c.History = slices.Clone(r.History)
	if r.Receipt != nil {
		rc := *r.Receipt
		c.Receipt = &rc
	}
	return c
}

// DispatchBatch marks every effect in keys as dispatched together under batchKey: each record
// keeps batchKey separately from its own key, so a lost batch response can be reconciled per member
// (rule 10). Every effect must be pending; otherwise nothing changes and the error names the first
// effect that is not.
func (l *Ledger) DispatchBatch(keys []string, batchKey string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		r, ok := l.effects[k]
		if !ok {
			return fmt.Errorf("batch %s: %w: %s", batchKey, ErrNoSuchEffect, k)
		}
		if _, err := Transition(r.State, Event{Kind: Dispatch}); err != nil {
			return fmt.Errorf("batch %s: effect %s: %w", batchKey, k, err)
		}
	}
	for _, k := range keys {
		l.effects[k].BatchKey = batchKey
		if _, err := l.applyLocked(k, Event{Kind: Dispatch}); err != nil {
			return err
		}
	}
	return nil
}

// Resolve records a receipt for key (a response that carried one) and applies Respond with the
// receipt's outcome. The receipt's BatchKey is filled from the record when the backend left it out.
func (l *Ledger) Resolve(key string, rc Receipt) (State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.effects[key]
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNoSuchEffect, key)
	}
	to := Failed
	if rc.Committed {
		to = Succeeded
	}
	st, err := l.applyLocked(key, Event{Kind: Respond, To: to})
	if err == nil {
		if rc.BatchKey == "" {
			rc.BatchKey = r.BatchKey
		}
		r.Receipt = &rc
	}
	return st, err
}

// Reconcile resolves an unknown effect through the backend's receipt lookup: a committed receipt
// makes it succeeded, a rejected one failed; no receipt leaves it unknown. Concurrent
// reconciliations of one effect share one lookup (SAFETY.md rule 7); an effect that is no longer
// unknown is returned as it is, without a lookup. charge, when non-nil, is called once per lookup
// actually sent, before it is sent (budgets are charged for reconciliation, rule 11); its error
// stops the lookup. The returned record is the effect after reconciliation.
func (l *Ledger) Reconcile(ctx context.Context, key string, charge func() error) (Record, error) {
	return l.ReconcilePayload(ctx, key, "", charge)
}

// ReconcilePayload is Reconcile for an effect whose intent recorded payloadSHA256 (SHA-256 hex of
// its canonical payload): a receipt that names another payload is evidence of another effect and
// is refused with ErrUnrelatedReceipt, leaving the effect unknown. "" checks no payload.
func (l *Ledger) ReconcilePayload(ctx context.Context, key, payloadSHA256 string, charge func() error) (Record, error) {
	r, ok := l.Get(key)
	if !ok {
		return Record{}, fmt.Errorf("reconcile: %w: %s", ErrNoSuchEffect, key)
	}
	if r.State != Unknown {
		return r, nil
	}
	if l.backend == nil {
		return r, fmt.Errorf("reconcile %s: %w", key, ErrNoBackend)
	}
	_, err, _ := l.lookups.Do(key, func() (any, error) {
		// Re-check under the flight: a reconciliation that finished just before this one started
		// already resolved the effect.
		cur, _ := l.Get(key)
		if cur.State != Unknown {
			return nil, nil
		}
		if charge != nil {
			if err := charge(); err != nil {
				return nil, fmt.Errorf("reconcile %s: %w", key, err)
			}
		}
		l.mu.Lock()
		l.effects[key].Lookups++
		l.mu.Unlock()
		rc, found, err := l.backend.Lookup(context.WithoutCancel(ctx), Query{IdempotencyKey: key, BatchKey: cur.BatchKey, PayloadSHA256: payloadSHA256})
		if err != nil {
			return nil, fmt.Errorf("reconcile %s: receipt lookup: %w", key, err)
		}
		if !found {
			_, err := l.Apply(key, Event{Kind: Reconcile, To: Unknown})
			return nil, err
		}
		if rc.IdempotencyKey != "" && rc.IdempotencyKey != key {
			// Evidence for another effect is not evidence for this one (rule 12).
			return nil, fmt.Errorf("reconcile %s: %w: receipt names %s", key, ErrUnrelatedReceipt, rc.IdempotencyKey)
		}
		if payloadSHA256 != "" && rc.PayloadSHA256 != "" && rc.PayloadSHA256 != payloadSHA256 {
			return nil, fmt.Errorf("reconcile %s: %w: the receipt's payload sha256 %s is not the intent's %s", key,
				ErrUnrelatedReceipt, rc.PayloadSHA256, payloadSHA256)
		}
		to := Failed
		if rc.Committed {
			to = Succeeded
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, err := l.applyLocked(key, Event{Kind: Reconcile, To: to}); err != nil {
			return nil, err
		}
		rec := l.effects[key]
		if rc.BatchKey == "" {
			rc.BatchKey = rec.BatchKey
		}
		rc.IdempotencyKey = key
		rec.Receipt = &rc
		return nil, nil
	})
	out, _ := l.Get(key)
	return out, err
}

// ErrUnrelatedReceipt is returned when a backend answers a lookup with a receipt for a different
// effect: it is rejected, never applied to the effect that was asked about.
var ErrUnrelatedReceipt = errors.New("receipt is for another effect")
