package formation

import (
	"context"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

// TranscriptEntry is one speaking turn of a conversation.
type TranscriptEntry struct {
	// Sequence is the 1-based turn number.
	Sequence int    `json:"sequence"`
	MemberID string `json:"member_id"`
	Content  string `json:"content"`
}

// Transcript is a conversation so far. Callbacks receive a copy (a snapshot): changing it does not
// change the conversation.
type Transcript []TranscriptEntry

// chars is the transcript's size in characters (runes of every entry's content).
func (t Transcript) chars() int {
	n := 0
	for _, e := range t {
		n += utf8.RuneCountInString(e.Content)
	}
	return n
}

// lines renders the transcript for a prompt, one "[sequence] member: content" line per turn.
func (t Transcript) lines() []string {
	out := make([]string, len(t))
	for i, e := range t {
		out[i] = fmt.Sprintf("[%d] %s: %s", e.Sequence, e.MemberID, e.Content)
	}
	return out
}

// conversation is the state shared by group_chat, debate and handoff.
type conversation struct {
	ctx        context.Context
	e          *runtime.Engine
	team       runtime.Team
	rs         *results
	transcript Transcript
	prior      map[string]int
	maxTurns   int
	maxChars   int
	speakers   []string
}

func newConversation(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options, speakers []runtime.MemberSpec) *conversation {
	c := &conversation{ctx: ctx, e: e, team: team, rs: newResults(team), prior: map[string]int{},
		maxTurns: opts.Conversation.maxTurns(), maxChars: opts.Conversation.transcriptMaxChars(), speakers: memberIDs(speakers)}
	return c
}

// snapshot is an immutable copy of the transcript for callbacks.
func (c *conversation) snapshot() Transcript { return slices.Clone(c.transcript) }

// speak runs one speaking turn of m. It returns the turn and false when the member failed or the
// transcript budget ran out (recorded with a warning; the caller fails the run).
func (c *conversation) speak(m runtime.MemberSpec, mayHandOff bool, instruction string) (SpeakingTurn, bool) {
	seq := len(c.transcript) + 1
	contract := speakingContract(c.team.Formation, m, c.speakers, seq, c.prior[m.ID], mayHandOff)
	r := c.e.RunTurn(c.ctx, c.team, m, runtime.Turn{Context: c.transcript.lines(), ContextHeading: "The conversation so far:",
		Instruction: instruction, Contract: &contract})
	c.rs.add(r)
	if !r.Success {
		return SpeakingTurn{}, false
	}
	t := decode[SpeakingTurn](r.Output)
	c.prior[m.ID]++
	c.transcript = append(c.transcript, TranscriptEntry{Sequence: seq, MemberID: m.ID, Content: t.Content})
	if n := c.transcript.chars(); n > c.maxChars {
		reason := fmt.Sprintf("transcript_max_chars %d exceeded at sequence %d (%d characters); the transcript is not trimmed", c.maxChars, seq, n)
		_ = c.e.Emit(c.ctx, m.ID, r.SessionID, event.Warning{Warning: reason, Sequence: seq})
		c.rs.markFailed(m.ID, reason)
		return t, false
	}
	if err := c.e.Emit(c.ctx, m.ID, r.SessionID, event.MemberSpoke{Sequence: seq, Content: t.Content,
		Done: t.Done, HandoffTo: t.HandoffTo}); err != nil {
		c.rs.markFailed(m.ID, "record member_spoke: "+err.Error())
		return t, false
	}
	return t, true
}

// callback calls a conversation callback, turning a panic into an error: a callback is the caller's
// code, and its failure fails the run with a warning (callbackFailed), never the process.
func callback[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked: %v", r)
		}
	}()
	return f()
}

// callbackFailed records a callback error as a warning; the run fails.
func (c *conversation) callbackFailed(name string, err error) runtime.TeamResult {
	reason := fmt.Sprintf("%s callback failed: %v", name, err)
	_ = c.e.Emit(c.ctx, "", "", event.Warning{Warning: reason})
	return done(c.rs, false, "", c.meta("callback_error", reason))
}

// meta is the conversation's metadata.
func (c *conversation) meta(endedBy, reason string) map[string]string {
	m := map[string]string{"turns": fmt.Sprint(len(c.transcript)), "ended_by": endedBy,
		"transcript_chars": fmt.Sprint(c.transcript.chars())}
	if reason != "" {
		m["reason"] = reason
	}
	return m
}

// lastContent is the last turn's content, "" for an empty transcript.
func (c *conversation) lastContent() string {
	if len(c.transcript) == 0 {
		return ""
	}
	return c.transcript[len(c.transcript)-1].Content
}

// checkIDs validates a candidate filter's answer: non-empty, unique, known speakers.
func checkIDs(ids, speakers []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("no eligible speaker")
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("speaker %q listed twice", id)
		}
		seen[id] = true
		if !slices.Contains(speakers, id) {
			return fmt.Errorf("unknown speaker %q", id)
		}
	}
	return nil
}
