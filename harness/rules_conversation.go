package harness

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// The evidence rules of the conversation formations: group_chat, debate and handoff.

// speakingTurns returns the conversation's speaking turns in start order, with their raw replies
// read as speaking turns; a turn that is not valid ends the list (the conversation failed there).
type spoken struct {
	mt *memberTurn
	o  outcome
	t  speakingReply
}

func (d *derivation) speakingTurns(speakers []string, mayHandOff bool) ([]spoken, string) {
	var all []*memberTurn
	for _, id := range speakers {
		all = append(all, d.turns[id]...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start.before(all[j].Start) })
	limit := d.opts.Conversation.TranscriptMaxChars
	if limit == 0 {
		limit = defaultTranscriptMaxChars
	}
	var out []spoken
	var transcript []string
	prior := map[string]int{}
	chars := 0
	for _, mt := range all {
		seq := len(out) + 1
		d.want(mt, runtime.ContractLine{Contract: runtime.ContractSpeakingTurn, Candidates: speakers, Round: seq,
			PriorTurns: prior[mt.Member], MayHandOff: mayHandOff})
		if len(transcript) > 0 {
			// The transcript travels with every turn.
			if err := shownTo(mt, transcript); err != nil {
				return out, fmt.Sprintf("turn %d was not shown the conversation so far: %v", seq, err)
			}
		}
		o := d.outcome(mt)
		if !o.OK {
			return out, o.Why
		}
		t, _ := readSpeaking(o.Reply, mt.Member, speakers, mayHandOff)
		if chars += utf8.RuneCountInString(t.Content); chars > limit {
			return out, fmt.Sprintf("transcript_max_chars %d exceeded at sequence %d (%d characters): the conversation fails there", limit, seq, chars)
		}
		out = append(out, spoken{mt, o, t})
		transcript = append(transcript, fmt.Sprintf("[%d] %s: %s", seq, mt.Member, t.Content))
		prior[mt.Member]++
	}
	return out, ""
}

// spokeClaims compares member_spoke events with the raw turns.
func (d *derivation) spokeClaims(turns []spoken) []string {
	var problems []string
	claimed, at, err := claims[event.MemberSpoke](d)
	if err != nil {
		return []string{"member_spoke: " + err.Error()}
	}
	if len(claimed) != len(turns) {
		problems = append(problems, fmt.Sprintf("%d member_spoke events, the raw replies give %d turn(s)", len(claimed), len(turns)))
	}
	for i := 0; i < min(len(claimed), len(turns)); i++ {
		c, t := claimed[i], turns[i]
		if c.Sequence != i+1 || c.Content != t.t.Content || c.Done != t.t.Done || !samePtr(c.HandoffTo, t.t.HandoffTo) {
			problems = append(problems, fmt.Sprintf("turn %d: the runtime recorded sequence %d done=%v handoff_to %s (member_spoke, %s), %s's raw reply says done=%v handoff_to %s (%s)",
				i+1, c.Sequence, c.Done, quoted(c.HandoffTo), d.at(at[i]), t.mt.Member, t.t.Done, quoted(t.t.HandoffTo), t.o.X.where()))
		}
	}
	return problems
}

