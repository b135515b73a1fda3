package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// admissionSlots is the number of admission slots the case's options give (0: no admission):
// the declared capacity, lowered by max_workers, as formation.CapacityOptions documents it. ok is
// false when the options leave the number to the provider's answer during the run, which the
// evidence does not hold (the matrix refuses such options; a stored run could still carry them).
func admissionSlots(c formation.CapacityOptions) (slots int, ok bool) {
	if c.Aware {
		if c.Declared == 0 {
			return 0, false
		}
		slots = c.Declared
	}
	if c.MaxWorkers > 0 && (slots == 0 || c.MaxWorkers < slots) {
		slots = c.MaxWorkers
	}
	return slots, true
}

// admissionEvidence re-derives capacity admission of a parallel team from the configured options
// and the recorded order of the members' starts and ends, and compares it with what the runtime
// recorded:
//
//   - the team_started options record the capacity the case configured;
//   - at no point of the recorded order are more members running (member_started without its
//     member_completed or member_failed yet) than there are slots;
//   - admission is in configuration order (formation's admission.run): a round (the first run of
//     every member, then each retry round) starts with every slot free, so the members of a round
//     after the N-th in configuration order had to wait and the others did not. Exactly those, and
//     each once, before its turn started, recorded member_throttled carrying the limit N, and
//     each started only once enough members of its round had ended to free a slot for it (the
//     (i-N+1)-th freed slot for the i-th member, counting from 0).
//
// Without admission (no slots) no member may be throttled. It returns the problems, each naming
// the rule ("admission: ...").
func (d *derivation) admissionEvidence(ids []string) []string {
	slots, ok := admissionSlots(d.opts.Capacity)
	if !ok {
		return []string{"admission: the options leave the capacity to the provider's answer during the run, which the evidence does not record; nothing to re-derive the admission from"}
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, "admission: "+fmt.Sprintf(format, args...))
	}

	// The recorded options.
	if starts, at, err := claims[event.TeamStarted](d); err != nil {
		bad("team_started: %v", err)
	} else if len(starts) == 1 {
		want := formation.Options{Capacity: d.opts.Capacity}.Summary()["capacity"]
		got := starts[0].Options["capacity"]
		if canonicalJSON(got) != canonicalJSON(want) {
			bad("the runtime recorded capacity %v (team_started, %s), the case configured %v", got, d.at(at[0]), want)
		}
	}

	// Concurrency in the recorded order.
	type edge struct {
		at     pos
		delta  int
		member string
	}
	var edges []edge
	for _, id := range ids {
		for _, mt := range d.turns[id] {
			if !mt.Started || mt.Start == mt.End {
				continue // never started, or restored from a checkpoint without running here
			}
			edges = append(edges, edge{mt.Start, +1, id})
			if !mt.End.zero() {
				edges = append(edges, edge{mt.End, -1, id})
			}
		}
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].at.before(edges[j].at) })
	running := map[string]int{}
	peak := 0
	for _, e := range edges {
		running[e.member] += e.delta
		if running[e.member] == 0 {
			delete(running, e.member)
		}
		n := 0
		for _, c := range running {
			n += c
		}
		peak = max(peak, n)
		if slots > 0 && n > slots && e.delta > 0 {
			var who []string
			for m := range running {
				who = append(who, m)
			}
			slices.Sort(who)
			bad("%d members ran at once at %s (%s) with %d admission slot(s)", n, d.at(e.at), strings.Join(who, ", "), slots)
		}
	}

	// Which members had to wait, round by round, against the recorded member_throttled events.
	throttles, at, err := claims[event.MemberThrottled](d)
	if err != nil {
		bad("member_throttled: %v", err)
		return problems
	}
	type key struct {
		member string
		round  int
	}
	recorded := map[key]int{}
	for i, th := range throttles {
		member := d.eventMember(at[i])
		round := 1
		for _, mt := range d.turns[member] {
			if mt.Started && mt.Start.before(at[i]) {
				round++
			}
		}
		recorded[key{member, round}]++
		if th.Limit != slots {
			bad("member_throttled for %s (%s) carries limit %d, the case has %d slot(s)", member, d.at(at[i]), th.Limit, slots)
		}
	}
	rounds := 0
	for _, id := range ids {
		rounds = max(rounds, len(d.turns[id]))
	}
	var expected []string
	for r := 1; r <= rounds; r++ {
		var round []string
		for _, id := range ids {
			if len(d.turns[id]) >= r {
				round = append(round, id)
			}
		}
		for i, id := range round {
			waits := slots > 0 && i >= slots
			n := recorded[key{id, r}]
			delete(recorded, key{id, r})
			switch {
			case waits && n == 0:
				bad("%s had to wait for a slot in round %d (%d slot(s), held by %s, which come before it in configuration order), but no member_throttled was recorded for it",
					id, r, slots, strings.Join(round[:slots], ", "))
			case waits && n > 1:
				bad("%s was recorded throttled %d times in round %d, want once", id, n, r)
			case !waits && n > 0:
				why := "there is no admission"
				if slots > 0 {
					why = fmt.Sprintf("it is number %d of %d in configuration order and there are %d slot(s)", i+1, len(round), slots)
				}
				bad("%s was recorded throttled in round %d although a slot was free for it (%s)", id, r, why)
			}
			if waits {
				expected = append(expected, id)
				// It waited for real: member i of the round takes the (i-N+1)-th slot the round frees
				// (the queued members take freed slots in configuration order, and a member releases
				// its slot only after its end is recorded), so at its start at least i-N+1 members of
				// the round have ended. A runtime that records the throttle and starts the member
				// anyway, ahead of members before it, does not admit in configuration order.
				if mt := d.turns[id][r-1]; mt.Started && mt.Start != mt.End {
					ended := 0
					for _, other := range round {
						if o := d.turns[other][r-1]; other != id && !o.End.zero() && o.End.before(mt.Start) {
							ended++
						}
					}
					if need := i - slots + 1; ended < need {
						bad("%s (number %d of %d in configuration order, %d slot(s)) started in round %d at %s when %d member(s) of the round had ended, not the %d whose slots it had to wait for",
							id, i+1, len(round), slots, r, d.at(mt.Start), ended, need)
					}
				}
			}
		}
	}
	for k, n := range recorded {
		bad("%d member_throttled event(s) for %s in round %d, which has no such member", n, k.member, k.round)
	}
	if len(problems) == 0 && slots > 0 {
		d.admissionDetail = fmt.Sprintf("; admission: %d slot(s), at most %d running at once, throttled %s as re-derived", slots, peak, labelOr(strings.Join(expected, ", "), "none"))
	}
	return problems
}

// canonicalJSON is v as JSON after a round trip through any (numbers as float64, object keys
// sorted), so a recorded payload and a configured value compare by content.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %T", v)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return string(b)
	}
	b, _ = json.Marshal(x)
	return string(b)
}
