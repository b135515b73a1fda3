package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/tool"
)

// consumed returns what the team run's earlier runs consumed, by member, from their recorded
// events: tool calls are the dispatched tool_call intents (each attempt), tokens the usage the
// provider exchanges reported. A member's tokens are unknown when an exchange reported none, or when
// the member had a turn started and not ended in an interrupted run (a request may have been
// outstanding when the process died, and nothing recorded it).
func consumed(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, runID string) (map[string]runtime.Consumption, error) {
	return consumedIn(ctx, store, Family(runs, runID))
}

// consumedIn is consumed over the runs of family, a team run's runs in creation order.
func consumedIn(ctx context.Context, store *evidence.Store, family []evidence.RunSummary) (map[string]runtime.Consumption, error) {
	calls, tokens, unknown := map[string]int64{}, map[string]int64{}, map[string]bool{}
	for _, r := range family {
		evs, err := store.Events(ctx, r.RunID)
		if err != nil {
			return nil, fmt.Errorf("run %s events: %w", r.RunID, err)
		}
		open := map[string]int{}
		for _, ev := range evs {
			switch ev.Type {
			case event.TypeToolCall:
				in, err := event.Decode[event.ToolCall](ev.Type, ev.Payload)
				if err != nil {
					return nil, fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
				}
				if in.Dispatched {
					calls[in.MemberID]++
				}
			case event.TypeProviderExchange:
				x, err := event.Decode[event.ProviderExchange](ev.Type, ev.Payload)
				if err != nil {
					return nil, fmt.Errorf("run %s event %d: %w", r.RunID, ev.Seq, err)
				}
				if x.Usage == nil {
					unknown[ev.MemberID] = true
				} else {
					tokens[ev.MemberID] += x.Usage.TotalTokens
				}
			case event.TypeMemberStarted:
				open[ev.MemberID]++
			case event.TypeMemberCompleted, event.TypeMemberFailed:
				open[ev.MemberID]--
			}
		}
		if r.Interrupted {
			for m, n := range open {
				if n > 0 {
					unknown[m] = true
				}
			}
		}
	}
	out := map[string]runtime.Consumption{}
	for _, m := range slices.Concat(slices.Collect(maps.Keys(calls)), slices.Collect(maps.Keys(tokens)), slices.Collect(maps.Keys(unknown))) {
		c := runtime.Consumption{ToolCalls: calls[m]}
		if !unknown[m] {
			t := tokens[m]
			c.Tokens = &t
		}
		out[m] = c
	}
	return out, nil
}

// Family returns the runs that record one team run's effects, in creation order: the first run
// (runID's lineage followed back through corrects_run_id) and every run that continues or corrects
// it, directly or through another (resumed runs, reconciliation corrections). runs is the store's
// run list.
//
// A run of kind replay (IsReplayRun) records no effects of the team run — its tool calls were
// served from the recording — and is in no other run's family. The family of a replay run is the
// family of the run it replays as it stood when that run was created (the runs created before
// it), followed by the replay run in the replayed run's place: what the replay's own checks read.
func Family(runs []evidence.RunSummary, runID string) []evidence.RunSummary {
	recorded := slices.DeleteFunc(slices.Clone(runs), IsReplayRun)
	for _, r := range runs {
		if r.RunID != runID || !IsReplayRun(r) {
			continue
		}
		var out []evidence.RunSummary
		for _, f := range family(recorded, r.CorrectsRunID) {
			if f.RunID != r.CorrectsRunID && f.CreatedAt.Before(createdAt(recorded, r.CorrectsRunID)) {
				out = append(out, f)
			}
		}
		return append(out, r)
	}
	return family(recorded, runID)
}

func createdAt(runs []evidence.RunSummary, runID string) time.Time {
	for _, r := range runs {
		if r.RunID == runID {
			return r.CreatedAt
		}
	}
	return time.Time{}
}

func family(runs []evidence.RunSummary, runID string) []evidence.RunSummary {
	byID := map[string]evidence.RunSummary{}
	for _, r := range runs {
		byID[r.RunID] = r
	}
	root := runID
	for seen := map[string]bool{}; !seen[root]; {
		seen[root] = true
		r, ok := byID[root]
		if !ok || r.CorrectsRunID == "" {
			break
		}
		root = r.CorrectsRunID
	}
	in := map[string]bool{root: true}
	for changed := true; changed; {
		changed = false
		for _, r := range runs {
			if !in[r.RunID] && in[r.CorrectsRunID] {
				in[r.RunID], changed = true, true
			}
		}
	}
	var out []evidence.RunSummary
	for _, r := range runs {
		if in[r.RunID] {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b evidence.RunSummary) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// FamilyRecords reads the journal records of runID's family (Family), in creation order: what
// every process of one team run recorded of its tool calls.
func FamilyRecords(ctx context.Context, store *evidence.Store, runs []evidence.RunSummary, runID string) ([]tool.Record, error) {
	return recordsIn(ctx, store, Family(runs, runID))
}

// recordsIn reads the journal records of the runs of family, in order.
func recordsIn(ctx context.Context, store *evidence.Store, family []evidence.RunSummary) ([]tool.Record, error) {
	var out []tool.Record
	for _, r := range family {
		recs, err := ToolRecords(ctx, store, r.RunID)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// ToolRecords reads run runID's tool_call and tool_result events as journal records, in recorded
// order.
func ToolRecords(ctx context.Context, store *evidence.Store, runID string) ([]tool.Record, error) {
	evs, err := store.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s events: %w", runID, err)
	}
	var out []tool.Record
	for _, ev := range evs {
		switch ev.Type {
		case event.TypeToolCall:
			in, err := event.Decode[event.ToolCall](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", runID, ev.Seq, err)
			}
			out = append(out, tool.Record{Intent: &in.Intent})
		case event.TypeToolResult:
			o, err := event.Decode[event.ToolResult](ev.Type, ev.Payload)
			if err != nil {
				return nil, fmt.Errorf("run %s event %d: %w", runID, ev.Seq, err)
			}
			out = append(out, tool.Record{Outcome: &o.Outcome})
		}
	}
	return out, nil
}