func samePtr(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func (d *derivation) maxTurns() int {
	if d.opts.Conversation.MaxTurns > 0 {
		return d.opts.Conversation.MaxTurns
	}
	return defaultMaxTurns
}

// groupChatEvidence: speakers round-robin (or as the router member's raw replies choose), each
// turn re-read; the chat ends at the first done or at max_turns.
func groupChatEvidence(d *derivation) (string, string) {
	if c := d.opts.Conversation; c.Selector != nil || c.CandidateFilter != nil || c.Terminate != nil {
		return statusUnknown, "group_chat with callbacks: their choices are not recorded, so the speakers cannot be re-derived"
	}
	var router *runtime.MemberSpec
	if r := d.withRole(formation.RoleRouter); len(r) == 1 {
		router = &r[0]
	}
	speakers := specIDs(d.members)
	if router != nil {
		speakers = specIDs(d.without(router.ID))
	}
	turns, stop := d.speakingTurns(speakers, false)
	var problems []string
	last := -1
	ended, ok := "", false
	for i, t := range turns {
		want := speakers[(last+1)%len(speakers)]
		if router != nil {
			rts := d.turns[router.ID]
			if len(rts) <= i {
				problems = append(problems, fmt.Sprintf("turn %d has no router turn before it", i+1))
				break
			}
			d.want(rts[i], runtime.ContractLine{Contract: runtime.ContractRouter, Candidates: speakers, Round: i + 1})
			ro := d.outcome(rts[i])
			if !ro.OK {
				stop = ro.Why
				break
			}
			want = mustRouterChoice(ro.Reply, speakers)
		}
		if t.mt.Member != want {
			problems = append(problems, fmt.Sprintf("turn %d was %s's, the %s gives %s", i+1, t.mt.Member, map[bool]string{true: "router's raw reply", false: "round-robin"}[router != nil], want))
		}
		last = slices.Index(speakers, t.mt.Member)
		if t.t.Done {
			ended, ok = "done", true
			if i != len(turns)-1 {
				problems = append(problems, fmt.Sprintf("%d turn(s) after turn %d said done", len(turns)-1-i, i+1))
			}
			break
		}
	}
	if ended == "" && stop == "" && len(turns) == d.maxTurns() {
		ended, ok = "max_turns", true
	}
	if len(turns) > d.maxTurns() {
		problems = append(problems, fmt.Sprintf("%d turns, over max_turns %d", len(turns), d.maxTurns()))
	}
	problems = append(problems, d.spokeClaims(turns)...)
	if md, mok := d.metadata(); mok && ok {
		problems = append(problems, compareMeta(md, map[string]string{"turns": fmt.Sprint(len(turns)), "ended_by": ended})...)
	}
	problems = append(problems, d.teamClaim(ok, labelOr(stop, "the chat neither ended with done nor reached max_turns"))...)
	return d.verdict(problems, fmt.Sprintf("%d turns re-read from the raw replies, ended by %s", len(turns), ended))
}

// debateEvidence: debaters speak in rounds (each until it says done, within max_turns), then the
// judge's raw verdict selects a debater.
func debateEvidence(d *derivation) (string, string) {
	judges := d.withRole(formation.RoleJudge)
	if len(judges) != 1 {
		return failedf("%d judges configured", len(judges))
	}
	judge := judges[0]
	debaters := specIDs(d.without(judge.ID))
	rounds := d.opts.Conversation.DebateRounds
	if rounds == 0 {
		rounds = defaultDebateRounds
	}
	turns, stop := d.speakingTurns(debaters, false)
	var problems []string
	var want []string
	finished := map[string]bool{}
	for r := 1; r <= rounds; r++ {
		for _, id := range debaters {
			if !finished[id] && len(want) < d.maxTurns() {
				want = append(want, id)
				if i := len(want) - 1; i < len(turns) && turns[i].mt.Member == id {
					finished[id] = turns[i].t.Done
				}
			}
		}
	}
	got := make([]string, len(turns))
	for i, t := range turns {
		got[i] = t.mt.Member
	}
	if stop == "" && !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("the debaters spoke in the order %v, the rounds give %v", got, want))
	}
	problems = append(problems, d.spokeClaims(turns)...)
	ok, why := stop == "", stop
	sel := ""
	d.wantAll(judge.ID, runtime.ContractLine{Contract: runtime.ContractJudgeVerdict, Candidates: debaters})
	if ok {
		var transcript []string
		for i, t := range turns {
			transcript = append(transcript, fmt.Sprintf("[%d] %s: %s", i+1, t.mt.Member, t.t.Content))
		}
		if jt := d.lastTurnOf(judge.ID); jt != nil && len(transcript) > 0 {
			if err := shownTo(jt, transcript); err != nil {
				problems = append(problems, "the judge was not shown the debate: "+err.Error())
			}
		}
		jt, jo := d.lastOutcome(judge.ID)
		switch {
		case !jo.OK:
			ok, why = false, jo.Why
		case len(d.turns[judge.ID]) != 1:
			problems = append(problems, fmt.Sprintf("the judge ran %d times", len(d.turns[judge.ID])))
		case len(turns) > 0 && jt.Start.before(turns[len(turns)-1].mt.End):
			problems = append(problems, "the judge started before the last contribution ended")
		}
		if jo.OK {
			var verdictText string
			var err error
			sel, verdictText, err = readSelection(jo.Reply, debaters, true)
			if err != nil {
				ok, why = false, fmt.Sprintf("the judge's raw reply does not select a debater: %v", err)
			}
			claimed, at, cerr := claims[event.JudgeVerdict](d)
			switch {
			case cerr != nil || len(claimed) != 1:
				problems = append(problems, fmt.Sprintf("%d judge_verdict events, want 1%s", len(claimed), because(errText(cerr))))
			case claimed[0].SelectedMemberID != sel || claimed[0].Verdict != verdictText:
				problems = append(problems, fmt.Sprintf("the runtime recorded judge %s selecting %q (judge_verdict, %s), the judge's raw reply selects %q (%s)",
					judge.ID, claimed[0].SelectedMemberID, d.at(at[0]), sel, jo.X.where()))
			}
			if md, mok := d.metadata(); mok && ok {
				problems = append(problems, compareMeta(md, map[string]string{"judge": judge.ID, "selected_member_id": sel, "verdict": verdictText})...)
			}
		}
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, fmt.Sprintf("%d contributions; judge %s selected %s, re-read from its raw reply", len(turns), judge.ID, sel))
}

