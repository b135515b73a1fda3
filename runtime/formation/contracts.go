package formation

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/assay-audit/assay/runtime"
)

// The structured replies of FORMATIONS.md. Each is decoded with runtime.DecodeExact (exactly these
// keys, nothing around the JSON) and then checked against its contract's own rules.

// CriticVerdict is a reflection critic's reply: {"verdict":"satisfied"|"needs_work","feedback":"..."}.
type CriticVerdict struct {
	Verdict  string `json:"verdict"`
	Feedback string `json:"feedback"`
}

// JudgeVerdict is a debate judge's reply: {"selected_member_id":"...","verdict":"..."}.
type JudgeVerdict struct {
	SelectedMemberID string `json:"selected_member_id"`
	Verdict          string `json:"verdict"`
}

// EnsembleJudgement is an ensemble judge's reply: {"selected_member_id":"<candidate id>"}.
type EnsembleJudgement struct {
	SelectedMemberID string `json:"selected_member_id"`
}

// Synthesis is a synthesizer's or supervisor's reply: {"answer":"..."}.
type Synthesis struct {
	Answer string `json:"answer"`
}

// RouterChoice is a router member's reply: {"speaker_id":"<configured member id>"}.
type RouterChoice struct {
	SpeakerID string `json:"speaker_id"`
}

// SpeakingTurn is one conversation turn: {"content":"...","done":false,"handoff_to":null}. All
// three keys are required; handoff_to is null or a member id.
type SpeakingTurn struct {
	Content   string  `json:"content"`
	Done      bool    `json:"done"`
	HandoffTo *string `json:"handoff_to"`
}

// ConsensusProposal is a consensus member's proposal: {"consensus_key":"...","proposal":"..."}.
// An empty consensus_key means "no key": agreement is then judged on the complete reply.
type ConsensusProposal struct {
	ConsensusKey string `json:"consensus_key"`
	Proposal     string `json:"proposal"`
}

// EnsembleProposal is an ensemble candidate's answer: {"vote_key":"<canonical answer>","answer":"..."}.
type EnsembleProposal struct {
	VoteKey string `json:"vote_key"`
	Answer  string `json:"answer"`
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{runtime.ErrMalformedReply}, args...)...)
}

// decode decodes a reply that its contract's check already accepted.
func decode[T any](reply string) T {
	var v T
	_ = runtime.DecodeExact([]byte(reply), &v)
	return v
}

func line(contract, formation string, m runtime.MemberSpec) runtime.ContractLine {
	return runtime.ContractLine{Contract: contract, Formation: formation, MemberID: m.ID}
}

// criticContract asks for a verdict on the generator's iteration; files are the generator's
// reported files.
func criticContract(formation string, m runtime.MemberSpec, iteration int, files []string) runtime.Contract {
	l := line(runtime.ContractCriticVerdict, formation, m)
	l.Round, l.Files = iteration, files
	return runtime.Contract{Line: l,
		Instructions: `Evaluate the solution. Reply with exactly one JSON object and nothing else, either ` +
			`{"verdict":"satisfied","feedback":"<what you checked>"} or ` +
			`{"verdict":"needs_work","feedback":"<the concrete change to make>"}. Feedback must not be empty. No prose, no markdown fences.`,
		Check: func(reply string) error {
			var v CriticVerdict
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if v.Verdict != "satisfied" && v.Verdict != "needs_work" {
				return malformed("verdict %q is neither satisfied nor needs_work", v.Verdict)
			}
			if strings.TrimSpace(v.Feedback) == "" {
				return malformed("feedback is empty; it must say what was checked or what to change")
			}
			return nil
		}}
}

// selectionCheck checks an id is one of candidates.
func selectionCheck(field, id string, candidates []string) error {
	if id == "" {
		return malformed("%s is empty", field)
	}
	if !slices.Contains(candidates, id) {
		return malformed("%s %q is not one of %s", field, id, strings.Join(candidates, ", "))
	}
	return nil
}

// judgeContract asks a debate judge for one verdict over the debaters.
func judgeContract(formation string, m runtime.MemberSpec, candidates []string) runtime.Contract {
	l := line(runtime.ContractJudgeVerdict, formation, m)
	l.Candidates = candidates
	example := candidates[0]
	return runtime.Contract{Line: l,
		Instructions: fmt.Sprintf(`Judge the debate. Reply with exactly one JSON object and nothing else: `+
			`{"selected_member_id":"%s","verdict":"<why>"} where selected_member_id is one of: %s. No prose, no markdown fences.`,
			example, strings.Join(candidates, ", ")),
		Check: func(reply string) error {
			var v JudgeVerdict
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if err := selectionCheck("selected_member_id", v.SelectedMemberID, candidates); err != nil {
				return err
			}
			if strings.TrimSpace(v.Verdict) == "" {
				return malformed("verdict is empty")
			}
			return nil
		}}
}

// ensembleJudgeContract asks the ensemble judge to select one candidate.
func ensembleJudgeContract(formation string, m runtime.MemberSpec, candidates, voteKeys []string) runtime.Contract {
	l := line(runtime.ContractEnsembleJudge, formation, m)
	l.Candidates, l.VoteKeys = candidates, voteKeys
	return runtime.Contract{Line: l,
		Instructions: fmt.Sprintf(`Select the best candidate answer. Reply with exactly one JSON object and nothing else: `+
			`{"selected_member_id":"%s"} where selected_member_id is one of: %s. No prose, no markdown fences.`,
			candidates[0], strings.Join(candidates, ", ")),
		Check: func(reply string) error {
			var v EnsembleJudgement
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			return selectionCheck("selected_member_id", v.SelectedMemberID, candidates)
		}}
}

