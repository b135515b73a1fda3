// Package policy decides whether a proposed tool call may run: the fail-closed policy engine and its
// policy file, exact-payload approvals, budgets reserved before dispatch, and the one redaction
// projection used wherever arguments are recorded (../shared/SAFETY.md rules 4, 5, 11, 12 and 13).
//
// The package knows nothing about tools or the evidence store: runtime/tool calls it at the one
// boundary every call passes, with plain values.
package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Effect is what a policy decides for one call.
type Effect string

// The decisions of a policy. Anything else is malformed and denies.
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
	// Ask sends the call to an approver; it runs only with an exact approval (rule 5).
	Ask Effect = "ask"
)

// Valid reports whether e is allow, deny or ask.
func (e Effect) Valid() bool { return e == Allow || e == Deny || e == Ask }

// Request is what a policy sees of one proposed call. Every field but Paths and Mode is required:
// a request missing one is denied before any policy runs (rule 4, "missing required context denies").
type Request struct {
	RunID     string `json:"run_id"`
	MemberID  string `json:"member_id"`
	SessionID string `json:"session_id"`
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	// Access is the tool's declared access mode: readonly, write, execute, network or mixed.
	Access string `json:"access"`
	// Paths are the member-relative, slash-separated, clean paths the call touches (empty for a
	// tool that touches none).
	Paths []string `json:"paths,omitempty"`
	// PayloadSHA256 is the SHA-256 hex (64 chars) of the RFC 8785 canonical arguments.
	PayloadSHA256 string `json:"payload_sha256"`
	// Arguments is the canonical arguments object. Policies read it; it never grants anything.
	Arguments json.RawMessage `json:"arguments"`
	// Mode is the run mode: live, dry_run or observe ("" is live).
	Mode string `json:"mode,omitempty"`
}

// missing names the first required field that is empty, "" when none is.
func (r Request) missing() string {
	for _, f := range []struct{ name, v string }{{"run_id", r.RunID}, {"member_id", r.MemberID},
		{"session_id", r.SessionID}, {"call_id", r.CallID}, {"tool", r.Tool}, {"access", r.Access},
		{"payload_sha256", r.PayloadSHA256}} {
		if f.v == "" {
			return f.name
		}
	}
	if len(r.Arguments) == 0 {
		return "arguments"
	}
	return ""
}

// Decision is a policy's answer.
type Decision struct {
	Effect Effect `json:"effect"`
	// Policy names the policy that decided, Rule the rule inside it ("" when the policy has none).
	Policy string `json:"policy"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason"`
	// Disclose says whether the call's result may be shown to the member. Approval to act is not
	// approval to disclose (rule 5): an ask decision discloses only what the approval grants.
	Disclose bool `json:"disclose"`
	// Scope is what an approval for this decision is bound to: the policy digest and the deciding
	// rules by their policy's position, "policy:<digest>;<i>/<rule>,...". A change of policy content
	// changes the scope and so invalidates the approval; a renamed or moved policy file does not.
	Scope string `json:"scope"`
}

// Policy is one decision procedure. Decide must return allow, deny or ask; it may block, fail or
// panic, and the Engine turns each of those into a deny. Implementations must be safe for
// concurrent use.
type Policy interface {
	Name() string
	Decide(ctx context.Context, req Request) (Decision, error)
}

// Func adapts a function to Policy.
type Func struct {
	// PolicyName is returned by Name.
	PolicyName string
	F          func(ctx context.Context, req Request) (Decision, error)
}

// Name returns f.PolicyName.
func (f Func) Name() string { return f.PolicyName }

// Decide calls f.F.
func (f Func) Decide(ctx context.Context, req Request) (Decision, error) { return f.F(ctx, req) }

// DefaultTimeout bounds one policy's decision when the Engine is given none.
const DefaultTimeout = 5 * time.Second

// Engine evaluates an ordered list of policies, failing closed. It is safe for concurrent use.
type Engine struct {
	policies []Policy
	timeout  time.Duration
	digest   string
}

