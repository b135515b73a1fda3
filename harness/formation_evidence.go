package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// evidenceRule re-derives one formation's decisions from the members' raw replies (the recorded
// response bytes, read by the harness's own reader) and the configured options, and compares them
// with what the runtime recorded (its decision events and team_completed). It returns a failure
// naming both values and where each came from when they differ, or when the re-derived team did
// not succeed.
type evidenceRule func(d *derivation) (status, detail string)

// formationEvidence is the matrix check of the formation's own decisions, re-derived.
var formationEvidence = Check{
	Name: "formation",
	Doc: "the formation's decisions re-derived from the members' raw replies (the response bytes recorded for each " +
		"provider exchange, parsed by the harness with the formation's strict contract) and the configured options — order, " +
		"context passed on, critic verdicts and the loop's end, consensus rounds and threshold, vote majority, judge and router " +
		"selections, synthesis, tree, adaptive switches, speakers, done and handoffs — equal what the runtime recorded, and the " +
		"re-derived team succeeded",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.teamErr != nil {
			return statusFailed, "team did not run: " + s.teamErr.Error(), nil
		}
		if s.entry.Evidence == nil {
			return statusFailed, "no evidence rule for " + s.entry.Name, nil
		}
		if s.traceErr != nil {
			return statusUnknown, "trace unavailable: " + s.traceErr.Error(), nil
		}
		t := s.trace
		d := newDerivation(s, t)
		if len(t.problems) > 0 {
			return statusFailed, "the trace is not one causal history: " + strings.Join(t.problems, "; "), nil
		}
		status, detail := s.entry.Evidence(d)
		return status, detail, map[string]any{"formation": s.entry.Formation, "catalog": s.entry.Name}
	},
}

// derivation is what a rule re-derives from: the case's configuration (members in configuration
// order, formation options) and its trace.
type derivation struct {
	s       *caseState
	t       *caseTrace
	opts    formation.Options
	members []runtime.MemberSpec
	// turns is the rule's view of the members' turns (adaptive narrows it to one attempt).
	turns map[string][]*memberTurn
	// from and to bound the claims the rule reads (positions; to zero = the end).
	from, to pos
	// attempt is set when the rule re-derives one attempt of an adaptive run: there is no
	// team_completed or returned result of its own, and teamClaim records the re-derived outcome in
	// ok and why instead of comparing it.
	attempt bool
	ok      bool
	why     string
}

func newDerivation(s *caseState, t *caseTrace) *derivation {
	d := &derivation{s: s, t: t, opts: s.entry.Options(), turns: t.turns}
	for _, p := range s.plans {
		d.members = append(d.members, p.Spec)
	}
	return d
}

func (d *derivation) ids() []string {
	out := make([]string, len(d.members))
	for i, m := range d.members {
		out[i] = m.ID
	}
	return out
}

func (d *derivation) member(id string) (runtime.MemberSpec, bool) {
	for _, m := range d.members {
		if m.ID == id {
			return m, true
		}
	}
	return runtime.MemberSpec{}, false
}

func (d *derivation) withRole(role string) []runtime.MemberSpec {
	var out []runtime.MemberSpec
	for _, m := range d.members {
		if m.FormationRole == role {
			out = append(out, m)
		}
	}
	return out
}

func (d *derivation) without(ids ...string) []runtime.MemberSpec {
	var out []runtime.MemberSpec
	for _, m := range d.members {
		if !slices.Contains(ids, m.ID) {
			out = append(out, m)
		}
	}
	return out
}

func specIDs(ms []runtime.MemberSpec) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// claims returns the rule's window of the runtime's events of type T (the case's own run).
func claims[T event.Payload](d *derivation) ([]T, []pos, error) {
	all, at, err := claimsOf[T](d.t)
	if err != nil {
		return nil, nil, err
	}
	var out []T
	var outAt []pos
	for i, p := range at {
		if p.before(d.from) || !d.to.zero() && !p.before(d.to) {
			continue
		}
		out = append(out, all[i])
		outAt = append(outAt, p)
	}
	return out, outAt, nil
}

// at names a claim's position for a detail.
func (d *derivation) at(p pos) string { return fmt.Sprintf("run %s event %d", d.t.runs[p.run], p.seq) }

// outcome is what the recorded bytes say one turn produced.
type outcome struct {
	OK bool
	// Reply is the raw final reply text ("" when there is none).
	Reply string
	// Why says why the turn is not OK.
	Why  string
	Line runtime.ContractLine
	X    *exchangeRec
}