// answerLimitCheck rejects answers over the limit with guidance.
func answerLimitCheck(answer string, limit int) error {
	if n := utf8.RuneCountInString(answer); n > limit {
		return malformed("answer is %d characters, over the %d-character limit: return a reference to an artifact (a file path or digest) instead of its content", n, limit)
	}
	return nil
}

// synthesisContract asks a synthesizer or supervisor to compose its candidates' outcomes.
func synthesisContract(formation string, m runtime.MemberSpec, candidates []string, limit int) runtime.Contract {
	l := line(runtime.ContractSynthesis, formation, m)
	l.Candidates = candidates
	return runtime.Contract{Line: l,
		Instructions: `Synthesize the outcomes above into one answer. Reply with exactly one JSON object and nothing else: ` +
			`{"answer":"<the synthesized answer>"}. The answer must not be empty; for large content, name the files instead. No prose, no markdown fences.`,
		Check: func(reply string) error {
			var v Synthesis
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if strings.TrimSpace(v.Answer) == "" {
				return malformed("answer is empty")
			}
			return answerLimitCheck(v.Answer, limit)
		}}
}

// routerContract asks a router member to pick one of candidates.
func routerContract(formation string, m runtime.MemberSpec, candidates []string, round int) runtime.Contract {
	l := line(runtime.ContractRouter, formation, m)
	l.Candidates, l.Round = candidates, round
	return runtime.Contract{Line: l,
		Instructions: fmt.Sprintf(`Choose who acts next. Reply with exactly one JSON object and nothing else: `+
			`{"speaker_id":"%s"} where speaker_id is one of: %s. No prose, no markdown fences.`,
			candidates[0], strings.Join(candidates, ", ")),
		Check: func(reply string) error {
			var v RouterChoice
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			return selectionCheck("speaker_id", v.SpeakerID, candidates)
		}}
}

// speakingContract asks for one conversation turn. members are the conversation's speakers in
// order; mayHandOff is true only in the handoff formation.
func speakingContract(formation string, m runtime.MemberSpec, members []string, turn, priorTurns int, mayHandOff bool) runtime.Contract {
	l := line(runtime.ContractSpeakingTurn, formation, m)
	l.Candidates, l.Round, l.PriorTurns, l.MayHandOff = members, turn, priorTurns, mayHandOff
	instructions := `Take your turn. Reply with exactly one JSON object and nothing else: ` +
		`{"content":"<what you say>","done":false,"handoff_to":null} — set done to true when the conversation is finished. ` +
		`handoff_to must be null. No prose, no markdown fences.`
	if mayHandOff {
		instructions = fmt.Sprintf(`Take your turn, then either hand off or finish. Reply with exactly one JSON object and nothing else: `+
			`{"content":"<what you say>","done":false,"handoff_to":"<member id>"} to hand off to one of: %s (not yourself), or `+
			`{"content":"<what you say>","done":true,"handoff_to":null} to finish. No prose, no markdown fences.`, strings.Join(members, ", "))
	}
	return runtime.Contract{Line: l, Instructions: instructions,
		Check: func(reply string) error {
			var v SpeakingTurn
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if strings.TrimSpace(v.Content) == "" {
				return malformed("content is empty")
			}
			if !mayHandOff {
				if v.HandoffTo != nil {
					return malformed("handoff_to %q: only the handoff formation may name a destination", *v.HandoffTo)
				}
				return nil
			}
			switch {
			case v.Done && v.HandoffTo != nil:
				return malformed("done together with handoff_to %q", *v.HandoffTo)
			case !v.Done && v.HandoffTo == nil:
				return malformed("an unfinished handoff turn must name handoff_to")
			case v.HandoffTo != nil && *v.HandoffTo == m.ID:
				return malformed("self-handoff to %q", m.ID)
			case v.HandoffTo != nil && !slices.Contains(members, *v.HandoffTo):
				return malformed("handoff_to %q is not a member (%s)", *v.HandoffTo, strings.Join(members, ", "))
			}
			return nil
		}}
}

// proposalContract asks a consensus member for its proposal in a round.
func proposalContract(formation string, m runtime.MemberSpec, round int) runtime.Contract {
	l := line(runtime.ContractConsensusProposal, formation, m)
	l.Round = round
	return runtime.Contract{Line: l,
		Instructions: `Make your proposal. Reply with exactly one JSON object and nothing else: ` +
			`{"consensus_key":"<a short canonical form of your answer, equal for equal answers>","proposal":"<your answer>"}. ` +
			`consensus_key may be "" (then agreement is judged on your complete reply). No prose, no markdown fences.`,
		Check: func(reply string) error {
			var v ConsensusProposal
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if strings.TrimSpace(v.Proposal) == "" {
				return malformed("proposal is empty")
			}
			return nil
		}}
}

// ensembleContract asks a candidate for its ensemble answer.
func ensembleContract(formation string, m runtime.MemberSpec, round, limit int) runtime.Contract {
	l := line(runtime.ContractEnsembleProposal, formation, m)
	l.Round = round
	return runtime.Contract{Line: l,
		Instructions: fmt.Sprintf(`Answer as an ensemble candidate. Reply with exactly one JSON object and nothing else: `+
			`{"vote_key":"<canonical answer, equal for equal answers>","answer":"<your answer or a reference to an artifact>"}. `+
			`The answer may be at most %d characters: for anything longer, name the file you wrote instead. No prose, no markdown fences.`, limit),
		Check: func(reply string) error {
			var v EnsembleProposal
			if err := runtime.DecodeExact([]byte(reply), &v); err != nil {
				return err
			}
			if strings.TrimSpace(v.VoteKey) == "" {
				return malformed("vote_key is empty")
			}
			if strings.TrimSpace(v.Answer) == "" {
				return malformed("answer is empty")
			}
			return answerLimitCheck(v.Answer, limit)
		}}
}
