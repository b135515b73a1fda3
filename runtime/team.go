// Package runtime runs teams of members against a provider: member specs, team and member results,
// the member's chat-and-tools loop, and the Sink through which every event leaves the runtime.
//
// The contracts are ../shared/FORMATIONS.md (teams, formations, session ids) and ../shared/SAFETY.md
// (the execution boundary, enforced in runtime/tool). Formations live in runtime/formation and are
// dispatched through its one registry. This package does not import the evidence store: the harness
// adapts the store to Sink.
package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider"
)

// MemberSpec configures one member of a team.
type MemberSpec struct {
	// ID is unique within the team, [a-z0-9_-]{1,64}; it is part of the session id.
	ID string `json:"id"`
	// Name is a human-readable name.
	Name string `json:"name"`
	// DomainRole is what the member does in the domain: "executor", "researcher" or "reviewer".
	DomainRole string `json:"domain_role"`
	// FormationRole is the member's role in the formation ("supervisor", "critic", ...), "" for none.
	FormationRole string `json:"formation_role,omitempty"`
	// Goal is the member's instruction, sent as the system prompt.
	Goal string `json:"goal"`
	// Task is the member's task assignment, sent as the first user message.
	Task string `json:"task"`
	// AllowedTools names the tools the member sees; nothing else can be called.
	AllowedTools []string `json:"allowed_tools"`
	// ToolBudget is the maximum number of tool calls (0 = the team default).
	ToolBudget int `json:"tool_budget,omitempty"`
	// Dir is the member's working directory; every tool path resolves inside it.
	Dir string `json:"dir"`
	// SessionID, when set, is an explicit child session id; otherwise "{run_id}-{member_id}".
	SessionID string `json:"session_id,omitempty"`
	// Idempotent declares that running the member's task again has no effect beyond the first
	// successful run (e.g. it rewrites the same files). Only idempotent members may be retried
	// (parallel_member_retries) or re-run by an adaptive formation switch.
	Idempotent bool `json:"idempotent,omitempty"`
}

// Team is a formation with its members, bound to one run.
type Team struct {
	// RunID is the globally unique run id; member session ids derive from it.
	RunID string
	// Formation is the canonical formation name (DESIGN.md vocabulary).
	Formation string
	// Task is the team's task as a whole. Formations that route or split work read it
	// (dynamic_router's default selector, multi_level_hierarchy's split); members are sent their
	// own MemberSpec.Task.
	Task    string
	Members []MemberSpec
}

// Member returns the member with the given id.
func (t Team) Member(id string) (MemberSpec, bool) {
	for _, m := range t.Members {
		if m.ID == id {
			return m, true
		}
	}
	return MemberSpec{}, false
}

var memberIDPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Validate checks member ids (pattern, uniqueness) and that session ids are distinct. It returns an
// error naming the first problem.
func (t Team) Validate() error {
	if t.RunID == "" {
		return fmt.Errorf("team: run id is empty")
	}
	if len(t.Members) == 0 {
		return fmt.Errorf("team %s: no members", t.RunID)
	}
	ids := map[string]bool{}
	sessions := map[string]string{}
	for _, m := range t.Members {
		if !memberIDPattern.MatchString(m.ID) {
			return fmt.Errorf("team %s: member id %q must match %s", t.RunID, m.ID, memberIDPattern)
		}
		if ids[m.ID] {
			return fmt.Errorf("team %s: duplicate member id %q", t.RunID, m.ID)
		}
		ids[m.ID] = true
		s := t.SessionID(m)
		if other, dup := sessions[s]; dup {
			return fmt.Errorf("team %s: members %q and %q share session id %q", t.RunID, other, m.ID, s)
		}
		sessions[s] = m.ID
		if m.Dir == "" {
			return fmt.Errorf("team %s: member %q has no working directory", t.RunID, m.ID)
		}
	}
	return nil
}

// SessionID returns the member's session id: its explicit one, else "{run_id}-{member_id}".
func (t Team) SessionID(m MemberSpec) string {
	if m.SessionID != "" {
		return m.SessionID
	}
	return t.RunID + "-" + m.ID
}

