package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/assay-audit/assay/evidence"
)

// evidenceRule checks one formation's own evidence in the stored trace: not what the runtime
// returned, but what was recorded while it ran.
type evidenceRule func(t trace, s *caseState) (status, detail string)

// formationEvidence is the matrix check of the formation's own evidence (reflection critic's
// persisted verdict, debate and ensemble decisions, the router's single selection, ...), read back
// from the evidence store.
var formationEvidence = Check{
	Name: "formation",
	Doc: "the formation's own evidence is in the stored trace: the ordering it promises, and its decisions " +
		"(critic verdicts, consensus, router selection, judge verdict, ensemble decision, handoffs, turns)",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.teamErr != nil {
			return statusFailed, "team did not run: " + s.teamErr.Error(), nil
		}
		events, err := s.store.Events(ctx, s.runID)
		if err != nil {
			return statusUnknown, "trace unavailable: " + err.Error(), nil
		}
		t := trace{events: withRestored(events)}
		if s.entry.Evidence == nil {
			return statusFailed, "no evidence rule for " + s.entry.Name, nil
		}
		status, detail := s.entry.Evidence(t, s)
		return status, detail, map[string]any{"formation": s.entry.Formation, "catalog": s.entry.Name, "team_metadata": t.teamMetadata()}
	},
}

// withRestored expands each member_restored event of a resumed run (a turn that ended in the run
// it resumes, restored from the checkpoint) into the member_started and member_completed (or
// member_failed) it stands for, at its own seq: the resumed run's formation replayed that turn, and
// its ordering is the ordering the rules check.
func withRestored(events []evidence.StoredEvent) []evidence.StoredEvent {
	out := make([]evidence.StoredEvent, 0, len(events))
	for _, e := range events {
		if e.Type != "member_restored" {
			out = append(out, e)
			continue
		}
		started, ended := e, e
		started.Type, ended.Type = "member_started", "member_completed"
		if ok, _ := payloadOf(e)["success"].(bool); !ok {
			ended.Type = "member_failed"
		}
		out = append(out, started, ended)
	}
	return out
}

// trace is a run's stored events with the lookups the rules need.
type trace struct{ events []evidence.StoredEvent }

func (t trace) ofType(typ string) []evidence.StoredEvent {
	var out []evidence.StoredEvent
	for _, e := range t.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func payloadOf(e evidence.StoredEvent) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Payload, &m)
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// teamMetadata is the formation's metadata as recorded in team_completed.
func (t trace) teamMetadata() map[string]string {
	out := map[string]string{}
	for _, e := range t.ofType("team_completed") {
		if md, ok := payloadOf(e)["metadata"].(map[string]any); ok {
			for k, v := range md {
				out[k] = fmt.Sprint(v)
			}
		}
	}
	return out
}

// firstSeq and lastSeq give the seq of a member's first / last event of a type, 0 when none.
func (t trace) firstSeq(typ, member string) int64 {
	for _, e := range t.events {
		if e.Type == typ && e.MemberID == member {
			return e.Seq
		}
	}
	return 0
}

func (t trace) lastSeq(typ, member string) int64 {
	var s int64
	for _, e := range t.events {
		if e.Type == typ && e.MemberID == member {
			s = e.Seq
		}
	}
	return s
}

// startedMembers lists the members that started, each once, in first-start order.
func (t trace) startedMembers() []string {
	var out []string
	for _, e := range t.ofType("member_started") {
		if !slices.Contains(out, e.MemberID) {
			out = append(out, e.MemberID)
		}
	}
	return out
}

func passed(format string, args ...any) (string, string) {
	return statusPassed, fmt.Sprintf(format, args...)
}
func failedf(format string, args ...any) (string, string) {
	return statusFailed, fmt.Sprintf(format, args...)
}

func planIDs(s *caseState, keep func(memberPlan) bool) []string {
	var out []string
	for _, p := range s.plans {
		if keep == nil || keep(p) {
			out = append(out, p.Spec.ID)
		}
	}
	return out
}

// inOrder checks each member started only after the one before it completed.
func inOrder(t trace, ids []string) (string, string) {
	for i := 1; i < len(ids); i++ {
		done, start := t.lastSeq("member_completed", ids[i-1]), t.firstSeq("member_started", ids[i])
		switch {
		case done == 0:
			return failedf("%s never completed, so the order after it is not shown", ids[i-1])
		case start == 0:
			return failedf("%s never started", ids[i])
		case start < done:
			return failedf("%s started (seq %d) before %s completed (seq %d)", ids[i], start, ids[i-1], done)
		}
	}
	return passed("%s ran in order, each after the one before completed", strings.Join(ids, " -> "))
}

