package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Binding is everything an approval is bound to (SAFETY.md rule 5). Two bindings are the same
// action only when every field is equal.
type Binding struct {
	RunID     string `json:"run_id"`
	MemberID  string `json:"member_id"`
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	// PayloadSHA256 is the SHA-256 hex of the RFC 8785 canonical arguments.
	PayloadSHA256 string `json:"payload_sha256"`
	// SchemaSHA256 is the SHA-256 hex of the RFC 8785 canonical JSON Schema of the tool's arguments.
	SchemaSHA256 string `json:"schema_sha256"`
	// Access is the tool's declared access mode.
	Access string `json:"access"`
	// Scope is the deciding policy scope (Decision.Scope): policy digest and rules.
	Scope string `json:"policy_scope"`
	// Revision is the proposal's revision; a revision revokes approvals of the earlier ones.
	Revision int `json:"revision"`
}

// Key returns the call's key, "{run_id}:{member_id}:{call_id}" (the effect's idempotency key).
func (b Binding) Key() string { return b.RunID + ":" + b.MemberID + ":" + b.CallID }

// diff names the first field where b and o differ, "" when they are equal.
func (b Binding) diff(o Binding) string {
	for _, f := range []struct{ name, a, b string }{{"run_id", b.RunID, o.RunID}, {"member_id", b.MemberID, o.MemberID},
		{"call_id", b.CallID, o.CallID}, {"session_id", b.SessionID, o.SessionID}, {"tool", b.Tool, o.Tool},
		{"payload_sha256", b.PayloadSHA256, o.PayloadSHA256}, {"schema_sha256", b.SchemaSHA256, o.SchemaSHA256},
		{"access", b.Access, o.Access}, {"policy_scope", b.Scope, o.Scope}} {
		if f.a != f.b {
			return f.name
		}
	}
	if b.Revision != o.Revision {
		return "revision"
	}
	return ""
}

// PendingApproval is a question waiting for an approver: the exact action, as policy saw it.
type PendingApproval struct {
	Binding
	Reason    string    `json:"reason"`
	Requested time.Time `json:"requested"`
}

// Approval is authority for one exact action, once.
type Approval struct {
	Binding
	// Approver names who granted it; Source how ("operator", "api", "approval_file").
	Approver string `json:"approver"`
	Source   string `json:"source"`
	// ExpiresAt is when the approval stops being valid (UTC). Required.
	ExpiresAt time.Time `json:"expires_at"`
	// Disclose grants showing the result to the member; approval to act is not approval to disclose.
	Disclose bool `json:"disclose"`
	Used     bool `json:"used"`
}

// Grant is an approver's answer to a pending approval. The approver states the exact binding they
// were shown; it must equal the pending one (a payload that changed since is not approved).
type Grant struct {
	Binding
	Approver string
	// Source is "operator" (interactive), "api" or "approval_file". A model's text is never an
	// approval: any other source is refused.
	Source    string
	ExpiresAt time.Time
	Disclose  bool
}

// The approval refusals. Each is returned wrapped with the call key and the reason.
var (
	// ErrNoSuchApproval: an explicit call key with no pending approval (no fallback to another).
	ErrNoSuchApproval = errors.New("no such pending approval")
	// ErrNoApproval: the call needs an approval and none was granted for exactly this call.
	ErrNoApproval = errors.New("no approval for this call")
	// ErrApprovalMismatch: the approval was granted for a different payload, session, schema,
	// access mode, policy scope or revision than the call about to run.
	ErrApprovalMismatch = errors.New("approval does not match the call")
	// ErrApprovalExpired: the approval's expiry has passed.
	ErrApprovalExpired = errors.New("approval expired")
	// ErrApprovalUsed: the approval was already consumed (single use).
	ErrApprovalUsed = errors.New("approval already used")
	// ErrNotAnApprover: the grant does not come from an approver (no approver, or model output).
	ErrNotAnApprover = errors.New("not an approver")
)

var approvalSources = []string{"operator", "api", "approval_file"}

// Approvals holds a run's pending approvals and grants. It is safe for concurrent use.
type Approvals struct {
	now func() time.Time

	mu      sync.Mutex
	pending map[string]*PendingApproval
	granted map[string]*Approval
}

// NewApprovals returns an empty approval store using now as its clock (nil: time.Now).
func NewApprovals(now func() time.Time) *Approvals {
	if now == nil {
		now = time.Now
	}
	return &Approvals{now: now, pending: map[string]*PendingApproval{}, granted: map[string]*Approval{}}
}

