package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/assay-audit/assay/internal/jsonkeys"
)

// ContractPrefix starts the one line of a prompt that states, machine-readably, which structured
// reply the member must give: ContractPrefix followed by the compact JSON of a ContractLine. Every
// structured prompt carries it next to a human-readable example (FORMATIONS.md: every structured
// prompt includes an example of the contract it expects), so any provider — a language model or
// the embedded reference provider — can read what is asked without parsing prose.
const ContractPrefix = "assay-contract: "

// Contract names. Each is the structured reply that ends one member invocation.
const (
	// ContractCompletion: {"status":"done","files":[...]} or {"status":"failed","error":"..."};
	// with QualityScore also "quality_score" in [0,1].
	ContractCompletion = "completion"
	// ContractCriticVerdict: {"verdict":"satisfied"|"needs_work","feedback":"..."} (reflection).
	ContractCriticVerdict = "critic_verdict"
	// ContractJudgeVerdict: {"selected_member_id":"...","verdict":"..."} (debate).
	ContractJudgeVerdict = "judge_verdict"
	// ContractEnsembleJudge: {"selected_member_id":"..."} (ensemble judge mode).
	ContractEnsembleJudge = "ensemble_judge"
	// ContractSynthesis: {"answer":"..."} (ensemble synthesizer, hierarchy supervisors).
	ContractSynthesis = "synthesis"
	// ContractRouter: {"speaker_id":"..."} (router members of dynamic_router and group_chat).
	ContractRouter = "router"
	// ContractSpeakingTurn: {"content":"...","done":false,"handoff_to":null} (conversations).
	ContractSpeakingTurn = "speaking_turn"
	// ContractConsensusProposal: {"consensus_key":"...","proposal":"..."} (consensus rounds).
	ContractConsensusProposal = "consensus_proposal"
	// ContractEnsembleProposal: {"vote_key":"...","answer":"..."} (ensemble candidates).
	ContractEnsembleProposal = "ensemble_proposal"
)

// ContractLine is the machine-readable statement of what a structured prompt asks. It is JSON on
// one line after ContractPrefix; fields that do not apply are omitted.
type ContractLine struct {
	// Contract is one of the Contract* names.
	Contract string `json:"contract"`
	// Formation is the formation asking.
	Formation string `json:"formation"`
	// MemberID is the member asked.
	MemberID string `json:"member_id"`
	// Candidates are the member ids an answer may name (judge, router, synthesis, conversation
	// members in speaking order), in configuration order.
	Candidates []string `json:"candidates,omitempty"`
	// VoteKeys, for an ensemble judge, are the candidates' vote keys, parallel to Candidates.
	VoteKeys []string `json:"vote_keys,omitempty"`
	// Files are the files a critic is asked to inspect (the generator's reported files).
	Files []string `json:"files,omitempty"`
	// Round is the 1-based iteration (reflection), round (consensus) or conversation turn.
	Round int `json:"round,omitempty"`
	// PriorTurns is how many times this member has spoken before in this conversation.
	PriorTurns int `json:"prior_turns,omitempty"`
	// MayHandOff is true when the reply may name a handoff destination (handoff formation only).
	MayHandOff bool `json:"may_hand_off,omitempty"`
	// QualityScore asks a completion reply to carry "quality_score" in [0,1].
	QualityScore bool `json:"quality_score,omitempty"`
}

// Format returns the contract line: ContractPrefix and l's compact JSON, no HTML escaping.
func (l ContractLine) Format() string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(l) // a struct of strings, ints and bools always encodes
	return ContractPrefix + strings.TrimSuffix(buf.String(), "\n")
}

// Contract is the structured reply that ends one member invocation: the instructions (with an
// example) sent to the member, the machine-readable line, and the strict check of the reply.
type Contract struct {
	// Line states the contract machine-readably; Line.Contract names it.
	Line ContractLine
	// Instructions say exactly what to answer, including an example of the JSON.
	Instructions string
	// Check validates the reply text. An error wrapping ErrMalformedReply is a contract violation
	// (recorded with a warning event); any other error is a failure the member reported. Nil Check
	// accepts any reply that DecodeExact accepts as a JSON object.
	Check func(reply string) error
}

// Prompt is the contract's part of the user message: the instructions and the contract line.
func (c Contract) Prompt() string {
	return c.Instructions + "\n" + c.Line.Format()
}

