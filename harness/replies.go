package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// The harness's own strict reading of the structured replies of FORMATIONS.md. It shares no code
// with the runtime's contract checks (runtime.DecodeExact, runtime/formation's contracts): a rule
// that re-derives a decision reads the member's raw reply with these, so a runtime that misreads a
// reply, or accepts one it should not, is contradicted rather than echoed.

// replyObject reads reply as exactly one JSON object whose keys are exactly required plus any of
// optional: nothing before or after it, no duplicate key, no other key.
func replyObject(reply string, required []string, optional ...string) (map[string]json.RawMessage, error) {
	t := bytes.TrimSpace([]byte(reply))
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("not a JSON object: %q", truncateText(string(t), 80))
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	obj := map[string]json.RawMessage{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed JSON: %v", err)
		}
		k := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("malformed JSON at key %q: %v", k, err)
		}
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("key %q appears more than once", k)
		}
		obj[k] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("malformed JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("text after the JSON object")
	}
	var missing, extra []string
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range obj {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("missing key(s) %s", strings.Join(missing, ", "))
	case len(extra) > 0:
		return nil, fmt.Errorf("unexpected key(s) %s", strings.Join(extra, ", "))
	}
	return obj, nil
}

// stringField reads a JSON string value; nonBlank refuses "" and whitespace.
func stringField(obj map[string]json.RawMessage, key string, nonBlank bool) (string, error) {
	var s string
	if err := json.Unmarshal(obj[key], &s); err != nil || bytes.Equal(bytes.TrimSpace(obj[key]), []byte("null")) {
		return "", fmt.Errorf("%s is not a string", key)
	}
	if nonBlank && strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("%s is empty", key)
	}
	return s, nil
}

func oneOf(field, id string, candidates []string) error {
	if !slices.Contains(candidates, id) {
		return fmt.Errorf("%s %q is not one of %s", field, id, strings.Join(candidates, ", "))
	}
	return nil
}

func withinLimit(answer string, limit int) error {
	if n := utf8.RuneCountInString(answer); n > limit {
		return fmt.Errorf("answer is %d characters, over the %d-character limit", n, limit)
	}
	return nil
}

// completionReply is {"status":"done","files":[...]} or {"status":"failed","error":"..."}, with
// "quality_score" in [0,1] exactly when the contract asked for it.
type completionReply struct {
	Done         bool
	Files        []string
	Error        string
	QualityScore *float64
}

func readCompletion(reply string, scoreAsked bool) (completionReply, error) {
	obj, err := replyObject(reply, []string{"status"}, "files", "error", "quality_score")
	if err != nil {
		return completionReply{}, err
	}
	status, err := stringField(obj, "status", false)
	if err != nil {
		return completionReply{}, err
	}
	var c completionReply
	if raw, ok := obj["files"]; ok {
		if err := json.Unmarshal(raw, &c.Files); err != nil {
			return c, fmt.Errorf("files is not a list of strings")
		}
	}
	if _, ok := obj["error"]; ok {
		if c.Error, err = stringField(obj, "error", false); err != nil {
			return c, err
		}
	}
	switch status {
	case "done":
		c.Done = true
		if c.Error != "" {
			return c, fmt.Errorf("status done with an error")
		}
	case "failed":
		if strings.TrimSpace(c.Error) == "" || len(c.Files) > 0 {
			return c, fmt.Errorf("status failed needs exactly a non-empty error")
		}
	default:
		return c, fmt.Errorf("status %q is neither done nor failed", status)
	}
	raw, scored := obj["quality_score"]
	switch {
	case scored && !scoreAsked:
		return c, fmt.Errorf("quality_score was not asked for")
	case !scored && scoreAsked:
		return c, fmt.Errorf("quality_score is required")
	case scored:
		var q float64
		if err := json.Unmarshal(raw, &q); err != nil || !(q >= 0 && q <= 1) {
			return c, fmt.Errorf("quality_score %s is not a number in [0,1]", string(raw))
		}
		c.QualityScore = &q
	}
	return c, nil
}

type criticReply struct{ Verdict, Feedback string }

func readCritic(reply string) (criticReply, error) {
	obj, err := replyObject(reply, []string{"verdict", "feedback"})
	if err != nil {
		return criticReply{}, err
	}
	var c criticReply
	if c.Verdict, err = stringField(obj, "verdict", false); err != nil {
		return c, err
	}
	if c.Verdict != "satisfied" && c.Verdict != "needs_work" {
		return c, fmt.Errorf("verdict %q is neither satisfied nor needs_work", c.Verdict)
	}
	if c.Feedback, err = stringField(obj, "feedback", true); err != nil {
		return c, err
	}
	return c, nil
}