// Request records a pending approval for b. An earlier pending approval of the same call is
// replaced, and an earlier grant is revoked unless it binds exactly b (the same question asked
// again, e.g. on resume, keeps its exact answer).
func (a *Approvals) Request(b Binding, reason string) PendingApproval {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := &PendingApproval{Binding: b, Reason: reason, Requested: a.now().UTC()}
	a.pending[b.Key()] = p
	if g, ok := a.granted[b.Key()]; ok && g.Binding.diff(b) != "" {
		delete(a.granted, b.Key())
	}
	return *p
}

// Pending returns the pending approval for the call key.
func (a *Approvals) Pending(key string) (PendingApproval, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[key]
	if !ok {
		return PendingApproval{}, false
	}
	return *p, true
}

// ListPending returns the pending approvals ordered by call key.
func (a *Approvals) ListPending() []PendingApproval {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []PendingApproval
	for _, p := range a.pending {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(x, y PendingApproval) int { return strings.Compare(x.Key(), y.Key()) })
	return out
}

// Grant answers the pending approval of g's call key. It returns ErrNotAnApprover for a grant
// without an approver or from another source than operator/api/approval_file, ErrNoSuchApproval
// when nothing is pending for that exact call, ErrApprovalMismatch when the approver was shown a
// different binding than the one pending, and ErrApprovalExpired for an expiry not in the future.
func (a *Approvals) Grant(g Grant) (Approval, error) {
	key := g.Key()
	if g.Approver == "" || !slices.Contains(approvalSources, g.Source) {
		return Approval{}, fmt.Errorf("grant %s: %w (approver %q, source %q)", key, ErrNotAnApprover, g.Approver, g.Source)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pending[key]
	if !ok {
		return Approval{}, fmt.Errorf("grant %s: %w", key, ErrNoSuchApproval)
	}
	if f := p.Binding.diff(g.Binding); f != "" {
		return Approval{}, fmt.Errorf("grant %s: %w: %s differs from the pending action", key, ErrApprovalMismatch, f)
	}
	if !g.ExpiresAt.After(a.now()) {
		return Approval{}, fmt.Errorf("grant %s: %w at %s", key, ErrApprovalExpired, g.ExpiresAt.UTC().Format(time.RFC3339))
	}
	ap := &Approval{Binding: p.Binding, Approver: g.Approver, Source: g.Source, ExpiresAt: g.ExpiresAt.UTC(), Disclose: g.Disclose}
	a.granted[key] = ap
	delete(a.pending, key)
	return *ap, nil
}

// Revoke drops the pending approval and any unused grant of the call key (a revision, a
// cancellation, a policy change). It reports whether anything was revoked.
func (a *Approvals) Revoke(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, p := a.pending[key]
	g, ok := a.granted[key]
	delete(a.pending, key)
	if ok && !g.Used {
		delete(a.granted, key)
		return true
	}
	return p
}

// Check reports whether a granted approval covers exactly b, without consuming it: ErrNoApproval,
// ErrApprovalUsed, ErrApprovalExpired or ErrApprovalMismatch otherwise.
func (a *Approvals) Check(b Binding) (Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ap, err := a.checkLocked(b)
	if err != nil {
		return Approval{}, err
	}
	return *ap, nil
}

// Consume checks b as Check does and marks the approval used, so it can authorise one dispatch.
func (a *Approvals) Consume(b Binding) (Approval, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ap, err := a.checkLocked(b)
	if err != nil {
		return Approval{}, err
	}
	ap.Used = true
	return *ap, nil
}

func (a *Approvals) checkLocked(b Binding) (*Approval, error) {
	key := b.Key()
	ap, ok := a.granted[key]
	if !ok {
		return nil, fmt.Errorf("call %s: %w", key, ErrNoApproval)
	}
	if ap.Used {
		return nil, fmt.Errorf("call %s: %w", key, ErrApprovalUsed)
	}
	if !a.now().Before(ap.ExpiresAt) {
		return nil, fmt.Errorf("call %s: %w at %s", key, ErrApprovalExpired, ap.ExpiresAt.Format(time.RFC3339))
	}
	if f := ap.Binding.diff(b); f != "" {
		return nil, fmt.Errorf("call %s: %w: %s changed since approval", key, ErrApprovalMismatch, f)
	}
	return ap, nil
}

// ApprovalFile is an approval file: grants written ahead of time (by `assay approve` or by hand) for
// runs that cannot stop to ask, such as unattended matrix runs. YAML or JSON; unknown keys are
// errors.
//
//	version: 1
//	approvals:
//	  - member_id: exec-1
//	    call_id: r0-call_1
//	    tool: shell
//	    payload_sha256: 3b1f…
//	    schema_sha256: 9c0d…
//	    access: execute
//	    policy_scope: "policy:5e2a…;policy.yaml/commands"
//	    approver: alice
//	    expires_at: 2026-12-01T12:00:00Z
type ApprovalFile struct {
	Version   int            `yaml:"version" json:"version"`
	Approvals []FileApproval `yaml:"approvals" json:"approvals"`
}

// FileApproval is one grant of an approval file. Every field of the binding is required except
// RunID and SessionID: an entry without them is for the run the file is given to, in the member's
// own session, and binds everything else exactly. It is single use within that run.
type FileApproval struct {
	RunID         string    `yaml:"run_id,omitempty" json:"run_id,omitempty"`
	SessionID     string    `yaml:"session_id,omitempty" json:"session_id,omitempty"`
	MemberID      string    `yaml:"member_id" json:"member_id"`
	CallID        string    `yaml:"call_id" json:"call_id"`
	Tool          string    `yaml:"tool" json:"tool"`
	PayloadSHA256 string    `yaml:"payload_sha256" json:"payload_sha256"`
	SchemaSHA256  string    `yaml:"schema_sha256" json:"schema_sha256"`
	Access        string    `yaml:"access" json:"access"`
	PolicyScope   string    `yaml:"policy_scope" json:"policy_scope"`
	Revision      int       `yaml:"revision,omitempty" json:"revision,omitempty"`
	Approver      string    `yaml:"approver" json:"approver"`
	ExpiresAt     time.Time `yaml:"expires_at" json:"expires_at"`
	Disclose      bool      `yaml:"disclose,omitempty" json:"disclose,omitempty"`
}

// ErrInvalidApprovalFile is returned (wrapped, naming the entry and field) for an approval file
// that cannot be used.
var ErrInvalidApprovalFile = errors.New("invalid approval file")

// ParseApprovalFile parses and validates an approval file's bytes.
func ParseApprovalFile(data []byte) (*ApprovalFile, error) {
	return parseApprovalFile(data, false)
}

// parseApprovalFile is ParseApprovalFile, parsing data as JSON, strictly, when isJSON.
func parseApprovalFile(data []byte, isJSON bool) (*ApprovalFile, error) {
	var f ApprovalFile
	if err := decodeStrict(data, isJSON, &f, ErrInvalidApprovalFile); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("%w: version must be 1, got %d", ErrInvalidApprovalFile, f.Version)
	}
	for i, a := range f.Approvals {
		for _, fl := range []struct{ name, v string }{{"member_id", a.MemberID}, {"call_id", a.CallID}, {"tool", a.Tool},
			{"payload_sha256", a.PayloadSHA256}, {"schema_sha256", a.SchemaSHA256}, {"access", a.Access},
			{"policy_scope", a.PolicyScope}, {"approver", a.Approver}} {
			if fl.v == "" {
				return nil, fmt.Errorf("%w: approval %d: %s is required", ErrInvalidApprovalFile, i+1, fl.name)
			}
		}
		if a.ExpiresAt.IsZero() {
			return nil, fmt.Errorf("%w: approval %d: expires_at is required", ErrInvalidApprovalFile, i+1)
		}
		if (a.RunID == "") != (a.SessionID == "") {
			return nil, fmt.Errorf("%w: approval %d: run_id and session_id are given together or not at all", ErrInvalidApprovalFile, i+1)
		}
	}
	return &f, nil
}