func sequentialEvidence(t trace, s *caseState) (string, string) { return inOrder(t, planIDs(s, nil)) }

func pipelineEvidence(t trace, s *caseState) (string, string) {
	ids := planIDs(s, nil)
	if st, d := inOrder(t, ids); st != statusPassed {
		return st, d
	}
	if got := t.teamMetadata()["stages_run"]; got != fmt.Sprint(len(ids)) {
		return failedf("stages_run %q, want %d", got, len(ids))
	}
	return passed("%d stages in order, each fed the previous output", len(ids))
}

func parallelEvidence(t trace, s *caseState) (string, string) {
	for _, id := range planIDs(s, nil) {
		if t.firstSeq("member_started", id) == 0 || t.lastSeq("member_completed", id) == 0 {
			return failedf("member %s did not start and complete", id)
		}
	}
	return passed("%d members started and completed independently", len(s.plans))
}

func hierarchicalEvidence(t trace, s *caseState) (string, string) {
	sup := t.teamMetadata()["supervisor"]
	if sup == "" {
		return failedf("no supervisor recorded")
	}
	start := t.firstSeq("member_started", sup)
	for _, id := range planIDs(s, func(p memberPlan) bool { return p.Spec.ID != sup }) {
		if done := t.lastSeq("member_completed", id); done == 0 || done > start {
			return failedf("supervisor %s started (seq %d) before %s completed (seq %d)", sup, start, id, done)
		}
	}
	return passed("supervisor %s synthesized after its members completed", sup)
}

func consensusEvidence(t trace, s *caseState) (string, string) {
	rounds, decisions := t.ofType("consensus_round"), t.ofType("consensus_decision")
	if len(rounds) == 0 || len(decisions) != 1 {
		return failedf("%d consensus_round and %d consensus_decision events (want >= 1 and 1)", len(rounds), len(decisions))
	}
	d := payloadOf(decisions[0])
	if d["consensus_achieved"] != true && str(d, "tie_breaker") == "" {
		return failedf("no agreement and no tie-break recorded")
	}
	return passed("consensus_achieved=%v after %d round(s), decision %q", d["consensus_achieved"], len(rounds), str(d, "decision"))
}

func reflectionEvidence(t trace, s *caseState) (string, string) {
	verdicts := t.ofType("critic_verdict")
	if len(verdicts) == 0 {
		return failedf("no critic verdict persisted")
	}
	var seq []string
	for i, v := range verdicts {
		p := payloadOf(v)
		verdict := str(p, "verdict")
		if strings.TrimSpace(str(p, "feedback")) == "" {
			return failedf("critic verdict %d has no feedback", i+1)
		}
		last := i == len(verdicts)-1
		if last && verdict != "satisfied" || !last && verdict != "needs_work" {
			return failedf("critic verdict %d is %q", i+1, verdict)
		}
		seq = append(seq, verdict)
	}
	if md := t.teamMetadata(); md["iterations"] != fmt.Sprint(len(verdicts)) {
		return failedf("%d verdicts persisted for %s iterations", len(verdicts), md["iterations"])
	}
	return passed("critic verdicts persisted: %s", strings.Join(seq, ", "))
}

func routerEvidence(t trace, s *caseState) (string, string) {
	sel := t.ofType("router_selected")
	if len(sel) != 1 {
		return failedf("%d router_selected events, want exactly 1", len(sel))
	}
	chosen := str(payloadOf(sel[0]), "selected_member_id")
	started := t.startedMembers()
	if len(started) != 1 || started[0] != chosen {
		return failedf("router selected %q but members %v started", chosen, started)
	}
	for _, p := range s.plans {
		if p.Spec.ID == chosen && len(p.Deliverables) == 0 {
			return failedf("router selected %s, which cannot deliver the task", chosen)
		}
	}
	return passed("exactly one member selected and run: %s (by %s)", chosen, str(payloadOf(sel[0]), "method"))
}