// handoffEvidence: the first member speaks first, each unfinished turn's raw handoff_to names the
// next speaker, and the conversation ends at done (within max_turns).
func handoffEvidence(d *derivation) (string, string) {
	ids := d.ids()
	turns, stop := d.speakingTurns(ids, true)
	var problems []string
	next := ids[0]
	ok := false
	var path []string
	for i, t := range turns {
		if t.mt.Member != next {
			problems = append(problems, fmt.Sprintf("turn %d was %s's, the previous raw reply handed off to %s", i+1, t.mt.Member, next))
		}
		path = append(path, t.mt.Member)
		if t.t.Done {
			ok = true
			if i != len(turns)-1 {
				problems = append(problems, fmt.Sprintf("%d turn(s) after turn %d said done", len(turns)-1-i, i+1))
			}
			break
		}
		if t.t.HandoffTo == nil {
			problems = append(problems, fmt.Sprintf("turn %d (%s) is neither done nor hands off", i+1, t.mt.Member))
			break
		}
		next = *t.t.HandoffTo
	}
	if len(turns) > d.maxTurns() {
		problems = append(problems, fmt.Sprintf("%d turns, over max_turns %d", len(turns), d.maxTurns()))
	}
	problems = append(problems, d.spokeClaims(turns)...)
	hops, at, err := claims[event.MemberHandoff](d)
	if err != nil {
		problems = append(problems, "member_handoff: "+err.Error())
	}
	var want []event.MemberHandoff
	for i := 0; i+1 < len(turns); i++ {
		if turns[i].t.HandoffTo != nil {
			want = append(want, event.MemberHandoff{Source: turns[i].mt.Member, Target: *turns[i].t.HandoffTo, Sequence: i + 1})
		}
	}
	if !slices.Equal(hops, want) {
		where := ""
		if len(at) > 0 {
			where = " (from " + d.at(at[0]) + ")"
		}
		problems = append(problems, fmt.Sprintf("the runtime recorded handoffs %s%s, the raw replies give %s", formatHops(hops), where, formatHops(want)))
	}
	if md, mok := d.metadata(); mok && ok {
		problems = append(problems, compareMeta(md, map[string]string{"turns": fmt.Sprint(len(turns)), "ended_by": "done"})...)
	}
	why := labelOr(stop, fmt.Sprintf("no turn said done within max_turns %d", d.maxTurns()))
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, "handoffs re-read from the raw replies: "+strings.Join(path, " -> ")+", done")
}