// answerLimit is the synthesis and ensemble answer limit of the case's options.
func (d *derivation) answerLimit() int {
	if d.opts.Ensemble.MaxAnswerChars > 0 {
		return d.opts.Ensemble.MaxAnswerChars
	}
	return formation.DefaultMaxAnswerChars
}

// outcome reads the turn's final reply from its recorded bytes and checks it against the contract
// its first request stated. A turn that did not end (paused, interrupted) is not OK.
func (d *derivation) outcome(mt *memberTurn) outcome {
	if mt == nil {
		return outcome{Why: "no turn recorded"}
	}
	reply, x, err := mt.reply()
	if err != nil {
		return outcome{Why: err.Error(), X: x}
	}
	o := outcome{Reply: reply, X: x}
	line, err := mt.contractLine()
	if err != nil {
		o.Why = err.Error()
		return o
	}
	o.Line = line
	if line.MemberID != mt.Member {
		o.Why = fmt.Sprintf("%s was asked a contract for member %q", mt.Member, line.MemberID)
		return o
	}
	var cerr error
	switch line.Contract {
	case runtime.ContractCompletion:
		var c completionReply
		c, cerr = readCompletion(reply, line.QualityScore)
		if cerr == nil && !c.Done {
			cerr = fmt.Errorf("the member reported failure: %s", c.Error)
		}
	case runtime.ContractCriticVerdict:
		_, cerr = readCritic(reply)
	case runtime.ContractJudgeVerdict:
		_, _, cerr = readSelection(reply, line.Candidates, true)
	case runtime.ContractEnsembleJudge:
		_, _, cerr = readSelection(reply, line.Candidates, false)
	case runtime.ContractSynthesis:
		_, cerr = readAnswer(reply, d.answerLimit())
	case runtime.ContractRouter:
		_, cerr = readRouterChoice(reply, line.Candidates)
	case runtime.ContractSpeakingTurn:
		_, cerr = readSpeaking(reply, mt.Member, line.Candidates, line.MayHandOff)
	case runtime.ContractConsensusProposal:
		_, _, cerr = readProposal(reply)
	case runtime.ContractEnsembleProposal:
		_, _, cerr = readVote(reply, d.answerLimit())
	default:
		cerr = fmt.Errorf("unknown contract %q", line.Contract)
	}
	if cerr != nil {
		o.Why = fmt.Sprintf("%s invocation %d: the recorded reply breaks the %s contract (%s): %v", mt.Member, mt.Invocation, line.Contract, x.where(), cerr)
		return o
	}
	o.OK = true
	return o
}

// lastOutcome is the outcome of the member's last turn in the rule's view.
func (d *derivation) lastOutcome(id string) (*memberTurn, outcome) {
	ts := d.turns[id]
	if len(ts) == 0 {
		return nil, outcome{Why: id + " did not run"}
	}
	mt := ts[len(ts)-1]
	return mt, d.outcome(mt)
}

// outcomeLine is how the formations show a member's outcome to the next: "[id] reply" or
// "[id] failed:" (the error text is the runtime's).
func outcomeLine(id string, o outcome) string {
	if o.OK {
		return "[" + id + "] " + o.Reply
	}
	return "[" + id + "] failed:"
}

// shownTo checks each of lines appears, in order, in the first request of turn mt.
func shownTo(mt *memberTurn, lines []string) error {
	text, err := mt.firstRequest()
	if err != nil {
		return err
	}
	at := 0
	for _, l := range lines {
		i := strings.Index(text[at:], l)
		if i < 0 {
			return fmt.Errorf("%s invocation %d was not shown %q in its recorded request", mt.Member, mt.Invocation, truncateText(l, 120))
		}
		at += i + len(l)
	}
	return nil
}

// teamClaim compares the re-derived team outcome with the runtime's: team_completed.success and
// what the runtime returned. It returns the problems.
func (d *derivation) teamClaim(derived bool, why string) []string {
	if d.attempt {
		d.ok, d.why = derived, why
		return nil
	}
	var problems []string
	tc, at, err := claims[event.TeamCompleted](d)
	switch {
	case err != nil:
		problems = append(problems, "team_completed: "+err.Error())
	case len(tc) != 1:
		problems = append(problems, fmt.Sprintf("%d team_completed events, want 1", len(tc)))
	case tc[0].Success != derived:
		problems = append(problems, fmt.Sprintf("the runtime recorded success=%v (team_completed, %s), the raw replies give success=%v%s",
			tc[0].Success, d.at(at[0]), derived, because(why)))
	}
	if d.s.result.Success != derived {
		problems = append(problems, fmt.Sprintf("the runtime returned success=%v, the raw replies give success=%v%s", d.s.result.Success, derived, because(why)))
	}
	if !derived && len(problems) == 0 {
		problems = append(problems, "the team did not succeed"+because(why))
	}
	return problems
}