// CompletionReply is the structured reply that ends an executor member's work. It is exactly
// {"status":"done","files":["..."]} or {"status":"failed","error":"..."}; under a contract asking
// for it, "quality_score" (a number in [0,1]) is required too.
type CompletionReply struct {
	Status       string   `json:"status"`
	Files        []string `json:"files,omitempty"`
	Error        string   `json:"error,omitempty"`
	QualityScore *float64 `json:"quality_score,omitempty"`
}

// CompletionContract is the example included in every executor prompt (FORMATIONS.md: every
// structured prompt includes an example of the contract it expects).
const CompletionContract = `When every file is written, reply with exactly one JSON object and nothing else: ` +
	`{"status":"done","files":["<path>", "..."]} — or, if you cannot complete the task, ` +
	`{"status":"failed","error":"<why>"}. No prose, no markdown fences.`

// completionScoreContract is CompletionContract with the quality score the adaptive formation's
// feedback strategy requires.
const completionScoreContract = `When every file is written, reply with exactly one JSON object and nothing else: ` +
	`{"status":"done","files":["<path>", "..."],"quality_score":0.8} where quality_score is your own ` +
	`assessment of the result, a number from 0 to 1 — or, if you cannot complete the task, ` +
	`{"status":"failed","error":"<why>","quality_score":0}. No prose, no markdown fences.`

// Completion returns the executor completion contract for member m of formation; withScore asks
// for "quality_score" as well.
func Completion(formation, memberID string, withScore bool) Contract {
	c := Contract{Line: ContractLine{Contract: ContractCompletion, Formation: formation, MemberID: memberID, QualityScore: withScore},
		Instructions: CompletionContract}
	if withScore {
		c.Instructions = completionScoreContract
	}
	c.Check = func(reply string) error {
		r, err := ParseCompletion(reply)
		if err != nil {
			return err
		}
		if withScore {
			if r.QualityScore == nil {
				return fmt.Errorf("%w: quality_score is required", ErrMalformedReply)
			}
			if q := *r.QualityScore; !(q >= 0 && q <= 1) {
				return fmt.Errorf("%w: quality_score %v is outside [0,1]", ErrMalformedReply, q)
			}
		} else if r.QualityScore != nil {
			return fmt.Errorf("%w: quality_score was not asked for", ErrMalformedReply)
		}
		if r.Status != "done" {
			return fmt.Errorf("member reported failure: %s", r.Error)
		}
		return nil
	}
	return c
}

// ParseCompletion parses a completion reply strictly (quality_score is accepted when present; the
// contract decides whether it was asked for).
func ParseCompletion(text string) (CompletionReply, error) {
	var r CompletionReply
	if err := DecodeExact([]byte(text), &r); err != nil {
		return r, err
	}
	switch r.Status {
	case "done":
		if r.Error != "" {
			return r, fmt.Errorf("%w: status done with an error field", ErrMalformedReply)
		}
	case "failed":
		if r.Error == "" || len(r.Files) > 0 {
			return r, fmt.Errorf("%w: status failed needs exactly an error field", ErrMalformedReply)
		}
	default:
		return r, fmt.Errorf("%w: status %q is neither done nor failed", ErrMalformedReply, r.Status)
	}
	return r, nil
}

// DecodeExact decodes data as exactly one JSON object into v: unknown keys, trailing text, anything
// before the object, and (when v is a pointer to a struct) missing keys are ErrMalformedReply.
// Required keys are every field of v's struct type whose json tag lacks omitempty.
func DecodeExact(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object: %q", ErrMalformedReply, truncate(string(trimmed), 80))
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedReply, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: text after the JSON object", ErrMalformedReply)
	}
	if missing := missingKeys(trimmed, v); len(missing) > 0 {
		return fmt.Errorf("%w: missing key(s) %s", ErrMalformedReply, strings.Join(missing, ", "))
	}
	if key, dup := jsonkeys.Duplicate(trimmed); dup {
		// encoding/json keeps the last of duplicate keys; another reader may keep the first. A reply
		// whose meaning depends on the reader is not exactly the contract (RFC 8259 §4: names SHOULD
		// be unique; RFC 7493 I-JSON: MUST).
		return fmt.Errorf("%w: key %q appears more than once", ErrMalformedReply, key)
	}
	return nil
}

// missingKeys lists the required keys of v's struct type (json-tagged fields without omitempty)
// absent from the object in data, in field order. A key present with the value null counts as
// present: the contract decides whether null is allowed.
func missingKeys(data []byte, v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(data, &present); err != nil {
		return nil // already decoded once; cannot fail here
	}
	var missing []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",omitempty,") {
			continue
		}
		if _, ok := present[name]; !ok {
			missing = append(missing, name)
		}
	}
	return missing
}
