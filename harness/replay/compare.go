package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/internal/jsondiff"
	"github.com/assay-audit/assay/runtime/event"
)

// What a replay compares (docs/replay.md, "What is compared").
//
// The team's part of the two traces: every event but the replay's own (replay_started,
// replay_verdict), the checks' (check_completed, check_recorded) and run_finalized. Events are
// compared stream by stream — the run-level events, and each member's — in order within a stream:
// members of a parallel formation interleave differently from run to run, and that order is
// scheduling, not outcome. An event is compared as the document {"time", "type", "member_id",
// "session_id", "payload"}; a member directory of the replay is compared as the recorded one it
// stands for (the replay works in its own directories).
//
// Checkpoint events are compared through the states they name: each member's turn states in the
// order they changed (a checkpoint records one turn's change, and which member's change comes
// first is scheduling too), as documents {"turn": ...}, and the last state's run-wide fields.

// excluded are the event types outside the team's part of a trace.
var excluded = []string{event.TypeReplayStarted, event.TypeReplayVerdict, event.TypeCheckCompleted, "check_recorded", "run_finalized", event.TypeCheckpoint}

// comparison is the outcome of comparing a recorded trace with its replay under a policy.
type comparison struct {
	policy tolerance.Policy
	runID  string
	// divs are the divergences found, at most one per stream.
	divs []divergence
	// diffs are the tolerated differences by field name, in order of first appearance.
	diffs []event.ReplayDifference
}

// item is one compared document of a stream, with its place in its own trace.
type item struct {
	typ, member, session string
	seq                  int64
	doc                  any
	reqSeq               *int
}

func (c *comparison) tolerated(f tolerance.Field, it item, d jsondiff.Difference) {
	delta, measured := deltaOf(f.Unit, d.A, d.B)
	for i := range c.diffs {
		x := &c.diffs[i]
		if x.Field != f.Name {
			continue
		}
		x.Count++
		if measured {
			x.MinDelta, x.MaxDelta = math.Min(x.MinDelta, delta), math.Max(x.MaxDelta, delta)
		}
		return
	}
	nd := event.ReplayDifference{Field: f.Name, Event: it.typ, EventSeq: it.seq, Pointer: d.Pointer, Count: 1}
	if measured {
		nd.MinDelta, nd.MaxDelta, nd.Unit = delta, delta, f.Unit
	}
	c.diffs = append(c.diffs, nd)
}

// deltaOf is b - a in the field's unit: seconds between two RFC 3339 times, or the difference of
// two numbers.
func deltaOf(unit string, a, b any) (float64, bool) {
	if unit == "seconds" {
		as, aok := a.(string)
		bs, bok := b.(string)
		if !aok || !bok {
			return 0, false
		}
		at, aerr := time.Parse(time.RFC3339Nano, as)
		bt, berr := time.Parse(time.RFC3339Nano, bs)
		if aerr != nil || berr != nil {
			return 0, false
		}
		return bt.Sub(at).Seconds(), true
	}
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if !aok || !bok || unit == "" {
		return 0, false
	}
	af, aerr := an.Float64()
	bf, berr := bn.Float64()
	if aerr != nil || berr != nil {
		return 0, false
	}
	return bf - af, true
}

