package harness

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// scriptedTrace builds a one-run trace from a script of "start M", "end M" and "throttle M LIMIT"
// steps, with team_started recording capacity: enough for the admission rule, which reads only the
// order of those events and the recorded options.
func scriptedTrace(t *testing.T, c formation.CapacityOptions, script ...string) *derivation {
	t.Helper()
	tr := &caseTrace{runs: []string{"run-s"}, turns: map[string][]*memberTurn{}}
	add := func(typ, member string, p event.Payload) pos {
		raw, err := event.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		seq := int64(len(tr.events) + 1)
		tr.events = append(tr.events, evidence.StoredEvent{RunID: "run-s", Seq: seq, Type: typ, MemberID: member, Payload: raw})
		return pos{0, seq}
	}
	opts := formation.Options{Capacity: c}
	add(event.TypeTeamStarted, "", event.TeamStarted{Formation: "parallel", Options: opts.Summary()})
	open := map[string]*memberTurn{}
	for _, step := range script {
		f := strings.Fields(step)
		switch f[0] {
		case "start":
			mt := &memberTurn{Member: f[1], Invocation: len(tr.turns[f[1]]) + 1, Started: true}
			mt.Start = add(event.TypeMemberStarted, f[1], event.MemberStarted{})
			tr.turns[f[1]] = append(tr.turns[f[1]], mt)
			open[f[1]] = mt
		case "end":
			open[f[1]].End = add(event.TypeMemberCompleted, f[1], event.MemberCompleted{})
		case "throttle":
			var limit int
			_ = json.Unmarshal([]byte(f[2]), &limit)
			add(event.TypeMemberThrottled, f[1], event.MemberThrottled{Limit: limit})
		}
	}
	return &derivation{s: &caseState{}, t: tr, opts: opts, turns: tr.turns, formation: "parallel", wants: map[*memberTurn]runtime.ContractLine{}}
}

func TestAdmissionRuleRederivesWhoWaitedAndHowManyRan(t *testing.T) {
	two := formation.CapacityOptions{Aware: true, Declared: 2}
	ids := []string{"exec-1", "exec-2", "exec-3"}
	for _, c := range []struct {
		name   string
		c      formation.CapacityOptions
		script []string
		want   string // "" = passes
	}{
		{"the third waits for a slot", two, []string{"start exec-1", "start exec-2", "throttle exec-3 2", "end exec-1", "start exec-3", "end exec-2", "end exec-3"}, ""},
		{"the throttle may follow the first starts", two, []string{"start exec-1", "throttle exec-3 2", "start exec-2", "end exec-2", "start exec-3", "end exec-1", "end exec-3"}, ""},
		{"no admission, no throttle", formation.CapacityOptions{}, []string{"start exec-1", "start exec-2", "start exec-3", "end exec-1", "end exec-2", "end exec-3"}, ""},
		{"one slot: the second and third wait", formation.CapacityOptions{MaxWorkers: 1}, []string{"start exec-1", "throttle exec-2 1", "throttle exec-3 1", "end exec-1", "start exec-2", "end exec-2", "start exec-3", "end exec-3"}, ""},
		{"capacity ignored: three ran at once", two, []string{"start exec-1", "start exec-2", "throttle exec-3 2", "start exec-3", "end exec-1", "end exec-2", "end exec-3"}, "admission: 3 members ran at once"},
		{"no throttle event for the member that waited", two, []string{"start exec-1", "start exec-2", "end exec-1", "start exec-3", "end exec-2", "end exec-3"}, "admission: exec-3 had to wait for a slot in round 1"},
		{"throttled without need", two, []string{"start exec-1", "throttle exec-2 2", "throttle exec-3 2", "start exec-2", "end exec-1", "start exec-3", "end exec-2", "end exec-3"}, "admission: exec-2 was recorded throttled in round 1 although a slot was free"},
		{"throttled without admission", formation.CapacityOptions{}, []string{"start exec-1", "start exec-2", "throttle exec-3 2", "start exec-3", "end exec-1", "end exec-2", "end exec-3"}, "there is no admission"},
		{"throttled after it started", two, []string{"start exec-1", "start exec-2", "end exec-1", "start exec-3", "throttle exec-3 2", "end exec-2", "end exec-3"}, "admission: exec-3 had to wait"},
		{"the wrong limit", two, []string{"start exec-1", "start exec-2", "throttle exec-3 3", "end exec-1", "start exec-3", "end exec-2", "end exec-3"}, "carries limit 3, the case has 2"},
		{"throttled twice", two, []string{"start exec-1", "start exec-2", "throttle exec-3 2", "throttle exec-3 2", "end exec-1", "start exec-3", "end exec-2", "end exec-3"}, "recorded throttled 2 times"},
		{"the last member admitted first", two, []string{"throttle exec-3 2", "start exec-3", "start exec-1", "end exec-3", "start exec-2", "end exec-1", "end exec-2"},
			"admission: exec-3 (number 3 of 3 in configuration order, 2 slot(s)) started in round 1"},
		{"a throttled member started before a slot freed", two, []string{"start exec-1", "throttle exec-3 2", "start exec-3", "end exec-1", "start exec-2", "end exec-2", "end exec-3"},
			"when 0 member(s) of the round had ended, not the 1"},
		{"one slot: the third starts after only one end", formation.CapacityOptions{MaxWorkers: 1}, []string{"start exec-1", "throttle exec-2 1", "throttle exec-3 1", "end exec-1", "start exec-3", "end exec-3", "start exec-2", "end exec-2"},
			"admission: exec-3 (number 3 of 3 in configuration order, 1 slot(s)) started in round 1"},
		{"a retry round starts with every slot free", two, []string{"start exec-1", "start exec-2", "throttle exec-3 2", "end exec-1", "start exec-3", "end exec-2", "end exec-3", "start exec-2", "end exec-2"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := scriptedTrace(t, c.c, c.script...)
			problems := d.admissionEvidence(ids)
			t.Logf("%v", problems)
			if c.want == "" {
				if len(problems) > 0 {
					t.Fatalf("an admission the rule must accept was rejected: %v", problems)
				}
				return
			}
			if !strings.Contains(strings.Join(problems, "; "), c.want) {
				t.Fatalf("problems %v do not name %q", problems, c.want)
			}
		})
	}
	// The options the runtime recorded must be the case's.
	d := scriptedTrace(t, formation.CapacityOptions{Aware: true, Declared: 3}, "start exec-1", "start exec-2", "start exec-3", "end exec-1", "end exec-2", "end exec-3")
	d.opts.Capacity.Declared = 2
	if p := strings.Join(d.admissionEvidence(ids), "; "); !strings.Contains(p, "the runtime recorded capacity") || !strings.Contains(p, "exec-3 had to wait") {
		t.Fatalf("a runtime that ran with 3 slots where the case has 2: %s", p)
	}
	// A capacity left to the provider's answer during the run is not re-derivable.
	d = scriptedTrace(t, formation.CapacityOptions{Aware: true}, "start exec-1", "end exec-1")
	if p := d.admissionEvidence(ids[:1]); len(p) == 0 {
		t.Fatal("a capacity the evidence does not hold was accepted")
	}
}

