package reference

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ContractPrefix starts the line of a prompt that states which structured
// reply is asked for: ContractPrefix followed by a JSON object (the runtime's
// runtime.ContractLine). The server keeps its own reading of it, as it keeps
// its own reading of the wire format.
const ContractPrefix = "assay-contract: "

// ReadFileTool is the tool a critic's reply calls to inspect files.
const ReadFileTool = "read_file"

// QualityScore is the quality_score of completion replies that ask for one.
const QualityScore = 0.9

// contractLine is the server's reading of a contract line. Unknown fields are
// ignored: the line states what is asked, and the server answers what it
// understands of it.
type contractLine struct {
	Contract     string   `json:"contract"`
	Formation    string   `json:"formation"`
	MemberID     string   `json:"member_id"`
	Candidates   []string `json:"candidates"`
	VoteKeys     []string `json:"vote_keys"`
	Files        []string `json:"files"`
	Round        int      `json:"round"`
	PriorTurns   int      `json:"prior_turns"`
	MayHandOff   bool     `json:"may_hand_off"`
	QualityScore bool     `json:"quality_score"`
}

// Contract names the server answers (runtime.Contract* values).
const (
	contractCompletion     = "completion"
	contractCriticVerdict  = "critic_verdict"
	contractJudgeVerdict   = "judge_verdict"
	contractEnsembleJudge  = "ensemble_judge"
	contractSynthesis      = "synthesis"
	contractRouter         = "router"
	contractSpeakingTurn   = "speaking_turn"
	contractConsensus      = "consensus_proposal"
	contractEnsembleVote   = "ensemble_proposal"
	formationDebate        = "debate"
	unknownContractMessage = " does not know the contract "
)

// parseContractLine finds the last contract line in text.
func parseContractLine(text string) (contractLine, bool) {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), ContractPrefix)
		if !ok {
			continue
		}
		var c contractLine
		if err := json.Unmarshal([]byte(rest), &c); err != nil || c.Contract == "" {
			return contractLine{}, false
		}
		return c, true
	}
	return contractLine{}, false
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type readFileArgs struct {
	Path string `json:"path"`
}

type statusReply struct {
	Status       string   `json:"status"`
	Files        []string `json:"files"`
	QualityScore *float64 `json:"quality_score,omitempty"`
}

type failedReply struct {
	Status       string   `json:"status"`
	Error        string   `json:"error"`
	QualityScore *float64 `json:"quality_score,omitempty"`
}

type verdictReply struct {
	Verdict  string `json:"verdict"`
	Feedback string `json:"feedback"`
}

type judgeReply struct {
	SelectedMemberID string `json:"selected_member_id"`
	Verdict          string `json:"verdict"`
}

type selectReply struct {
	SelectedMemberID string `json:"selected_member_id"`
}

type answerReply struct {
	Answer string `json:"answer"`
}

type routerReply struct {
	SpeakerID string `json:"speaker_id"`
}

type turnReply struct {
	Content   string  `json:"content"`
	Done      bool    `json:"done"`
	HandoffTo *string `json:"handoff_to"`
}

type proposalReply struct {
	ConsensusKey string `json:"consensus_key"`
	Proposal     string `json:"proposal"`
}

type voteReply struct {
	VoteKey string `json:"vote_key"`
	Answer  string `json:"answer"`
}

// invocation is what the server reads from a request: the assignment and
// contract of the member's current invocation and the tool results since.
type invocation struct {
	assignment    Assignment
	hasAssignment bool
	contract      contractLine
	results       []requestMessage
	// called names the tools the assistant called since the invocation's
	// user message, in order.
	called []string
}

// readInvocation finds the last user message carrying an assignment or a
// contract line; the tool messages after it are this invocation's results.
func readInvocation(req *chatRequest) (invocation, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		a, hasA := ParseAssignment(m.text)
		c, hasC := parseContractLine(m.text)
		if !hasA && !hasC {
			continue
		}
		if !hasC {
			c = contractLine{Contract: contractCompletion}
		}
		inv := invocation{assignment: a, hasAssignment: hasA, contract: c}
		for _, r := range req.Messages[i+1:] {
			switch r.Role {
			case "tool":
				inv.results = append(inv.results, r)
			case "assistant":
				for _, tc := range r.ToolCalls {
					inv.called = append(inv.called, tc.Function.Name)
				}
			}
		}
		return inv, true
	}
	return invocation{}, false
}