// stream compares one stream's recorded items with its replayed ones and records the first
// divergence, if any. end is the recorded stream's last seq (where an extra replayed item stands).
func (c *comparison) stream(recorded, replayed []item) {
	for i := 0; i < max(len(recorded), len(replayed)); i++ {
		if i >= len(recorded) {
			r := replayed[i]
			order := int64(math.MaxInt64)
			if len(recorded) > 0 {
				order = recorded[len(recorded)-1].seq
			}
			c.divs = append(c.divs, divergence{order: order, rank: rankEvent, d: event.ReplayDivergence{RunID: c.runID, Member: r.member,
				Session: r.session, Event: r.typ, Replayed: jsondiff.Raw(r.doc, true), Seq: r.reqSeq,
				Detail: fmt.Sprintf("the replay recorded a %s the recording does not have (after its event %d)", r.typ, order)}})
			return
		}
		rec := recorded[i]
		if i >= len(replayed) {
			c.divs = append(c.divs, divergence{order: rec.seq, rank: rankEvent, d: event.ReplayDivergence{RunID: c.runID, Member: rec.member,
				Session: rec.session, Event: rec.typ, EventSeq: rec.seq, Recorded: jsondiff.Raw(rec.doc, true), Seq: rec.reqSeq,
				Detail: fmt.Sprintf("the recorded %s (event %d) has no counterpart in the replay", rec.typ, rec.seq)}})
			return
		}
		rep := replayed[i]
		var first *jsondiff.Difference
		jsondiff.Walk(rec.doc, rep.doc, func(d jsondiff.Difference) bool {
			f, how := c.policy.Classify(rec.typ, d.Pointer)
			switch how {
			case tolerance.Ignored:
				return true
			case tolerance.Tolerated:
				c.tolerated(f, rec, d)
				return true
			}
			first = &d
			return false
		})
		if first != nil {
			c.divs = append(c.divs, divergence{order: rec.seq, rank: rankEvent, d: event.ReplayDivergence{RunID: c.runID, Member: rec.member,
				Session: rec.session, Event: rec.typ, EventSeq: rec.seq, Seq: rec.reqSeq, Pointer: first.Pointer,
				Recorded: jsondiff.Raw(first.A, first.InA), Replayed: jsondiff.Raw(first.B, first.InB),
				Detail: fmt.Sprintf("%s (event %d) differs at %s", rec.typ, rec.seq, labelPointer(first.Pointer))}})
			return
		}
	}
}

func labelPointer(p string) string {
	if p == "" {
		return "the whole document"
	}
	return p
}

// streams splits a trace's team events into streams by member ("" for run-level events), each in
// order, as compared documents. relocate maps a string of the trace to what it stands for.
func streams(evs []evidence.StoredEvent, relocate func(string) string) (map[string][]item, error) {
	out := map[string][]item{}
	for _, ev := range evs {
		if slices.Contains(excluded, ev.Type) {
			continue
		}
		payload, err := jsondiff.Decode(ev.Payload)
		if err != nil {
			return nil, fmt.Errorf("event %d (%s): %w", ev.Seq, ev.Type, err)
		}
		it := item{typ: ev.Type, member: ev.MemberID, session: ev.SessionID, seq: ev.Seq,
			doc: map[string]any{"time": ev.Time.UTC().Format(evidence.EventTimeLayout), "type": ev.Type, "member_id": ev.MemberID,
				"session_id": relocate(ev.SessionID), "payload": relocateAll(payload, relocate)}}
		if ev.Type == event.TypeProviderExchange {
			if p, err := event.Decode[event.ProviderExchange](ev.Type, ev.Payload); err == nil {
				it.reqSeq = &p.Seq
			}
		}
		out[ev.MemberID] = append(out[ev.MemberID], it)
	}
	return out, nil
}

// relocateAll applies relocate to every string (and object key) of a decoded JSON value.
func relocateAll(v any, relocate func(string) string) any {
	switch x := v.(type) {
	case string:
		return relocate(x)
	case []any:
		for i := range x {
			x[i] = relocateAll(x[i], relocate)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[relocate(k)] = relocateAll(e, relocate)
		}
		return out
	}
	return v
}

