package harness

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// The evidence rules of the formations that decide: consensus, reflection, dynamic_router and the
// ensemble modes (vote, judge, synthesizer).

// consensusEvidence recomputes every round's groups from the proposers' raw proposals, the
// agreement against the configured threshold with every proposer (failed ones included) in the
// denominator, and the decision; a tie-break is never agreement.
func consensusEvidence(d *derivation) (string, string) {
	if d.opts.Ensemble.Mode != "" {
		return ensembleEvidence(d)
	}
	var sup *runtime.MemberSpec
	if s := d.withRole(formation.RoleSupervisor); len(s) == 1 {
		sup = &s[0]
	}
	var proposers []string
	for _, m := range d.members {
		if m.FormationRole != formation.RoleSupervisor {
			proposers = append(proposers, m.ID)
		}
	}
	rounds := d.opts.Consensus.Rounds
	if rounds == 0 {
		rounds = defaultConsensusRounds
	}
	threshold := d.opts.Consensus.Threshold
	if threshold == 0 {
		threshold = defaultConsensusThreshold
	}
	claimed, at, err := claims[event.ConsensusRound](d)
	if err != nil {
		return failedf("consensus_round: %v", err)
	}
	var problems []string
	active := proposers
	agreed := false
	var agreeing []string
	var shown []string // the previous round's proposals, as each proposer of a later round must see them
	proposal := map[string]string{}
	round := 0
	for round = 1; round <= rounds && len(active) > 0; round++ {
		groups := map[string][]string{}
		var next, lines []string
		for _, id := range active {
			ts := d.turns[id]
			if len(ts) < round {
				problems = append(problems, fmt.Sprintf("proposer %s has no recorded turn for round %d", id, round))
				continue
			}
			d.want(ts[round-1], runtime.ContractLine{Contract: runtime.ContractConsensusProposal, Round: round})
			if len(shown) > 0 {
				if err := shownTo(ts[round-1], shown); err != nil {
					problems = append(problems, fmt.Sprintf("round %d: %v", round, err))
				}
			}
			o := d.outcome(ts[round-1])
			if !o.OK {
				continue
			}
			lines = append(lines, outcomeLine(id, o))
			key, prop, _ := readProposal(o.Reply)
			proposal[id] = prop
			next = append(next, id)
			g := "reply:" + o.Reply
			if key != "" {
				g = "key:" + key
			}
			groups[g] = append(groups[g], id)
		}
		active, shown = next, lines
		_, agreeing = largestGroup(groups)
		agreed = float64(len(agreeing)) >= threshold*float64(len(proposers))
		if len(claimed) < round {
			problems = append(problems, fmt.Sprintf("round %d has no consensus_round event", round))
		} else {
			c := claimed[round-1]
			if c.Round != round || !maps.EqualFunc(c.Groups, groups, slices.Equal[[]string]) || c.Largest != len(agreeing) ||
				c.Proposers != len(proposers) || c.Threshold != threshold || c.Agreement != agreed {
				problems = append(problems, fmt.Sprintf("round %d: the runtime recorded groups %s, largest %d of %d, threshold %v, agreement %v (%s); "+
					"the raw proposals give groups %s, largest %d of %d, threshold %v (configured), agreement %v",
					round, formatGroups(c.Groups), c.Largest, c.Proposers, c.Threshold, c.Agreement, d.at(at[round-1]),
					formatGroups(groups), len(agreeing), len(proposers), threshold, agreed))
			}
		}
		if agreed {
			break
		}
	}
	roundsRun := min(round, rounds)
	if len(claimed) != roundsRun {
		problems = append(problems, fmt.Sprintf("%d consensus_round events, the raw proposals give %d round(s)", len(claimed), roundsRun))
	}
	for _, id := range proposers {
		if n := len(d.turns[id]); n > roundsRun {
			problems = append(problems, fmt.Sprintf("proposer %s has %d turns for %d round(s)", id, n, roundsRun))
		}
	}
	decisions, dat, err := claims[event.ConsensusDecision](d)
	if err != nil || len(decisions) != 1 {
		return failedf("%d consensus_decision events (want 1)%s", len(decisions), because(errText(err)))
	}
	c := decisions[0]
	ok, why, want := false, "", ""
	switch {
	case agreed:
		ok, want = true, proposal[agreeing[0]]
		if !c.ConsensusAchieved || !slices.Equal(c.AgreeingMembers, agreeing) || c.Decision == nil || *c.Decision != want || c.TieBreaker != "" {
			problems = append(problems, fmt.Sprintf("the runtime recorded consensus_achieved=%v agreeing %v decision %s tie_breaker %q (%s); the raw proposals give "+
				"agreement of %v in round %d, decision %q", c.ConsensusAchieved, c.AgreeingMembers, quoted(c.Decision), c.TieBreaker, d.at(dat[0]), agreeing, roundsRun, want))
		}
	case sup != nil && len(d.turns[sup.ID]) > 0:
		d.want(d.turns[sup.ID][0], runtime.ContractLine{Contract: runtime.ContractConsensusProposal, Round: roundsRun + 1})
		if err := shownTo(d.turns[sup.ID][0], shown); err != nil {
			problems = append(problems, "the tie-break: "+err.Error())
		}
		o := d.outcome(d.turns[sup.ID][0])
		if o.OK {
			_, want, _ = readProposal(o.Reply)
			ok = true
		} else {
			why = o.Why
		}
		if c.ConsensusAchieved || (ok && (c.TieBreaker != sup.ID || c.Decision == nil || *c.Decision != want)) || (!ok && c.TieBreakerFailed != sup.ID) {
			problems = append(problems, fmt.Sprintf("the runtime recorded consensus_achieved=%v tie_breaker %q decision %s (%s); the raw replies give no agreement "+
				"(largest group %d of %d, threshold %v) and %s's tie-break %q", c.ConsensusAchieved, c.TieBreaker, quoted(c.Decision), d.at(dat[0]),
				len(agreeing), len(proposers), threshold, sup.ID, want))
		}
	default:
		why = fmt.Sprintf("no agreement in %d round(s) (largest group %d of %d, threshold %v) and no tie-break", roundsRun, len(agreeing), len(proposers), threshold)
		if c.ConsensusAchieved || c.Decision != nil {
			problems = append(problems, fmt.Sprintf("the runtime recorded consensus_achieved=%v decision %s (%s), but %s", c.ConsensusAchieved, quoted(c.Decision), d.at(dat[0]), why))
		}
	}
	if c.Rounds != roundsRun {
		problems = append(problems, fmt.Sprintf("the runtime recorded %d round(s) (%s), the raw proposals give %d", c.Rounds, d.at(dat[0]), roundsRun))
	}
	if sup != nil && (agreed || len(d.turns[sup.ID]) == 0) && len(d.turns[sup.ID]) > 0 {
		problems = append(problems, fmt.Sprintf("supervisor %s proposed although %s", sup.ID, map[bool]string{true: "the members agreed", false: "nobody asked it"}[agreed]))
	}
	if md, mok := d.metadata(); mok {
		wantMeta := map[string]string{"consensus_achieved": fmt.Sprint(agreed), "rounds": fmt.Sprint(roundsRun), "threshold": fmt.Sprint(threshold)}
		if agreed {
			wantMeta["decision"], wantMeta["agreeing_members"] = want, strings.Join(agreeing, ",")
		} else if ok {
			wantMeta["decision"], wantMeta["tie_breaker"] = want, sup.ID
		}
		problems = append(problems, compareMeta(md, wantMeta)...)
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	how := fmt.Sprintf("agreement of %s in round %d (threshold %v of %d proposers)", strings.Join(agreeing, ", "), roundsRun, threshold, len(proposers))
	if !agreed {
		how = "tie broken by " + labelOr(c.TieBreaker, "nobody") + " (consensus_achieved=false)"
	}
	return d.verdict(problems, fmt.Sprintf("%s, decision %q, re-derived from the raw proposals", how, truncateText(want, 60)))
}

// compareMeta compares the runtime's team_completed metadata with the re-derived values of the
// keys want names (the metadata is a claim too: a report shows it).
func compareMeta(md map[string]string, want map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if md[k] != want[k] {
			out = append(out, fmt.Sprintf("the runtime recorded %s %q in team_completed's metadata, the raw replies give %q", k, truncateText(md[k], 60), truncateText(want[k], 60)))
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func quoted(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", truncateText(*s, 60))
}

// largestGroup returns the key and members of the largest group, ties to the smallest key.
func largestGroup(groups map[string][]string) (string, []string) {
	keys := slices.Sorted(maps.Keys(groups))
	best := ""
	for _, k := range keys {
		if best == "" || len(groups[k]) > len(groups[best]) {
			best = k
		}
	}
	return best, groups[best]
}

// reflectionEvidence re-reads every critic verdict from the critic's raw replies: the loop goes on
// while the critic says needs_work and ends at the first satisfied, or fails at the iteration limit.
func reflectionEvidence(d *derivation) (string, string) {
	gen, critic := d.members[0], d.members[1]
	if gen.FormationRole == formation.RoleCritic || critic.FormationRole == formation.RoleGenerator {
		gen, critic = critic, gen
	}
	limit := d.opts.Reflection.MaxIterations
	if limit == 0 {
		limit = defaultReflectionIterations
	}
	claimed, at, err := claims[event.CriticVerdict](d)
	if err != nil {
		return failedf("critic_verdict: %v", err)
	}
	var problems, seq []string
	gens, crits := d.turns[gen.ID], d.turns[critic.ID]
	d.wantAll(gen.ID, runtime.ContractLine{Contract: runtime.ContractCompletion})
	ok, why := false, ""
	lastFeedback := ""
	it := 0
	for it = 1; it <= limit; it++ {
		if len(gens) < it {
			why = fmt.Sprintf("no generator turn for iteration %d", it)
			break
		}
		if lastFeedback != "" {
			// The generator revises with the critic's feedback on its previous attempt.
			if err := shownTo(gens[it-1], []string{"[" + critic.ID + "] " + lastFeedback}); err != nil {
				problems = append(problems, fmt.Sprintf("iteration %d: the critic's feedback did not reach the generator: %v", it, err))
			}
		}
		g := d.outcome(gens[it-1])
		if !g.OK {
			why = g.Why
			break
		}
		if len(crits) < it {
			why = fmt.Sprintf("no critic turn for iteration %d", it)
			break
		}
		ct := crits[it-1]
		gc, _ := readCompletion(g.Reply, d.scoreAsked)
		d.want(ct, runtime.ContractLine{Contract: runtime.ContractCriticVerdict, Round: it, Files: gc.Files})
		if ct.Start.before(gens[it-1].End) || gens[it-1].End.zero() {
			problems = append(problems, fmt.Sprintf("critic iteration %d started before the generator's ended", it))
		}
		if err := shownTo(ct, []string{outcomeLine(gen.ID, g)}); err != nil {
			problems = append(problems, fmt.Sprintf("iteration %d: the critic was not shown the generator's reply: %v", it, err))
		}
		o := d.outcome(ct)
		if !o.OK {
			why = o.Why
			break
		}
		v, _ := readCritic(o.Reply)
		seq = append(seq, v.Verdict)
		if len(claimed) < it {
			problems = append(problems, fmt.Sprintf("iteration %d: no critic_verdict event for the critic's recorded %s (%s)", it, v.Verdict, o.X.where()))
		} else if c := claimed[it-1]; c.Iteration != it || c.Verdict != v.Verdict || c.Feedback != v.Feedback {
			problems = append(problems, fmt.Sprintf("iteration %d: the runtime recorded verdict %q (critic_verdict, %s), the critic's raw reply says %q (%s)",
				it, c.Verdict, d.at(at[it-1]), v.Verdict, o.X.where()))
		}
		if v.Verdict == "satisfied" {
			ok = true
			break
		}
		lastFeedback = v.Feedback
	}
	if !ok && why == "" {
		why = fmt.Sprintf("the critic was not satisfied within %d iteration(s)", limit)
	}
	if len(claimed) != len(seq) {
		problems = append(problems, fmt.Sprintf("%d critic_verdict events, the critic's raw replies give %d verdict(s)", len(claimed), len(seq)))
	}
	ran := min(it, limit)
	if len(gens) > ran || len(crits) > ran {
		problems = append(problems, fmt.Sprintf("the loop ran on after it ended: %d generator and %d critic turns for %d iteration(s)", len(gens), len(crits), ran))
	}
	if md, mok := d.metadata(); mok && len(seq) > 0 {
		problems = append(problems, compareMeta(md, map[string]string{"iterations": fmt.Sprint(min(it, limit)), "satisfied": fmt.Sprint(ok),
			"verdict": seq[len(seq)-1], "generator": gen.ID, "critic": critic.ID})...)
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, "critic verdicts re-read from the raw replies: "+strings.Join(seq, ", "))
}

// routerEvidence re-derives the selection (the router member's raw reply, or the configured routes
// and domain roles against the team task) and checks only the selected member ran.
func routerEvidence(d *derivation) (string, string) {
	var router *runtime.MemberSpec
	if r := d.withRole(formation.RoleRouter); len(r) == 1 {
		router = &r[0]
	}
	candidates := d.members
	if router != nil {
		candidates = d.without(router.ID)
	}
	var problems []string
	want, method := "", ""
	if router != nil {
		d.wantAll(router.ID, runtime.ContractLine{Contract: runtime.ContractRouter, Candidates: specIDs(candidates), Round: 1})
		rt, o := d.lastOutcome(router.ID)
		if rt != nil {
			if err := shownTo(rt, []string{d.s.team.Task}); err != nil {
				problems = append(problems, "the router was not shown the task: "+err.Error())
			}
		}
		if !o.OK {
			return d.verdict(append(problems, d.teamClaim(false, o.Why)...), "")
		}
		want, method = mustRouterChoice(o.Reply, specIDs(candidates)), "router"
	} else {
		want, method = selectByTask(d.s.team.Task, candidates, d.opts.Router.Routes)
	}
	sel, at, err := claims[event.RouterSelected](d)
	switch {
	case err != nil || len(sel) != 1:
		problems = append(problems, fmt.Sprintf("%d router_selected events, want exactly 1%s", len(sel), because(errText(err))))
	case sel[0].SelectedMemberID != want || sel[0].Method != method:
		problems = append(problems, fmt.Sprintf("the runtime recorded %s selected by %s (router_selected, %s), the %s gives %s",
			sel[0].SelectedMemberID, sel[0].Method, d.at(at[0]), method, want))
	default:
		// The selection is made, and recorded, before the selected member runs.
		if mt := d.firstTurnOf(want); mt != nil && mt.Start.before(at[0]) {
			problems = append(problems, fmt.Sprintf("router_selected (%s) was recorded after %s started (%s)", d.at(at[0]), want, d.at(mt.Start)))
		}
	}
	d.wantAll(want, runtime.ContractLine{Contract: runtime.ContractCompletion})
	if md, mok := d.metadata(); mok {
		problems = append(problems, compareMeta(md, map[string]string{"selected_member_id": want, "selection_method": method})...)
	}
	for _, m := range candidates {
		if n := len(d.turns[m.ID]); m.ID != want && n > 0 {
			problems = append(problems, fmt.Sprintf("%s ran although %s was selected", m.ID, want))
		} else if m.ID == want && n != 1 {
			problems = append(problems, fmt.Sprintf("the selected member %s ran %d times", want, n))
		}
	}
	for _, p := range d.s.plans {
		if p.Spec.ID == want && len(p.Deliverables) == 0 {
			problems = append(problems, fmt.Sprintf("%s was selected, which cannot deliver the task", want))
		}
	}
	_, o := d.lastOutcome(want)
	problems = append(problems, d.teamClaim(o.OK, o.Why)...)
	return d.verdict(problems, fmt.Sprintf("exactly one member selected and run: %s (by %s, re-derived)", want, method))
}

func mustRouterChoice(reply string, candidates []string) string {
	id, _ := readRouterChoice(reply, candidates)
	return id
}

// selectByTask is dynamic_router's programmatic selection (FORMATIONS.md): an explicit route whose
// keyword is a whole word of the task (keywords in sorted order), else the first member whose
// domain role's keywords match (roles in defaultRoleKeywords order), else the first member.
func selectByTask(task string, candidates []runtime.MemberSpec, routes map[string]string) (string, string) {
	for _, kw := range slices.Sorted(maps.Keys(routes)) {
		if hasWord(task, kw) {
			for _, m := range candidates {
				if m.Name == routes[kw] {
					return m.ID, "route"
				}
			}
		}
	}
	for _, rk := range defaultRoleKeywords() {
		for _, w := range rk.words {
			if !hasWord(task, w) {
				continue
			}
			for _, m := range candidates {
				if m.DomainRole == rk.role {
					return m.ID, "domain_role"
				}
			}
		}
	}
	return candidates[0].ID, "fallback"
}

// hasWord reports whether word occurs in text, case-insensitively, with a word boundary (ASCII
// letters, digits and '_' are word characters, as RE2's \b) on both sides.
func hasWord(text, word string) bool {
	t, w := strings.ToLower(text), strings.ToLower(word)
	isWord := func(s string, i int) bool {
		if i < 0 || i >= len(s) {
			return false
		}
		c := s[i]
		return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	boundary := func(i int) bool { return isWord(t, i-1) != isWord(t, i) }
	for at := 0; at+len(w) <= len(t) && w != ""; at++ {
		if strings.HasPrefix(t[at:], w) && boundary(at) && boundary(at+len(w)) {
			return true
		}
	}
	return false
}

// ensembleEvidence recomputes the ensemble decision from the candidates' raw proposals: vote (a
// strict majority of vote keys; a tie or an invalid proposal is no decision), judge (the judge's
// raw selection among the valid candidates) or synthesizer (the synthesizer's raw answer).
func ensembleEvidence(d *derivation) (string, string) {
	mode := d.opts.Ensemble.Mode
	var candidates []string
	var aggregator string
	for _, m := range d.members {
		switch m.FormationRole {
		case "", formation.RoleCandidate:
			candidates = append(candidates, m.ID)
		case formation.RoleJudge, formation.RoleSynthesizer:
			aggregator = m.ID
		}
	}
	var problems []string
	keys, answers := map[string]string{}, map[string]string{}
	votes := map[string]int{}
	var valid, invalid []string
	for _, id := range candidates {
		for k, mt := range d.turns[id] {
			round := 0 // a parallel candidate answers once; a consensus candidate per round
			if d.formation == "consensus" {
				round = k + 1
			}
			d.want(mt, runtime.ContractLine{Contract: runtime.ContractEnsembleProposal, Round: round})
		}
		_, o := d.lastOutcome(id)
		if !o.OK {
			invalid = append(invalid, id)
			continue
		}
		k, a, err := readVote(o.Reply, d.answerLimit())
		if err != nil {
			invalid = append(invalid, id)
			continue
		}
		keys[id], answers[id] = k, a
		votes[k]++
		valid = append(valid, id)
	}
	// The aggregator is asked about, and shown, exactly the valid candidates' answers.
	var validKeys, shown []string
	for _, id := range valid {
		validKeys = append(validKeys, keys[id])
		shown = append(shown, fmt.Sprintf("[%s] vote_key=%q answer=%q", id, keys[id], answers[id]))
	}
	if aggregator != "" {
		switch mode {
		case formation.EnsembleJudge:
			d.wantAll(aggregator, runtime.ContractLine{Contract: runtime.ContractEnsembleJudge, Candidates: valid, VoteKeys: validKeys})
		case formation.EnsembleSynthesizer:
			d.wantAll(aggregator, runtime.ContractLine{Contract: runtime.ContractSynthesis, Candidates: valid})
		}
		if at := d.lastTurnOf(aggregator); at != nil {
			if err := shownTo(at, shown); err != nil {
				problems = append(problems, fmt.Sprintf("the %s was not shown the candidates' answers: %v", mode, err))
			}
			for _, id := range candidates {
				if ct := d.lastTurnOf(id); ct != nil && (ct.End.zero() || at.Start.before(ct.End)) {
					problems = append(problems, fmt.Sprintf("%s %s started before candidate %s ended", mode, aggregator, id))
				}
			}
		}
	}
	claimed, at, err := claims[event.EnsembleDecision](d)
	if err != nil || len(claimed) != 1 {
		return failedf("%d ensemble_decision events, want 1%s", len(claimed), because(errText(err)))
	}
	c, where := claimed[0], d.at(at[0])
	if c.Mode != mode {
		problems = append(problems, fmt.Sprintf("the runtime recorded mode %q (%s), the case configures %q", c.Mode, where, mode))
	}
	if !maps.Equal(c.Votes, votes) {
		problems = append(problems, fmt.Sprintf("the runtime recorded votes %s (%s), the candidates' raw proposals give %s", formatVotes(c.Votes), where, formatVotes(votes)))
	}
	ok, why, decided := false, "", ""
	switch mode {
	case formation.EnsembleVote:
		best, n := "", 0
		for _, k := range slices.Sorted(maps.Keys(votes)) {
			if votes[k] > n {
				best, n = k, votes[k]
			}
		}
		switch {
		case len(invalid) > 0:
			why = "invalid or missing proposal from " + strings.Join(invalid, ", ")
		case 2*n <= len(candidates):
			why = fmt.Sprintf("no strict majority: the largest vote has %d of %d", n, len(candidates))
		default:
			ok, decided = true, best
		}
		if ok {
			sel := c.SelectedMemberID
			if keys[sel] != best || c.VoteKey != best || c.Decision != answers[sel] {
				problems = append(problems, fmt.Sprintf("the runtime recorded %s winning with vote_key %q and decision %q (%s); the raw proposals give "+
					"the majority key %q (%d of %d), which %s's raw proposal (key %q) does not carry with that answer",
					labelOr(sel, "nobody"), c.VoteKey, truncateText(c.Decision, 60), where, best, n, len(candidates), labelOr(sel, "nobody"), keys[sel]))
			}
		} else if c.Decision != "none" || c.SelectedMemberID != "" {
			problems = append(problems, fmt.Sprintf("the runtime recorded %s selected, decision %q (%s), but the raw proposals give no decision: %s",
				labelOr(c.SelectedMemberID, "nobody"), truncateText(c.Decision, 60), where, why))
		}
	case formation.EnsembleJudge:
		_, jo := d.lastOutcome(aggregator)
		switch {
		case len(valid) == 0:
			why = "no candidate gave a valid proposal"
		case !jo.OK:
			why = jo.Why
		default:
			sel, _, err := readSelection(jo.Reply, valid, false)
			if err != nil {
				why = fmt.Sprintf("judge %s's raw reply does not select a valid candidate: %v", aggregator, err)
				break
			}
			ok, decided = true, sel
			if c.SelectedMemberID != sel || c.Decision != answers[sel] || c.VoteKey != keys[sel] || c.Judge != aggregator {
				problems = append(problems, fmt.Sprintf("the runtime recorded judge %q selecting %q with decision %q (%s); judge %s's raw reply selects %q (%s), whose answer is %q",
					c.Judge, c.SelectedMemberID, truncateText(c.Decision, 60), where, aggregator, sel, jo.X.where(), truncateText(answers[sel], 60)))
			}
		}
		if !ok && c.Decision != "none" {
			problems = append(problems, fmt.Sprintf("the runtime recorded decision %q (%s), but %s", truncateText(c.Decision, 60), where, why))
		}
	case formation.EnsembleSynthesizer:
		_, so := d.lastOutcome(aggregator)
		switch {
		case len(valid) == 0:
			why = "no candidate gave a valid proposal"
		case !so.OK:
			why = so.Why
		default:
			answer, err := readAnswer(so.Reply, d.answerLimit())
			if err != nil {
				why = err.Error()
				break
			}
			ok, decided = true, answer
			if c.Decision != answer || c.Synthesizer != aggregator || !d.attempt && !strings.HasPrefix(d.s.result.FinalOutput, answer) {
				problems = append(problems, fmt.Sprintf("the runtime recorded synthesizer %q deciding %q (%s) and returned %q; synthesizer %s's raw reply answers %q (%s)",
					c.Synthesizer, truncateText(c.Decision, 60), where, truncateText(d.s.result.FinalOutput, 60), aggregator, truncateText(answer, 60), so.X.where()))
			}
		}
		if !ok && c.Decision != "none" {
			problems = append(problems, fmt.Sprintf("the runtime recorded decision %q (%s), but %s", truncateText(c.Decision, 60), where, why))
		}
	default:
		return failedf("unknown ensemble mode %q", mode)
	}
	if md, mok := d.metadata(); mok && ok {
		wantMeta := map[string]string{"ensemble_mode": mode}
		switch mode {
		case formation.EnsembleVote:
			wantMeta["vote_key"], wantMeta["decision"] = decided, c.Decision
			if answers[c.SelectedMemberID] != "" {
				wantMeta["decision"] = answers[c.SelectedMemberID]
			}
		case formation.EnsembleJudge:
			wantMeta["selected_member_id"], wantMeta["judge"], wantMeta["vote_key"], wantMeta["decision"] = decided, aggregator, keys[decided], answers[decided]
		case formation.EnsembleSynthesizer:
			wantMeta["synthesizer"], wantMeta["decision"] = aggregator, decided
		}
		problems = append(problems, compareMeta(md, wantMeta)...)
	}
	failed, fwhy := d.failedMembers(d.ids())
	if ok && len(failed) > 0 {
		ok, why = false, fwhy
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, fmt.Sprintf("ensemble %s re-derived from the raw proposals: %s (votes %s)", mode, truncateText(decided, 60), formatVotes(votes)))
}