// readSelection reads {"selected_member_id":"..."} (withVerdict: and a non-empty "verdict") naming
// one of candidates.
func readSelection(reply string, candidates []string, withVerdict bool) (id, verdict string, err error) {
	keys := []string{"selected_member_id"}
	if withVerdict {
		keys = append(keys, "verdict")
	}
	obj, err := replyObject(reply, keys)
	if err != nil {
		return "", "", err
	}
	if id, err = stringField(obj, "selected_member_id", true); err != nil {
		return "", "", err
	}
	if err := oneOf("selected_member_id", id, candidates); err != nil {
		return id, "", err
	}
	if withVerdict {
		if verdict, err = stringField(obj, "verdict", true); err != nil {
			return id, "", err
		}
	}
	return id, verdict, nil
}

// readAnswer reads a synthesis {"answer":"..."} of at most limit characters.
func readAnswer(reply string, limit int) (string, error) {
	obj, err := replyObject(reply, []string{"answer"})
	if err != nil {
		return "", err
	}
	a, err := stringField(obj, "answer", true)
	if err != nil {
		return "", err
	}
	return a, withinLimit(a, limit)
}

// readRouterChoice reads {"speaker_id":"..."} naming one of candidates.
func readRouterChoice(reply string, candidates []string) (string, error) {
	obj, err := replyObject(reply, []string{"speaker_id"})
	if err != nil {
		return "", err
	}
	id, err := stringField(obj, "speaker_id", true)
	if err != nil {
		return "", err
	}
	return id, oneOf("speaker_id", id, candidates)
}

type speakingReply struct {
	Content   string
	Done      bool
	HandoffTo *string
}

// readSpeaking reads one conversation turn of member self among members; only a handoff
// conversation (mayHandOff) may name a destination, and then an unfinished turn must.
func readSpeaking(reply, self string, members []string, mayHandOff bool) (speakingReply, error) {
	obj, err := replyObject(reply, []string{"content", "done", "handoff_to"})
	if err != nil {
		return speakingReply{}, err
	}
	var t speakingReply
	if t.Content, err = stringField(obj, "content", true); err != nil {
		return t, err
	}
	if err := json.Unmarshal(obj["done"], &t.Done); err != nil || bytes.Equal(bytes.TrimSpace(obj["done"]), []byte("null")) {
		return t, fmt.Errorf("done is not a boolean")
	}
	if !bytes.Equal(bytes.TrimSpace(obj["handoff_to"]), []byte("null")) {
		to, err := stringField(obj, "handoff_to", false)
		if err != nil {
			return t, fmt.Errorf("handoff_to is neither null nor a member id")
		}
		t.HandoffTo = &to
	}
	switch {
	case !mayHandOff && t.HandoffTo != nil:
		return t, fmt.Errorf("handoff_to %q: only the handoff formation may name a destination", *t.HandoffTo)
	case !mayHandOff:
	case t.Done && t.HandoffTo != nil:
		return t, fmt.Errorf("done together with handoff_to %q", *t.HandoffTo)
	case !t.Done && t.HandoffTo == nil:
		return t, fmt.Errorf("an unfinished handoff turn names no handoff_to")
	case t.HandoffTo != nil && *t.HandoffTo == self:
		return t, fmt.Errorf("self-handoff to %q", self)
	case t.HandoffTo != nil:
		if err := oneOf("handoff_to", *t.HandoffTo, members); err != nil {
			return t, err
		}
	}
	return t, nil
}

// readProposal reads a consensus proposal; key is "" when the member gave none.
func readProposal(reply string) (key, proposal string, err error) {
	obj, err := replyObject(reply, []string{"consensus_key", "proposal"})
	if err != nil {
		return "", "", err
	}
	if key, err = stringField(obj, "consensus_key", false); err != nil {
		return "", "", err
	}
	proposal, err = stringField(obj, "proposal", true)
	return key, proposal, err
}

// readVote reads an ensemble proposal {"vote_key":"...","answer":"..."}.
func readVote(reply string, limit int) (key, answer string, err error) {
	obj, err := replyObject(reply, []string{"vote_key", "answer"})
	if err != nil {
		return "", "", err
	}
	if key, err = stringField(obj, "vote_key", true); err != nil {
		return "", "", err
	}
	if answer, err = stringField(obj, "answer", true); err != nil {
		return "", "", err
	}
	return key, answer, withinLimit(answer, limit)
}