// recordAs returns an event hook that records events of type typ as a warning instead (a runtime
// that does not emit them).
func recordAs(typ string) func(runtime.Event) runtime.Event {
	return func(ev runtime.Event) runtime.Event {
		if ev.Type != typ {
			return ev
		}
		raw, _ := event.Marshal(event.Warning{Warning: "not a " + typ})
		ev.Type, ev.Payload = event.TypeWarning, raw
		return ev
	}
}

// claimCapacity is a hook recording capacity declared n in team_started, whatever the runtime ran
// with.
func claimCapacity(n int) func(runtime.Event) runtime.Event {
	return rewrite(func(p *event.TeamStarted) {
		p.Options["capacity"] = formation.Options{Capacity: formation.CapacityOptions{Aware: true, Declared: n}}.Summary()["capacity"]
	})
}

// A runtime variant for each admission rule, on the parallel+capacity case (three members, two
// slots): each is rejected by the formation check naming the rule.
func TestAdmissionRuntimeVariantsAreRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the parallel+capacity case four times; skipped with -short")
	}
	withSlots := func(n int) func(*formation.Options) {
		return func(o *formation.Options) { o.Capacity = formation.CapacityOptions{Aware: true, Declared: n} }
	}
	variants := []struct {
		name string
		h    *testHooks
		want []string
	}{
		{"emits no throttle event", only(recordAs(event.TypeMemberThrottled)), []string{"admission: exec-3 had to wait for a slot in round 1"}},
		{"ignores the capacity", &testHooks{options: withSlots(3), event: claimCapacity(2)}, []string{"admission: exec-3 had to wait"}},
		{"throttles without need", &testHooks{options: withSlots(1), event: chain(claimCapacity(2),
			rewrite(func(p *event.MemberThrottled) { p.Limit = 2 }))}, []string{"admission: exec-2 was recorded throttled in round 1 although a slot was free"}},
		{"records another capacity", &testHooks{options: withSlots(1)}, []string{"admission: the runtime recorded capacity"}},
	}
	// The variants are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	for _, c := range variants {
		hooks = append(hooks, c.h)
	}
	got := runHookedRepeats(t, "parallel+capacity", nil, hooks...)
	for i, c := range variants {
		t.Run(c.name, func(t *testing.T) { mustFail(t, got[i], "formation", c.want...) })
	}
}