// writes reports whether this invocation writes the assignment's files:
// executors, first speaking turns, first-round proposals and ensemble
// candidates do; critics, judges, routers and synthesizers never do.
func (inv invocation) writes() bool {
	if !inv.hasAssignment {
		return false
	}
	switch inv.contract.Contract {
	case contractCompletion, contractEnsembleVote:
		return true
	case contractSpeakingTurn:
		return inv.contract.PriorTurns == 0
	case contractConsensus:
		return inv.contract.Round <= 1
	}
	return false
}

// firstError returns the first tool result whose content starts with
// "error" (ignoring case and leading whitespace).
func (inv invocation) firstError() (string, bool) {
	for _, m := range inv.results {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(m.text)), "error") {
			return m.text, true
		}
	}
	return "", false
}

// answer decides the reply; see the package documentation.
func answer(req *chatRequest, session string, turn int, solutions []Solution) reply {
	inv, ok := readInvocation(req)
	if !ok {
		return reply{content: NoAssignmentReply, finish: "stop"}
	}
	if len(inv.results) == 0 {
		if inv.writes() {
			return writeCalls(req, inv.assignment, session, turn, solutions)
		}
		if inv.contract.Contract == contractCriticVerdict && len(inv.contract.Files) > 0 && req.offersTool(ReadFileTool) {
			rep := reply{finish: "tool_calls"}
			for _, f := range inv.contract.Files {
				rep.toolCalls = append(rep.toolCalls, replyToolCall{
					id:        "call_" + shortHash(12, session, strconv.Itoa(turn), f),
					name:      ReadFileTool,
					arguments: string(compactJSON(readFileArgs{Path: f})),
				})
			}
			return rep
		}
	}
	if inv.publishes(req) {
		return publishCall(inv, session, turn)
	}
	return structured(inv)
}

// publishes reports whether the reply is a remote_put call: an executor
// (contract completion with an assignment) whose request offers remote_put,
// whose tool results so far (its writes) all succeeded, and which has not
// called remote_put in this invocation.
func (inv invocation) publishes(req *chatRequest) bool {
	if inv.contract.Contract != contractCompletion || !inv.hasAssignment || len(inv.results) == 0 || !req.offersTool(RemotePutTool) {
		return false
	}
	if _, failed := inv.firstError(); failed {
		return false
	}
	return !slices.Contains(inv.called, RemotePutTool)
}

// publishCall is one remote_put call publishing what the invocation wrote:
// name "<task>/<member_id>" (the contract's member id; the task alone when
// it names none), value the canonical key task/language/files. The call id
// is "call_" + the first 12 hex digits of SHA-256(session, turn,
// "remote_put").
func publishCall(inv invocation, session string, turn int) reply {
	name := inv.assignment.Task
	if inv.contract.MemberID != "" {
		name += "/" + inv.contract.MemberID
	}
	return reply{finish: "tool_calls", toolCalls: []replyToolCall{{
		id:        "call_" + shortHash(12, session, strconv.Itoa(turn), RemotePutTool),
		name:      RemotePutTool,
		arguments: string(compactJSON(remotePutArgs{Name: name, Value: canonicalKey(inv)})),
	}}}
}

// writeCalls is one write_file call per file of a, or content saying why
// there are none.
func writeCalls(req *chatRequest, a Assignment, session string, turn int, solutions []Solution) reply {
	if !req.offersTool(WriteFileTool) {
		return reply{content: ModelID + " needs a " + WriteFileTool + " tool to carry out this assignment, and the request offers none", finish: "stop"}
	}
	files, err := planFiles(a, solutions)
	if err != nil {
		return reply{content: ModelID + " cannot carry out this assignment: " + err.Error(), finish: "stop"}
	}
	rep := reply{finish: "tool_calls"}
	for _, f := range files {
		rep.toolCalls = append(rep.toolCalls, replyToolCall{
			id:        "call_" + shortHash(12, session, strconv.Itoa(turn), f.path),
			name:      WriteFileTool,
			arguments: string(compactJSON(writeFileArgs{Path: f.path, Content: f.content})),
		})
	}
	return rep
}

