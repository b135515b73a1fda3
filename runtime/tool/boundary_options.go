package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
)

// Hook transforms a call's canonical arguments after policy and before dispatch (a middleware that
// fills defaults, normalises paths). Its result is validated, re-decided by policy and checked
// against the approval again; an error refuses the call (enforcers fail closed).
type Hook func(ctx context.Context, c Call, args json.RawMessage) (json.RawMessage, error)

// Option configures a Boundary.
type Option func(*Boundary)

// WithPolicy sets the policy engine (default: policy.AllowAll with an empty digest).
func WithPolicy(e *policy.Engine) Option { return func(b *Boundary) { b.policy = e } }

// WithApprovals sets the approval store (default: a new one on the boundary's clock).
func WithApprovals(a *policy.Approvals) Option { return func(b *Boundary) { b.approvals = a } }

// WithBudget makes every dispatch, retry and reconciliation reserve one tool call from budget
// (default: no budget beyond the caller's own).
func WithBudget(bg *policy.Budget) Option { return func(b *Boundary) { b.budget = bg } }

// WithBackend sets the backend that reconciliation asks for receipts.
func WithBackend(be effect.Backend) Option { return func(b *Boundary) { b.backend = be } }

// WithRedactor sets the redaction projection for recorded arguments, results and errors.
func WithRedactor(r *policy.Redactor) Option { return func(b *Boundary) { b.redactor = r } }

// WithHooks appends argument hooks, run in order before dispatch.
func WithHooks(h ...Hook) Option { return func(b *Boundary) { b.hooks = append(b.hooks, h...) } }

// WithMode sets the run mode (default Live).
func WithMode(m Mode) Option { return func(b *Boundary) { b.mode = m } }

// WithReadonlyRetries lets a ReadOnly tool that fails with ErrTransient be dispatched up to n more
// times. No other access mode is ever retried, whatever the error says.
func WithReadonlyRetries(n int) Option { return func(b *Boundary) { b.retries = max(n, 0) } }

// WithClock sets the clock for approvals' expiry (default time.Now).
func WithClock(now func() time.Time) Option { return func(b *Boundary) { b.now = now } }

// WithApprovalTTL sets how long a granted approval stays valid when the grant names no expiry
// (default 15 minutes).
func WithApprovalTTL(d time.Duration) Option { return func(b *Boundary) { b.approvalTTL = d } }

// WithMinConfidence sets the confidence a confirmation's interpretation needs (default 0.9).
func WithMinConfidence(c float64) Option { return func(b *Boundary) { b.minConfidence = c } }