func because(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

// metadata returns the runtime's team_completed metadata; ok is false within an adaptive attempt,
// whose own metadata is not recorded.
func (d *derivation) metadata() (map[string]string, bool) {
	if d.attempt {
		return nil, false
	}
	tc, _, _ := claims[event.TeamCompleted](d)
	if len(tc) == 0 {
		return map[string]string{}, true
	}
	return tc[len(tc)-1].Metadata, true
}

// verdict turns problems into the rule's result.
func verdict(problems []string, passedDetail string) (string, string) {
	if len(problems) > 0 {
		return statusFailed, strings.Join(problems, "; ")
	}
	return statusPassed, passedDetail
}

// inOrder checks each member's turn started after the previous member's turn ended.
func (d *derivation) inOrder(ids []string) []string {
	var problems []string
	for i := 1; i < len(ids); i++ {
		prev, next := d.lastTurnOf(ids[i-1]), d.firstTurnOf(ids[i])
		switch {
		case prev == nil || prev.End.zero():
			problems = append(problems, ids[i-1]+" never ended, so the order after it is not shown")
		case next == nil:
			problems = append(problems, ids[i]+" never started")
		case next.Start.before(prev.End):
			problems = append(problems, fmt.Sprintf("%s started (%s) before %s ended (%s)", ids[i], d.at(next.Start), ids[i-1], d.at(prev.End)))
		}
	}
	return problems
}

func (d *derivation) firstTurnOf(id string) *memberTurn {
	if ts := d.turns[id]; len(ts) > 0 {
		return ts[0]
	}
	return nil
}

func (d *derivation) lastTurnOf(id string) *memberTurn {
	if ts := d.turns[id]; len(ts) > 0 {
		return ts[len(ts)-1]
	}
	return nil
}

// onceEach checks each of ids ran exactly once.
func (d *derivation) onceEach(ids []string) []string {
	var problems []string
	for _, id := range ids {
		if n := len(d.turns[id]); n != 1 {
			problems = append(problems, fmt.Sprintf("%s ran %d times, want exactly once", id, n))
		}
	}
	return problems
}

// sequentialEvidence: members one after another in configuration order, each shown the outcomes
// of the members before it; the team succeeds when every member did.
func sequentialEvidence(d *derivation) (string, string) {
	ids := d.ids()
	problems := append(d.onceEach(ids), d.inOrder(ids)...)
	var shown []string
	ok, why := true, ""
	for _, id := range ids {
		mt, o := d.lastOutcome(id)
		if mt != nil && len(shown) > 0 {
			if err := shownTo(mt, shown); err != nil {
				problems = append(problems, err.Error())
			}
		}
		shown = append(shown, outcomeLine(id, o))
		if !o.OK && ok {
			ok, why = false, o.Why
		}
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, fmt.Sprintf("%s ran in order, each shown the recorded replies before it", strings.Join(ids, " -> ")))
}

// pipelineEvidence: stages in order, each given the previous stage's recorded reply as input; a
// failed stage stops the line.
func pipelineEvidence(d *derivation) (string, string) {
	ids := d.ids()
	var problems []string
	ran := 0
	ok, why := true, ""
	for i, id := range ids {
		mt, o := d.lastOutcome(id)
		if mt == nil {
			if ok {
				problems = append(problems, fmt.Sprintf("stage %d (%s) did not run although every stage before it succeeded", i+1, id))
			}
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("stage %d (%s) ran after a failed stage: the line must stop", i+1, id))
			continue
		}
		ran++
		if len(d.turns[id]) != 1 {
			problems = append(problems, fmt.Sprintf("stage %s ran %d times", id, len(d.turns[id])))
		}
		if i > 0 {
			prev := d.lastTurnOf(ids[i-1])
			if prev != nil && mt.Start.before(prev.End) {
				problems = append(problems, fmt.Sprintf("%s started (%s) before %s ended (%s)", id, d.at(mt.Start), ids[i-1], d.at(prev.End)))
			}
			_, po := d.lastOutcome(ids[i-1])
			if err := shownTo(mt, []string{po.Reply}); err != nil {
				problems = append(problems, "the input of "+err.Error()[len(id)+1:])
			}
		}
		if !o.OK {
			ok, why = false, o.Why
		}
	}
	if md, ok := d.metadata(); ok && md["stages_run"] != fmt.Sprint(ran) {
		got := md["stages_run"]
		problems = append(problems, fmt.Sprintf("the runtime recorded stages_run %q, the trace shows %d", got, ran))
	}
	problems = append(problems, d.teamClaim(ok && ran == len(ids), why)...)
	return verdict(problems, fmt.Sprintf("%d stages in order, each fed the previous stage's recorded reply", len(ids)))
}