// structured is the content reply for the invocation's contract.
func structured(inv invocation) reply {
	c, a := inv.contract, inv.assignment
	wrote := inv.writes() && len(inv.results) > 0
	failure, failed := inv.firstError()
	text := func(b []byte) reply { return reply{content: string(b), finish: "stop"} }
	switch c.Contract {
	case contractCompletion:
		var score *float64
		if c.QualityScore {
			q := QualityScore
			if failed {
				q = 0
			}
			score = &q
		}
		if failed {
			return text(compactJSON(failedReply{Status: "failed", Error: failure, QualityScore: score}))
		}
		st := statusReply{Status: "done", Files: []string{}, QualityScore: score}
		if wrote && a.Files != nil {
			st.Files = a.Files
		}
		return text(compactJSON(st))
	case contractCriticVerdict:
		if failed {
			return text(compactJSON(verdictReply{Verdict: "needs_work", Feedback: "could not read a file to review: " + failure}))
		}
		at := max(a.SatisfiedAt, 1)
		if c.Round < at {
			return text(compactJSON(verdictReply{Verdict: "needs_work", Feedback: fmt.Sprintf(
				"iteration %d: revise once more and state the files again; the reference critic is satisfied from iteration %d", c.Round, at)}))
		}
		return text(compactJSON(verdictReply{Verdict: "satisfied", Feedback: fmt.Sprintf(
			"iteration %d: read %d file(s) (%s); nothing further to change", c.Round, len(inv.results), strings.Join(c.Files, ", "))}))
	case contractJudgeVerdict:
		if len(c.Candidates) == 0 {
			return reply{content: ModelID + " has no candidate to judge", finish: "stop"}
		}
		return text(compactJSON(judgeReply{SelectedMemberID: c.Candidates[0],
			Verdict: fmt.Sprintf("%s's contributions come first in the debate and are complete", c.Candidates[0])}))
	case contractEnsembleJudge:
		if len(c.Candidates) == 0 {
			return reply{content: ModelID + " has no candidate to judge", finish: "stop"}
		}
		return text(compactJSON(selectReply{SelectedMemberID: majorityCandidate(c.Candidates, c.VoteKeys)}))
	case contractSynthesis:
		return text(compactJSON(answerReply{Answer: "synthesis of " + strings.Join(c.Candidates, ", ")}))
	case contractRouter:
		if len(c.Candidates) == 0 {
			return reply{content: ModelID + " has no candidate to route to", finish: "stop"}
		}
		return text(compactJSON(routerReply{SpeakerID: c.Candidates[(max(c.Round, 1)-1)%len(c.Candidates)]}))
	case contractSpeakingTurn:
		content := fmt.Sprintf("%s, turn %d: no further changes", c.MemberID, c.Round)
		switch {
		case failed:
			content = fmt.Sprintf("%s, turn %d: could not write the files: %s", c.MemberID, c.Round, failure)
		case wrote:
			content = fmt.Sprintf("%s, turn %d: wrote %s", c.MemberID, c.Round, strings.Join(a.Files, ", "))
		}
		t := turnReply{Content: content}
		idx := slices.Index(c.Candidates, c.MemberID)
		switch {
		case c.MayHandOff && idx >= 0 && idx < len(c.Candidates)-1:
			next := c.Candidates[idx+1]
			t.HandoffTo = &next
		case c.MayHandOff:
			t.Done = true
		case c.Formation != formationDebate:
			t.Done = c.Round >= len(c.Candidates)
		}
		return text(compactJSON(t))
	case contractConsensus:
		return text(compactJSON(proposalReply{ConsensusKey: canonicalKey(inv),
			Proposal: fmt.Sprintf("%s proposes %s", c.MemberID, canonicalKey(inv))}))
	case contractEnsembleVote:
		ans := "no files written"
		if wrote {
			ans = "files " + strings.Join(a.Files, ", ") + " in " + c.MemberID + "'s working directory"
		}
		if failed {
			ans = "could not write the files: " + failure
		}
		return text(compactJSON(voteReply{VoteKey: canonicalKey(inv), Answer: ans}))
	}
	return reply{content: ModelID + unknownContractMessage + strconv.Quote(c.Contract), finish: "stop"}
}

// canonicalKey is the answer every member of one assignment agrees on:
// task, language and files ("double/go/double.go,double_test.go"), or
// "no-assignment".
func canonicalKey(inv invocation) string {
	if !inv.hasAssignment {
		return "no-assignment"
	}
	lang := inv.assignment.Language
	if lang == "" {
		lang = LanguageGo
	}
	return inv.assignment.Task + "/" + lang + "/" + strings.Join(inv.assignment.Files, ",")
}

// majorityCandidate is the first candidate whose vote key is the most common
// one (ties go to the key seen first); without keys, the first candidate.
func majorityCandidate(candidates, keys []string) string {
	if len(keys) != len(candidates) {
		return candidates[0]
	}
	count := map[string]int{}
	for _, k := range keys {
		count[k]++
	}
	best := 0
	for i, k := range keys {
		if count[k] > count[keys[best]] {
			best = i
		}
	}
	return candidates[best]
}