// NewEngine returns an engine over policies, in order. digest is the SHA-256 hex of the policy
// configuration (a policy file's bytes), recorded in the run's envelope and in every decision's
// scope; "" when the policies are built in code. timeout bounds each policy's decision (0:
// DefaultTimeout). An engine with no policies denies every call.
func NewEngine(digest string, timeout time.Duration, policies ...Policy) *Engine {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Engine{policies: policies, timeout: timeout, digest: digest}
}

// Digest returns the policy digest the engine was built with.
func (e *Engine) Digest() string { return e.digest }

// ErrDenied is matched (errors.Is) by a *DeniedError.
var ErrDenied = errors.New("denied by policy")

// DeniedError is the refusal a denied call carries.
type DeniedError struct{ Decision Decision }

func (e *DeniedError) Error() string {
	return fmt.Sprintf("denied by policy %s%s: %s", e.Decision.Policy, ruleSuffix(e.Decision.Rule), e.Decision.Reason)
}

// Is makes errors.Is(err, ErrDenied) work.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

func ruleSuffix(rule string) string {
	if rule == "" {
		return ""
	}
	return " rule " + rule
}

// Decide evaluates every policy in order and combines their decisions: the first deny ends the
// evaluation and denies; otherwise any ask makes the result ask; otherwise the result is allow.
// Disclosure is allowed only when every deciding policy allows it. A policy that returns an error,
// panics, does not answer within the timeout or returns anything but allow/deny/ask denies, and so
// does a request missing required context, and an engine with no policies (rule 4). Decide never
// returns an error: the Decision says why it denied.
func (e *Engine) Decide(ctx context.Context, req Request) Decision {
	scope := "policy:" + e.digest
	deny := func(policy, rule, reason string) Decision {
		return Decision{Effect: Deny, Policy: policy, Rule: rule, Reason: reason, Scope: scope}
	}
	if f := req.missing(); f != "" {
		return deny("engine", "", "required context "+f+" is missing")
	}
	if len(e.policies) == 0 {
		return deny("engine", "", "no policy is configured")
	}
	combined := Decision{Effect: Allow, Disclose: true, Scope: scope}
	var rules []string
	for i, p := range e.policies {
		d, err := e.decideOne(ctx, p, req)
		if err != nil {
			return deny(p.Name(), "", err.Error())
		}
		d.Policy = p.Name()
		switch d.Effect {
		case Deny:
			d.Scope = scope
			return d
		case Ask:
			if combined.Effect != Ask {
				combined.Policy, combined.Rule, combined.Reason = d.Policy, d.Rule, d.Reason
			}
			combined.Effect = Ask
		case Allow:
			if combined.Policy == "" {
				combined.Policy, combined.Rule, combined.Reason = d.Policy, d.Rule, d.Reason
			}
		}
		combined.Disclose = combined.Disclose && d.Disclose
		// By position, not name: the digest already identifies the content, and a policy file
		// renamed or moved keeps the approvals granted under it.
		rules = append(rules, fmt.Sprintf("%d/%s", i, d.Rule))
	}
	combined.Scope = scope + ";" + strings.Join(rules, ",")
	return combined
}

// decideOne runs one policy with the timeout, turning a panic, a timeout and a malformed answer into
// an error.
func (e *Engine) decideOne(ctx context.Context, p Policy, req Request) (Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	type answer struct {
		d   Decision
		err error
	}
	// Buffered: a policy that answers after the timeout does not block forever. It keeps running
	// until it returns; a policy must honour ctx to free its goroutine.
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- answer{err: fmt.Errorf("policy panicked: %v", r)}
			}
		}()
		d, err := p.Decide(ctx, cloneRequest(req))
		ch <- answer{d, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return Decision{}, fmt.Errorf("policy failed: %w", a.err)
		}
		if !a.d.Effect.Valid() {
			return Decision{}, fmt.Errorf("policy returned a malformed decision %q", a.d.Effect)
		}
		return a.d, nil
	case <-ctx.Done():
		return Decision{}, fmt.Errorf("policy did not decide within %s: %w", e.timeout, ctx.Err())
	}
}

// cloneRequest gives each policy its own copy, so one policy cannot change what the next one sees.
func cloneRequest(r Request) Request {
	r.Paths = append([]string(nil), r.Paths...)
	r.Arguments = append(json.RawMessage(nil), r.Arguments...)
	return r
}
