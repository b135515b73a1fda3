package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/assay-audit/assay/evidence"
)

// Input is what the rules read: the store, the runs selected, and what was already read of them
// (events, one verification of the store), so that no rule reads a run twice. Not safe for
// concurrent use.
type Input struct {
	store  Store
	runs   []evidence.RunSummary // every run of the store, in creation order
	byID   map[string]*evidence.RunSummary
	sel    []string // the selected run ids, in creation order
	events map[string][]evidence.StoredEvent
	verif  []evidence.RunVerification
	vdone  bool
	named  bool // runs were named: verification is of them (and the store-wide chains)
	checks []evidence.BindingChecker
	legacy map[string]bool // runs admitted before schema 3 (admissions.backfilled): no store events
}

func newInput(ctx context.Context, store Store, names []string, checks []evidence.BindingChecker) (*Input, error) {
	runs, err := store.Runs(ctx)
	if err != nil {
		return nil, err
	}
	in := &Input{store: store, runs: runs, byID: map[string]*evidence.RunSummary{}, events: map[string][]evidence.StoredEvent{}, named: len(names) > 0, checks: checks}
	for i := range runs {
		in.byID[runs[i].RunID] = &runs[i]
	}
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := in.byID[n]; !ok {
			return nil, fmt.Errorf("audit: run %s: %w", n, evidence.ErrNoRun)
		}
		want[n] = true
	}
	for _, r := range runs {
		if len(names) == 0 || want[r.RunID] {
			in.sel = append(in.sel, r.RunID)
		}
	}
	return in, nil
}

// selected returns the selected run ids (a new slice).
func (in *Input) selected() []string { return append([]string{}, in.sel...) }

// Runs returns the selected runs' summaries, in creation order.
func (in *Input) Runs() []*evidence.RunSummary {
	out := make([]*evidence.RunSummary, 0, len(in.sel))
	for _, id := range in.sel {
		out = append(out, in.byID[id])
	}
	return out
}

// Run returns any run of the store (selected or not), nil when the store has none by that id.
func (in *Input) Run(id string) *evidence.RunSummary { return in.byID[id] }

// Events returns a run's trace, read once.
func (in *Input) Events(ctx context.Context, runID string) ([]evidence.StoredEvent, error) {
	if evs, ok := in.events[runID]; ok {
		return evs, nil
	}
	evs, err := in.store.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	in.events[runID] = evs
	return evs, nil
}

// IsReplay reports whether run is of kind replay: its first event is replay_started
// (docs/replay.md). Its envelope names the cassette, but the event is what the replay recorded.
func (in *Input) IsReplay(ctx context.Context, runID string) (bool, error) {
	evs, err := in.Events(ctx, runID)
	if err != nil {
		return false, err
	}
	return len(evs) > 0 && evs[0].Type == "replay_started", nil
}

// Verification returns the store's own verification (evidence.Store.VerifyWith) of the selected
// runs — every run, deleted ones included, when none was named — run once. It recomputes every
// hash; the rules read what it recomputed, never a stored status.
func (in *Input) Verification(ctx context.Context) ([]evidence.RunVerification, error) {
	if in.vdone {
		return in.verif, nil
	}
	req := evidence.VerifyRequest{Bindings: in.checks}
	if in.named {
		req.Runs = in.selected()
	}
	v, err := in.store.VerifyWith(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	in.verif, in.vdone = v, true
	return v, nil
}

// Legacy reports whether run was admitted before schema 3 (its admission is backfilled): its checks
// and verdict were never chained into its events, and its terminal hash (version 1 or 2) covers
// them instead.
func (in *Input) Legacy(ctx context.Context, runID string) (bool, error) {
	if in.legacy == nil {
		rows, err := in.Query(ctx, `SELECT run_id FROM admissions WHERE backfilled`)
		if err != nil {
			return false, err
		}
		in.legacy = map[string]bool{}
		for _, r := range rows {
			in.legacy[asString(r[0])] = true
		}
	}
	return in.legacy[runID], nil
}

// Query runs one read-only statement and returns its rows.
func (in *Input) Query(ctx context.Context, q string) ([][]any, error) {
	res, err := in.store.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	return res.Rows, nil
}

// isSelected reports whether run id is in the selection.
func (in *Input) isSelected(id string) bool { return slices.Contains(in.sel, id) }

// payload decodes an event's payload into a map (nil when it is not an object).
func payload(ev evidence.StoredEvent) map[string]any {
	var m map[string]any
	if json.Unmarshal(ev.Payload, &m) != nil {
		return nil
	}
	return m
}

// str returns m[key] as a string, "" when absent or not a string.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// num returns m[key] as an int64 (JSON numbers decode as float64), false when absent.
func num(m map[string]any, key string) (int64, bool) {
	f, ok := m[key].(float64)
	return int64(f), ok
}

// asString renders a scanned SQL value as text: "" for NULL.
func asString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

// asInt renders a scanned SQL integer; ok false for NULL or a non-integer.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int:
		return int64(x), true
	case uint64:
		return int64(x), true
	case float64:
		return int64(x), true
	}
	return 0, false
}