// MemberResult is what one member did.
type MemberResult struct {
	MemberID  string `json:"member_id"`
	SessionID string `json:"session_id"`
	Success   bool   `json:"success"`
	// Output is the member's final reply text.
	Output string `json:"output"`
	// Error says why the member failed, "" on success.
	Error string `json:"error,omitempty"`
	// ContractViolation names the contract (runtime.Contract* name) whose reply broke it when the
	// member failed on a malformed structured reply; "" otherwise.
	ContractViolation string `json:"contract_violation,omitempty"`
	// Usage is what this member's provider responses reported, accumulated by the runtime's client
	// (the "store" usage source). Responses without usage make it unknown, never zero.
	Usage provider.UsageTotal `json:"usage"`
	// HTTPAttempts counts the HTTP requests sent to the provider for this member, retries of the
	// model request included: what an observer on the wire should have seen.
	HTTPAttempts int `json:"http_attempts"`
	// ToolCalls counts calls that went through the boundary (refused ones included).
	ToolCalls int `json:"tool_calls"`
	// ToolsUsed names the tools the member called, each once, in first-call order.
	ToolsUsed []string `json:"tools_used,omitempty"`
	// Turns is how many times the member was invoked (attempts, iterations, speaking turns); every
	// invocation's usage, tool calls and duration are accumulated here.
	Turns int `json:"turns"`
	// Duration is the member's wall time, summed over its invocations.
	Duration time.Duration `json:"duration_ns"`
	// Metadata holds formation-specific facts (attempts, round, selected member, ...).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Paused is set when the member stopped at a call awaiting approval or reconciliation, or was
	// not started because its durable run had paused: it did not fail on its own, and a resume
	// continues it. A paused member is never retried.
	Paused bool `json:"paused,omitempty"`
}

// TeamResult is what a team run returned.
type TeamResult struct {
	Formation string `json:"formation"`
	Success   bool   `json:"success"`
	// FinalOutput is the formation's output; failed members are named in it deterministically.
	FinalOutput string `json:"final_output"`
	// Members holds one result per configured member that ran, in configuration order.
	Members []MemberResult `json:"members"`
	// Metadata holds the formation's own decisions and facts (selected member, consensus, verdict,
	// formation history, ...), keyed by snake_case names documented by each formation.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Accumulate folds a later invocation of the same member into r: usage, tool calls, turns and
// durations add up; the outcome, output and error become the later invocation's. It panics if the
// member ids differ, which is a programming error in a formation.
func (r *MemberResult) Accumulate(next MemberResult) {
	if r.MemberID == "" {
		*r = next
		return
	}
	if r.MemberID != next.MemberID {
		panic(fmt.Sprintf("runtime: accumulate member %q into %q", next.MemberID, r.MemberID))
	}
	r.Usage.Merge(next.Usage)
	r.ToolCalls += next.ToolCalls
	r.HTTPAttempts += next.HTTPAttempts
	for _, t := range next.ToolsUsed {
		if !slices.Contains(r.ToolsUsed, t) {
			r.ToolsUsed = append(r.ToolsUsed, t)
		}
	}
	r.Turns += next.Turns
	r.Duration += next.Duration
	r.Success, r.Output, r.Error, r.ContractViolation, r.Paused = next.Success, next.Output, next.Error, next.ContractViolation, next.Paused
	for k, v := range next.Metadata {
		if r.Metadata == nil {
			r.Metadata = map[string]string{}
		}
		r.Metadata[k] = v
	}
}

// Event is one runtime event. Its Type and Payload are those of one runtime/event payload type
// (event.Types lists them); events of one member are emitted in causal order.
type Event struct {
	Type      string
	MemberID  string
	SessionID string
	Time      time.Time
	// Payload is the JSON object of the event's payload type (event.Marshal).
	Payload json.RawMessage
}

// Sink receives the runtime's events in causal order and stores the artifacts they reference. An
// error from Emit or PutArtifact fails the member that produced it: evidence that cannot be recorded
// is not silently dropped. Implementations must be safe for concurrent use.
type Sink interface {
	Emit(ctx context.Context, ev Event) error
	// PutArtifact stores data content-addressed under a name and returns its SHA-256 hex.
	PutArtifact(ctx context.Context, name, mediaType string, data []byte) (string, error)
}

// NewEvent builds the event of payload p (its type is p.EventType()), stamped now (UTC).
func NewEvent(memberID, sessionID string, p event.Payload) (Event, error) {
	raw, err := event.Marshal(p)
	if err != nil {
		return Event{}, err
	}
	return Event{Type: p.EventType(), MemberID: memberID, SessionID: sessionID, Time: time.Now().UTC(), Payload: raw}, nil
}
