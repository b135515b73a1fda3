package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	// formation is the formation whose contracts the turns must state (an adaptive attempt's own),
	// and scoreAsked whether completion replies must carry quality_score (adaptive's feedback
	// strategy).
	formation  string
	scoreAsked bool
	// wants are the contracts the formation asks of the turns (want); shared by the attempts of an
	// adaptive run, whose turns are distinct.
	wants map[*memberTurn]runtime.ContractLine
	// admissionDetail and worktreeDetail, set by the admission and worktree rules when they pass,
	// extend a passing rule's detail with what they re-derived.
	admissionDetail, worktreeDetail string
}

func newDerivation(s *caseState, t *caseTrace) *derivation {
	d := &derivation{s: s, t: t, opts: caseOptions(s.entry, s.caseDir), turns: t.turns, formation: s.entry.Formation,
		wants: map[*memberTurn]runtime.ContractLine{}}
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
	return defaultMaxAnswerChars
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
	if w, ok := d.wants[mt]; ok {
		if diff := contractDiff(line, w); diff != "" {
			o.Why = fmt.Sprintf("%s invocation %d was asked a contract with %s", mt.Member, mt.Invocation, diff)
			return o
		}
	}
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

// want records the contract the formation asks of turn mt: outcome then reads the turn against it,
// and a recorded line that differs (a handoff allowed in a group chat, a critic asked about another
// iteration, a score not asked for) makes the turn fail and the rule name the difference. The line a
// request states is the runtime's: a rule never takes it as a licence.
func (d *derivation) want(mt *memberTurn, line runtime.ContractLine) {
	if mt == nil {
		return
	}
	line.Formation, line.MemberID = d.formation, mt.Member
	if line.Contract == runtime.ContractCompletion {
		line.QualityScore = d.scoreAsked
	}
	d.wants[mt] = line
}

// wantAll records line for every turn of member id in the rule's view.
func (d *derivation) wantAll(id string, line runtime.ContractLine) {
	for _, mt := range d.turns[id] {
		d.want(mt, line)
	}
}

// contractDiff compares a recorded contract line with the wanted one, field by field.
func contractDiff(got, want runtime.ContractLine) string {
	var diffs []string
	field := func(name string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			diffs = append(diffs, fmt.Sprintf("%s %v where the formation asks %v", name, g, w))
		}
	}
	field("contract", got.Contract, want.Contract)
	field("formation", got.Formation, want.Formation)
	field("member_id", got.MemberID, want.MemberID)
	field("candidates", nonNil(got.Candidates), nonNil(want.Candidates))
	field("vote_keys", nonNil(got.VoteKeys), nonNil(want.VoteKeys))
	field("files", nonNil(got.Files), nonNil(want.Files))
	field("round", got.Round, want.Round)
	field("prior_turns", got.PriorTurns, want.PriorTurns)
	field("may_hand_off", got.MayHandOff, want.MayHandOff)
	field("quality_score", got.QualityScore, want.QualityScore)
	return strings.Join(diffs, ", ")
}

// contractProblems lists the turns in the rule's view whose recorded contract is not the one the
// formation asks.
func (d *derivation) contractProblems() []string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(d.turns)) {
		for _, mt := range d.turns[id] {
			w, ok := d.wants[mt]
			if !ok {
				continue
			}
			got, err := mt.contractLine()
			if err != nil {
				out = append(out, err.Error())
			} else if diff := contractDiff(got, w); diff != "" {
				out = append(out, fmt.Sprintf("%s invocation %d was asked a contract with %s", mt.Member, mt.Invocation, diff))
			}
		}
	}
	return out
}

// verdict turns problems, and the turns asked another contract than the formation's, into the
// rule's result.
func (d *derivation) verdict(problems []string, passedDetail string) (string, string) {
	return verdict(append(problems, d.contractProblems()...), passedDetail)
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