// failedMembers lists, sorted, the members of ids whose last recorded reply is not OK.
func (d *derivation) failedMembers(ids []string) ([]string, string) {
	var failed []string
	why := ""
	for _, id := range ids {
		if _, o := d.lastOutcome(id); !o.OK {
			failed = append(failed, id)
			if why == "" {
				why = o.Why
			}
		}
	}
	sort.Strings(failed)
	return failed, why
}

// failedSummary compares the runtime's failed_members with the re-derived ones.
func (d *derivation) failedSummary(failed []string) []string {
	if d.attempt {
		return nil
	}
	tc, at, _ := claims[event.TeamCompleted](d)
	if len(tc) == 1 && !slices.Equal(nonNil(tc[0].FailedMembers), nonNil(failed)) {
		return []string{fmt.Sprintf("the runtime recorded failed members %v (team_completed, %s), the raw replies give %v", tc[0].FailedMembers, d.at(at[0]), failed)}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// parallelEvidence: every member ran; the team succeeds when all did, and failures are summarised.
func parallelEvidence(d *derivation) (string, string) {
	if d.opts.Ensemble.Mode != "" {
		return ensembleEvidence(d)
	}
	ids := d.ids()
	var problems []string
	for _, id := range ids {
		if len(d.turns[id]) == 0 {
			problems = append(problems, id+" did not run")
		}
	}
	failed, why := d.failedMembers(ids)
	problems = append(problems, d.failedSummary(failed)...)
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return verdict(problems, fmt.Sprintf("%d members ran independently, each reply valid", len(ids)))
}

// supervisorOf is the member with role supervisor, else the first.
func (d *derivation) supervisorOf() runtime.MemberSpec {
	if s := d.withRole(formation.RoleSupervisor); len(s) == 1 {
		return s[0]
	}
	return d.members[0]
}

// hierarchicalEvidence: the supervisor synthesizes after every worker ended, shown every outcome.
func hierarchicalEvidence(d *derivation) (string, string) {
	sup := d.supervisorOf()
	workers := specIDs(d.without(sup.ID))
	problems := d.onceEach(d.ids())
	st, so := d.lastOutcome(sup.ID)
	var lines []string
	for _, id := range workers {
		wt, wo := d.lastOutcome(id)
		lines = append(lines, outcomeLine(id, wo))
		if st != nil && wt != nil && (wt.End.zero() || st.Start.before(wt.End)) {
			problems = append(problems, fmt.Sprintf("supervisor %s started (%s) before %s ended", sup.ID, d.at(st.Start), id))
		}
	}
	if st != nil {
		if err := shownTo(st, lines); err != nil {
			problems = append(problems, err.Error())
		}
		if so.OK && so.Line.Contract != runtime.ContractSynthesis {
			problems = append(problems, fmt.Sprintf("supervisor %s was asked %s, not a synthesis", sup.ID, so.Line.Contract))
		}
	}
	if md, ok := d.metadata(); ok && md["supervisor"] != sup.ID {
		got := md["supervisor"]
		problems = append(problems, fmt.Sprintf("the runtime recorded supervisor %q, the configuration gives %s", got, sup.ID))
	}
	failed, why := d.failedMembers(d.ids())
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return verdict(problems, fmt.Sprintf("supervisor %s synthesized after %s, shown their recorded replies", sup.ID, strings.Join(workers, ", ")))
}

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
		rounds = formation.DefaultConsensusRounds
	}
	threshold := d.opts.Consensus.Threshold
	if threshold == 0 {
		threshold = formation.DefaultConsensusThreshold
	}
	claimed, at, err := claims[event.ConsensusRound](d)
	if err != nil {
		return failedf("consensus_round: %v", err)
	}
	var problems []string
	active := proposers
	agreed := false
	var agreeing []string
	proposal := map[string]string{}
	round := 0
	for round = 1; round <= rounds && len(active) > 0; round++ {
		groups := map[string][]string{}
		var next []string
		for _, id := range active {
			ts := d.turns[id]
			if len(ts) < round {
				problems = append(problems, fmt.Sprintf("proposer %s has no recorded turn for round %d", id, round))
				continue
			}
			o := d.outcome(ts[round-1])
			if !o.OK {
				continue
			}
			key, prop, _ := readProposal(o.Reply)
			proposal[id] = prop
			next = append(next, id)
			g := "reply:" + o.Reply
			if key != "" {
				g = "key:" + key
			}
			groups[g] = append(groups[g], id)
		}
		active = next
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
	problems = append(problems, d.teamClaim(ok, why)...)
	how := fmt.Sprintf("agreement of %s in round %d (threshold %v of %d proposers)", strings.Join(agreeing, ", "), roundsRun, threshold, len(proposers))
	if !agreed {
		how = "tie broken by " + labelOr(c.TieBreaker, "nobody") + " (consensus_achieved=false)"
	}
	return verdict(problems, fmt.Sprintf("%s, decision %q, re-derived from the raw proposals", how, truncateText(want, 60)))
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
		limit = formation.DefaultReflectionIterations
	}
	claimed, at, err := claims[event.CriticVerdict](d)
	if err != nil {
		return failedf("critic_verdict: %v", err)
	}
	var problems, seq []string
	gens, crits := d.turns[gen.ID], d.turns[critic.ID]
	ok, why := false, ""
	it := 0
	for it = 1; it <= limit; it++ {
		if len(gens) < it {
			why = fmt.Sprintf("no generator turn for iteration %d", it)
			break
		}
		if g := d.outcome(gens[it-1]); !g.OK {
			why = g.Why
			break
		}
		if len(crits) < it {
			why = fmt.Sprintf("no critic turn for iteration %d", it)
			break
		}
		ct := crits[it-1]
		if ct.Start.before(gens[it-1].End) || gens[it-1].End.zero() {
			problems = append(problems, fmt.Sprintf("critic iteration %d started before the generator's ended", it))
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
	if md, mok := d.metadata(); mok && ok && md["iterations"] != fmt.Sprint(len(seq)) {
		got := md["iterations"]
		problems = append(problems, fmt.Sprintf("the runtime recorded %s iterations, the raw replies give %d", got, len(seq)))
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, "critic verdicts re-read from the raw replies: "+strings.Join(seq, ", "))
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
		_, o := d.lastOutcome(router.ID)
		if !o.OK {
			return verdict(d.teamClaim(false, o.Why), "")
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
	return verdict(problems, fmt.Sprintf("exactly one member selected and run: %s (by %s, re-derived)", want, method))
}

func mustRouterChoice(reply string, candidates []string) string {
	id, _ := readRouterChoice(reply, candidates)
	return id
}

// selectByTask is dynamic_router's programmatic selection (FORMATIONS.md): an explicit route whose
// keyword is a whole word of the task (keywords in sorted order), else the first member whose
// domain role's keywords match (roles in formation.RoleKeywords order), else the first member.
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
	for _, rk := range formation.RoleKeywords() {
		for _, w := range rk.Words {
			if !hasWord(task, w) {
				continue
			}
			for _, m := range candidates {
				if m.DomainRole == rk.Role {
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

// treeOf is the configured hierarchy tree, or the one built from member order (breadth-first,
// fanout children per node).
func (d *derivation) treeOf() formation.TreeNode {
	if d.opts.Hierarchy.Tree != nil {
		return *d.opts.Hierarchy.Tree
	}
	fanout := d.opts.Hierarchy.Fanout
	if fanout <= 0 {
		fanout = formation.DefaultFanout
	}
	var build func(i int) formation.TreeNode
	build = func(i int) formation.TreeNode {
		n := formation.TreeNode{MemberID: d.members[i].ID}
		for c := i*fanout + 1; c <= i*fanout+fanout && c < len(d.members); c++ {
			n.Children = append(n.Children, build(c))
		}
		return n
	}
	return build(0)
}

// multiLevelEvidence: every member exactly once; each supervisor after its children, shown their
// outcomes; a failed descendant fails the team even when its supervisors synthesized.
func multiLevelEvidence(d *derivation) (string, string) {
	tree := d.treeOf()
	problems := d.onceEach(d.ids())
	depth := 0
	var walk func(n formation.TreeNode, level int)
	walk = func(n formation.TreeNode, level int) {
		depth = max(depth, level)
		if len(n.Children) == 0 {
			return
		}
		st := d.lastTurnOf(n.MemberID)
		var lines []string
		for _, c := range n.Children {
			walk(c, level+1)
			ct, co := d.lastOutcome(c.MemberID)
			lines = append(lines, outcomeLine(c.MemberID, co))
			if st != nil && ct != nil && (ct.End.zero() || st.Start.before(ct.End)) {
				problems = append(problems, fmt.Sprintf("%s synthesized (started %s) before its member %s ended", n.MemberID, d.at(st.Start), c.MemberID))
			}
		}
		if st != nil {
			if err := shownTo(st, lines); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	walk(tree, 1)
	if md, ok := d.metadata(); ok && (md["root"] != tree.MemberID || md["depth"] != fmt.Sprint(depth)) {
		problems = append(problems, fmt.Sprintf("the runtime recorded root %q depth %q, the configured tree gives %s depth %d", md["root"], md["depth"], tree.MemberID, depth))
	}
	failed, why := d.failedMembers(d.ids())
	problems = append(problems, d.failedSummary(failed)...)
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return verdict(problems, fmt.Sprintf("tree of depth %d ran bottom-up, each supervisor shown its members' recorded replies", depth))
}

// speakingTurns returns the conversation's speaking turns in start order, with their raw replies
// read as speaking turns; a turn that is not valid ends the list (the conversation failed there).
type spoken struct {
	mt *memberTurn
	o  outcome
	t  speakingReply
}

func (d *derivation) speakingTurns(speakers []string) ([]spoken, string) {
	var all []*memberTurn
	for _, id := range speakers {
		all = append(all, d.turns[id]...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Start.before(all[j].Start) })
	var out []spoken
	for _, mt := range all {
		o := d.outcome(mt)
		if !o.OK {
			return out, o.Why
		}
		if o.Line.Contract != runtime.ContractSpeakingTurn {
			return out, fmt.Sprintf("%s invocation %d was asked %s, not a speaking turn", mt.Member, mt.Invocation, o.Line.Contract)
		}
		t, _ := readSpeaking(o.Reply, mt.Member, o.Line.Candidates, o.Line.MayHandOff)
		out = append(out, spoken{mt, o, t})
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
	return formation.DefaultMaxTurns
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
	turns, stop := d.speakingTurns(speakers)
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
			ro := d.outcome(rts[i])
			if !ro.OK {
				stop = ro.Why
				break
			}
			want = mustRouterChoice(ro.Reply, ro.Line.Candidates)
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
	if md, mok := d.metadata(); mok && ok && (md["turns"] != fmt.Sprint(len(turns)) || md["ended_by"] != ended) {
		problems = append(problems, fmt.Sprintf("the runtime recorded %s turns ended by %q, the raw replies give %d ended by %s", md["turns"], md["ended_by"], len(turns), ended))
	}
	problems = append(problems, d.teamClaim(ok, labelOr(stop, "the chat neither ended with done nor reached max_turns"))...)
	return verdict(problems, fmt.Sprintf("%d turns re-read from the raw replies, ended by %s", len(turns), ended))
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
		rounds = formation.DefaultDebateRounds
	}
	turns, stop := d.speakingTurns(debaters)
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
	if ok {
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
		}
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, fmt.Sprintf("%d contributions; judge %s selected %s, re-read from its raw reply", len(turns), judge.ID, sel))
}

// handoffEvidence: the first member speaks first, each unfinished turn's raw handoff_to names the
// next speaker, and the conversation ends at done (within max_turns).
func handoffEvidence(d *derivation) (string, string) {
	ids := d.ids()
	turns, stop := d.speakingTurns(ids)
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
	why := labelOr(stop, fmt.Sprintf("no turn said done within max_turns %d", d.maxTurns()))
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, "handoffs re-read from the raw replies: "+strings.Join(path, " -> ")+", done")
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
	claimed, at, err := claims[event.EnsembleDecision](d)
	if err != nil || len(claimed) != 1 {
		return failedf("%d ensemble_decision events, want 1%s", len(claimed), because(errText(err)))
	}
	c, where := claimed[0], d.at(at[0])
	if c.Mode != mode {
		problems = append(problems, fmt.Sprintf("the runtime recorded mode %q (%s), the case configures %q", c.Mode, where, mode))
	}
	if !maps.Equal(c.Votes, votes) {
		problems = append(problems, fmt.Sprintf("the runtime recorded votes %v (%s), the candidates' raw proposals give %v", c.Votes, where, votes))
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
		jt, jo := d.lastOutcome(aggregator)
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
			for _, id := range candidates {
				if ct := d.lastTurnOf(id); ct != nil && jt != nil && (ct.End.zero() || jt.Start.before(ct.End)) {
					problems = append(problems, fmt.Sprintf("judge %s started before candidate %s ended", aggregator, id))
				}
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
	failed, fwhy := d.failedMembers(d.ids())
	if ok && len(failed) > 0 {
		ok, why = false, fwhy
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, fmt.Sprintf("ensemble %s re-derived from the raw proposals: %s (votes %s)", mode, truncateText(decided, 60), formatVotes(votes)))
}

// formatGroups renders consensus groups as "{key: a, b}, {reply:...: c}" in key order, the "key:"
// prefix dropped (no Go map syntax in details).
func formatGroups(groups map[string][]string) string {
	if len(groups) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		parts = append(parts, fmt.Sprintf("{%s: %s}", truncateText(strings.TrimPrefix(k, "key:"), 60), strings.Join(groups[k], ", ")))
	}
	return strings.Join(parts, ", ")
}

// formatHops renders handoffs as "a -> b after turn 1, ...".
func formatHops(hops []event.MemberHandoff) string {
	if len(hops) == 0 {
		return "none"
	}
	var parts []string
	for _, h := range hops {
		parts = append(parts, fmt.Sprintf("%s -> %s after turn %d", h.Source, h.Target, h.Sequence))
	}
	return strings.Join(parts, ", ")
}

// formatVotes renders vote counts as "key=n, key=n" in key order (no Go map syntax in details).
func formatVotes(votes map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(votes)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, votes[k]))
	}
	return strings.Join(parts, ", ")
}

// failedf is a failed rule result.
func failedf(format string, args ...any) (string, string) {
	return statusFailed, fmt.Sprintf(format, args...)
}

// attemptRules are the rules adaptive re-derives its attempts with, by formation.
func attemptRule(name string) evidenceRule {
	switch name {
	case "sequential":
		return sequentialEvidence
	case "pipeline":
		return pipelineEvidence
	case "parallel":
		return parallelEvidence
	case "hierarchical":
		return hierarchicalEvidence
	case "consensus":
		return consensusEvidence
	case "reflection":
		return reflectionEvidence
	case "dynamic_router":
		return routerEvidence
	case "multi_level_hierarchy":
		return multiLevelEvidence
	case "group_chat":
		return groupChatEvidence
	case "debate":
		return debateEvidence
	case "handoff":
		return handoffEvidence
	}
	return nil
}

// adaptiveEvidence splits the trace into attempts at the recorded switches, re-derives each
// attempt's outcome with its formation's rule and its score from the raw replies (feedback: the
// mean quality_score of the attempt's completion replies; error_rate: 1 - failed/ran), and checks
// every switch follows an attempt that failed or scored below min_score, the switches stay within
// max_switches, and the last attempt's outcome is the team's.
func adaptiveEvidence(d *derivation) (string, string) {
	a := d.opts.Adaptive
	cycle := a.Cycle
	if len(cycle) == 0 {
		cycle = formation.DefaultAdaptiveCycle()
	}
	strategy := labelOr(a.Strategy, formation.StrategyErrorRate)
	minScore := a.MinScore
	if minScore == 0 {
		minScore = 0.5
		if strategy == formation.StrategyErrorRate {
			minScore = 1
		}
	}
	maxSwitches := a.MaxSwitches
	if maxSwitches == 0 {
		maxSwitches = formation.DefaultMaxSwitches
	}
	switches, at, err := claims[event.FormationSwitched](d)
	if err != nil {
		return failedf("formation_switched: %v", err)
	}
	var problems, history []string
	if len(switches) > maxSwitches {
		problems = append(problems, fmt.Sprintf("%d switches recorded, over max_switches %d", len(switches), maxSwitches))
	}
	ok, why := false, ""
	for i := 0; i <= len(switches); i++ {
		name := cycle[i%len(cycle)]
		history = append(history, name)
		sub := *d
		sub.attempt, sub.ok, sub.why = true, false, ""
		if i > 0 {
			sub.from = at[i-1]
		}
		sub.to = pos{}
		if i < len(switches) {
			sub.to = at[i]
		}
		sub.turns = map[string][]*memberTurn{}
		for id, ts := range d.turns {
			for _, mt := range ts {
				if !mt.Start.before(sub.from) && (sub.to.zero() || mt.Start.before(sub.to)) {
					sub.turns[id] = append(sub.turns[id], mt)
				}
			}
		}
		rule := attemptRule(name)
		if rule == nil {
			return failedf("attempt %d: formation %q has no rule to re-derive it", i+1, name)
		}
		if st, detail := rule(&sub); st == statusFailed {
			problems = append(problems, fmt.Sprintf("attempt %d (%s): %s", i+1, name, detail))
		}
		score, reason := sub.attemptScore(strategy)
		good := sub.ok && reason == "" && score >= minScore
		if i < len(switches) {
			sw := switches[i]
			if good {
				problems = append(problems, fmt.Sprintf("the runtime switched from %s after attempt %d (formation_switched, %s), but the raw replies give a "+
					"successful attempt scoring %.4f (min_score %v)", name, i+1, d.at(at[i]), score, minScore))
			}
			if reason != "" {
				problems = append(problems, fmt.Sprintf("attempt %d: %s; the run must fail, not switch", i+1, reason))
			}
			if sw.From != name || sw.To != cycle[(i+1)%len(cycle)] || sw.Switch != i+1 {
				problems = append(problems, fmt.Sprintf("the runtime recorded switch %d %s -> %s (%s), the cycle gives %s -> %s", sw.Switch, sw.From, sw.To,
					d.at(at[i]), name, cycle[(i+1)%len(cycle)]))
			}
			continue
		}
		switch {
		case good:
			ok = true
		case reason != "":
			why = reason
		case len(switches) >= maxSwitches:
			why = fmt.Sprintf("attempt %d (%s) %s and max_switches %d is reached", i+1, name, failedOrScored(sub.ok, sub.why, score, minScore), maxSwitches)
		default:
			why = fmt.Sprintf("attempt %d (%s) %s, yet the runtime did not switch", i+1, name, failedOrScored(sub.ok, sub.why, score, minScore))
			problems = append(problems, why)
		}
	}
	if md, mok := d.metadata(); mok && (md["current_formation"] != history[len(history)-1] || md["switch_count"] != fmt.Sprint(len(switches)) ||
		md["formation_history"] != strings.Join(history, ",")) {
		problems = append(problems, fmt.Sprintf("the runtime recorded formation %q after %q switch(es), history %q; the trace gives %s after %d, history %s",
			md["current_formation"], md["switch_count"], md["formation_history"], history[len(history)-1], len(switches), strings.Join(history, ",")))
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return verdict(problems, fmt.Sprintf("attempts %s re-derived from the raw replies (%s strategy, %d switch(es) of at most %d)",
		strings.Join(history, " -> "), strategy, len(switches), maxSwitches))
}

func failedOrScored(ok bool, why string, score, min float64) string {
	if !ok {
		return "failed" + because(why)
	}
	return fmt.Sprintf("scored %.4f below min_score %v", score, min)
}

// attemptScore re-derives an attempt's score from its turns' raw replies; reason is non-empty when
// the strategy's evidence is missing (a completion reply without quality_score: the run fails).
// The performance strategy measures wall time, which the recorded bytes do not carry: its score is
// taken as 1 (only the attempt's outcome is re-derived).
func (d *derivation) attemptScore(strategy string) (float64, string) {
	ids := slices.Sorted(maps.Keys(d.turns))
	switch strategy {
	case formation.StrategyFeedback:
		sum, n := 0.0, 0
		for _, id := range ids {
			ts := d.turns[id]
			o := d.outcome(ts[len(ts)-1])
			if o.Line.Contract != runtime.ContractCompletion {
				continue
			}
			if !o.OK {
				if _, err := readCompletion(o.Reply, true); o.Reply == "" || err == nil {
					continue // no reply (a failed request), or a reported failure: a failed member is not scored
				}
				return 0, fmt.Sprintf("member %s did not return a valid quality_score: %s", id, o.Why)
			}
			c, _ := readCompletion(o.Reply, true)
			sum += *c.QualityScore
			n++
		}
		if n == 0 {
			return 0, "no member returned a quality_score"
		}
		return sum / float64(n), ""
	case formation.StrategyPerformance:
		return 1, ""
	default:
		if len(ids) == 0 {
			return 0, ""
		}
		failed := 0
		for _, id := range ids {
			ts := d.turns[id]
			if !d.outcome(ts[len(ts)-1]).OK {
				failed++
			}
		}
		return 1 - float64(failed)/float64(len(ids)), ""
	}
}