// LoadApprovalFile reads and parses the approval file at name; a name ending in .json is parsed
// as JSON, strictly. Errors name the file first.
func LoadApprovalFile(name string) (*ApprovalFile, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, readErr(err))
	}
	f, err := parseApprovalFile(data, isJSONName(name))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// Preload adds the file's grants for run runID as granted approvals: entries naming another run are
// skipped, entries naming none are bound to runID and to sessionOf(member_id). Expired entries are
// skipped. It returns how many were added. A later Request for the same call replaces the grant
// only when the call's binding differs; Check and Consume compare every field as usual.
func (a *Approvals) Preload(f *ApprovalFile, runID string, sessionOf func(memberID string) string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, e := range f.Approvals {
		if e.RunID != "" && e.RunID != runID {
			continue
		}
		if !a.now().Before(e.ExpiresAt) {
			continue
		}
		session := e.SessionID
		if session == "" {
			session = sessionOf(e.MemberID)
		}
		b := Binding{RunID: runID, MemberID: e.MemberID, SessionID: session, CallID: e.CallID, Tool: e.Tool,
			PayloadSHA256: e.PayloadSHA256, SchemaSHA256: e.SchemaSHA256, Access: e.Access, Scope: e.PolicyScope, Revision: e.Revision}
		a.granted[b.Key()] = &Approval{Binding: b, Approver: e.Approver, Source: "approval_file", ExpiresAt: e.ExpiresAt.UTC(), Disclose: e.Disclose}
		n++
	}
	return n
}