func multiLevelEvidence(t trace, s *caseState) (string, string) {
	md := t.teamMetadata()
	root := md["root"]
	if root == "" || md["depth"] == "" {
		return failedf("no tree recorded")
	}
	start := t.lastSeq("member_started", root)
	for _, id := range planIDs(s, func(p memberPlan) bool { return p.Spec.ID != root }) {
		if done := t.lastSeq("member_completed", id); done == 0 || done > start {
			return failedf("root %s synthesized before %s completed", root, id)
		}
	}
	return passed("tree of depth %s ran bottom-up; portions %s characters (%s split)", md["depth"], md["portion_chars"], md["split"])
}

func adaptiveEvidence(t trace, s *caseState) (string, string) {
	md := t.teamMetadata()
	switches := len(t.ofType("formation_switched"))
	if md["current_formation"] == "" || md["switch_count"] != fmt.Sprint(switches) {
		return failedf("current formation %q, switch_count %q, %d formation_switched events", md["current_formation"], md["switch_count"], switches)
	}
	return passed("settled on %s after %d switch(es) (history %s), %s score %s", md["current_formation"], switches,
		md["formation_history"], md["strategy"], md["score"])
}

// spokenInSequence checks member_spoke sequences are 1..n and returns the events.
func spokenInSequence(t trace) ([]map[string]any, error) {
	var out []map[string]any
	for i, e := range t.ofType("member_spoke") {
		p := payloadOf(e)
		if p["sequence"] != float64(i+1) {
			return nil, fmt.Errorf("member_spoke %d has sequence %v", i+1, p["sequence"])
		}
		p["member_id"] = e.MemberID
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no member_spoke events")
	}
	return out, nil
}

func groupChatEvidence(t trace, s *caseState) (string, string) {
	turns, err := spokenInSequence(t)
	if err != nil {
		return failedf("%v", err)
	}
	md := t.teamMetadata()
	if md["turns"] != fmt.Sprint(len(turns)) || md["ended_by"] == "" {
		return failedf("turns %q ended_by %q for %d recorded turns", md["turns"], md["ended_by"], len(turns))
	}
	return passed("%d turns, ended by %s", len(turns), md["ended_by"])
}

func debateEvidence(t trace, s *caseState) (string, string) {
	v := t.ofType("judge_verdict")
	if len(v) != 1 {
		return failedf("%d judge_verdict events, want 1", len(v))
	}
	p := payloadOf(v[0])
	sel := str(p, "selected_member_id")
	if sel == v[0].MemberID || !slices.Contains(planIDs(s, nil), sel) {
		return failedf("judge %s selected %q, not a debater", v[0].MemberID, sel)
	}
	turns, err := spokenInSequence(t)
	if err != nil {
		return failedf("%v", err)
	}
	return passed("%d contributions; judge %s selected %s", len(turns), v[0].MemberID, sel)
}

func handoffEvidence(t trace, s *caseState) (string, string) {
	turns, err := spokenInSequence(t)
	if err != nil {
		return failedf("%v", err)
	}
	hops := t.ofType("member_handoff")
	if len(hops) != len(turns)-1 {
		return failedf("%d handoffs for %d turns", len(hops), len(turns))
	}
	var path []string
	for i, h := range hops {
		p := payloadOf(h)
		if str(p, "source") != turns[i]["member_id"] || str(p, "target") != turns[i+1]["member_id"] {
			return failedf("handoff %d %s -> %s does not match the speakers", i+1, str(p, "source"), str(p, "target"))
		}
		path = append(path, str(p, "source"))
	}
	if last := turns[len(turns)-1]; last["done"] != true {
		return failedf("the last turn is not done")
	}
	path = append(path, fmt.Sprint(turns[len(turns)-1]["member_id"]))
	return passed("handoffs %s, done", strings.Join(path, " -> "))
}

func ensembleEvidence(t trace, s *caseState) (string, string) {
	d := t.ofType("ensemble_decision")
	if len(d) != 1 {
		return failedf("%d ensemble_decision events, want 1", len(d))
	}
	p := payloadOf(d[0])
	mode, decision := str(p, "mode"), str(p, "decision")
	if decision == "" || decision == "none" {
		return failedf("ensemble %s reached no decision: %s", mode, str(p, "reason"))
	}
	if mode != "synthesizer" {
		sel := str(p, "selected_member_id")
		candidates := planIDs(s, func(mp memberPlan) bool { return len(mp.Deliverables) > 0 })
		if !slices.Contains(candidates, sel) {
			return failedf("ensemble %s selected %q, not a candidate", mode, sel)
		}
		return passed("ensemble %s selected %s (votes %v)", mode, sel, p["votes"])
	}
	return passed("ensemble synthesizer decided %q", decision)
}