// turnStreams splits checkpoint states into each member's turn states in the order they changed,
// plus, under "", the last state's run-wide fields (pauses sorted: their order is scheduling).
func turnStreams(states []checkpointState, relocate func(string) string) (map[string][]item, error) {
	out := map[string][]item{}
	last := map[string]string{}
	var final map[string]any
	var finalSeq int64
	for _, cp := range states {
		v, err := jsondiff.Decode(cp.state)
		if err != nil {
			return nil, fmt.Errorf("checkpoint after event %d: %w", cp.seq, err)
		}
		st, _ := relocateAll(v, relocate).(map[string]any)
		turns, _ := st["turns"].([]any)
		for _, t := range turns {
			tm, _ := t.(map[string]any)
			member, _ := tm["member_id"].(string)
			key := member + "#" + fmt.Sprint(tm["invocation"])
			raw := string(jsondiff.Raw(tm, true))
			if last[key] == raw {
				continue
			}
			last[key] = raw
			out[member] = append(out[member], item{typ: event.TypeCheckpoint, member: member, seq: cp.seq, doc: map[string]any{"turn": tm}})
		}
		final, finalSeq = st, cp.seq
	}
	if final != nil {
		run := map[string]any{}
		for _, k := range []string{"version", "run_id", "formation", "seqs", "paused", "pauses"} {
			if v, ok := final[k]; ok {
				run[k] = v
			}
		}
		if p, ok := run["pauses"].([]any); ok {
			slices.SortFunc(p, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		}
		out[""] = append(out[""], item{typ: event.TypeCheckpoint, seq: finalSeq, doc: map[string]any{"state": run}})
	}
	return out, nil
}

// compareRuns compares a recorded run's team trace and checkpoint states with its replay's.
func compareRuns(pol tolerance.Policy, rec *recording, replayed []evidence.StoredEvent, replayedStates []checkpointState, relocate func(string) string) (*comparison, error) {
	c := &comparison{policy: pol, runID: rec.run.RunID}
	same := func(s string) string { return s }
	recordedEvents, err := streams(rec.events, same)
	if err != nil {
		return nil, fmt.Errorf("the recorded trace: %w", err)
	}
	replayedEvents, err := streams(replayed, relocate)
	if err != nil {
		return nil, fmt.Errorf("the replayed trace: %w", err)
	}
	recordedTurns, err := turnStreams(rec.checkpoints, same)
	if err != nil {
		return nil, fmt.Errorf("the recorded checkpoints: %w", err)
	}
	replayedTurns, err := turnStreams(replayedStates, relocate)
	if err != nil {
		return nil, fmt.Errorf("the replayed checkpoints: %w", err)
	}
	c.streams(recordedEvents, replayedEvents)
	c.streams(recordedTurns, replayedTurns)
	return c, nil
}

// streams compares every stream of a recorded trace with the replay's of the same name.
func (c *comparison) streams(recorded, replayed map[string][]item) {
	for _, k := range sortedKeys(recorded, replayed) {
		c.stream(recorded[k], replayed[k])
	}
}

// verdict is the replay verdict a comparison's outcome gives: mismatch at the first divergence,
// within_tolerance when only tolerated fields differed, exact otherwise.
func verdictOf(first *event.ReplayDivergence, differences []event.ReplayDifference) (verdict, reason string) {
	switch {
	case first != nil:
		return Mismatch, "first divergence: " + describe(first)
	case len(differences) > 0:
		return WithinTolerance, ""
	}
	return Exact, ""
}

func sortedKeys(a, b map[string][]item) []string {
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// first returns the earliest divergence: by place in the recording, then rank.
func first(divs []divergence) *event.ReplayDivergence {
	if len(divs) == 0 {
		return nil
	}
	best := slices.MinFunc(divs, func(a, b divergence) int {
		if a.order != b.order {
			if a.order < b.order {
				return -1
			}
			return 1
		}
		return a.rank - b.rank
	})
	d := best.d
	return &d
}

// notCompared says what the policy leaves out, and why.
func notCompared(p tolerance.Policy) []string {
	var out []string
	for _, f := range p.Ignored {
		out = append(out, fmt.Sprintf("%s (%s: %s)", f.Name, f.Source, f.Doc))
	}
	return out
}

// describe is a divergence in one line: member, request or event, pointer and both values.
func describe(d *event.ReplayDivergence) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	who := d.Member
	if who == "" {
		who = "run"
	}
	b.WriteString(who)
	switch {
	case d.Seq != nil:
		b.WriteString(" request " + strconv.Itoa(*d.Seq))
	case d.CallID != "":
		b.WriteString(" call " + d.CallID)
	case d.Check != "":
		b.WriteString(" check " + d.Check)
	case d.Event != "":
		b.WriteString(" " + d.Event)
	}
	if d.Pointer != "" {
		b.WriteString(" " + d.Pointer)
	}
	if d.Recorded != nil || d.Replayed != nil {
		fmt.Fprintf(&b, ": %s -> %s", clip(d.Recorded), clip(d.Replayed))
	} else if d.Detail != "" {
		b.WriteString(": " + d.Detail)
	}
	return b.String()
}

func clip(raw json.RawMessage) string {
	if raw == nil {
		return "(absent)"
	}
	s := string(raw)
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
