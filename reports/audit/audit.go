// Package audit turns the runtime risk register (RISKS.md, hazards R01–R14) into checks over an
// evidence store, and metric thresholds over a code graph into findings, for `assay audit` and
// `assay report --format sarif`.
//
// Each hazard is one Rule descriptor in one registry (Registry), as metrics are. A rule re-derives
// its answer from the rawest evidence the store holds — event payloads, artifact bytes, the rows of
// the chains — by a path of its own (DESIGN.md, "Checks re-derive"): a verdict, a status or a
// check the runtime recorded is a claim the rule compares with what it derived, never the answer.
// Every evaluation reports every rule with one of three statuses: passed (the rule was evaluated
// over rows that exist and found nothing), finding, or not_assessable (with the reason: the
// evidence cannot decide it, or the selection holds nothing it applies to). Missing evidence is
// never a pass. docs/audit.md documents each rule's derivation.
package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/assay-audit/assay/evidence"
)

// SchemaVersion is the version of Result's JSON shape; a change that removes or renames a field
// bumps it.
const SchemaVersion = 1

// Severity is a rule's severity as RISKS.md assigns it.
type Severity string

// The severities of RISKS.md.
const (
	Critical Severity = "critical"
	High     Severity = "high"
)

// Status is the outcome of one rule over the selection.
type Status string

// The statuses of a rule. StatusNotAssessable is never a pass: it says the evidence could not decide.
const (
	StatusPassed        Status = "passed"
	StatusFinding       Status = "finding"
	StatusNotAssessable Status = "not_assessable"
)

// Store is what the rules read: the read-only evidence API. *evidence.Store implements it (opened
// with OpenOptions.ReadOnly, which Query requires).
type Store interface {
	Path() string
	Runs(ctx context.Context) ([]evidence.RunSummary, error)
	Events(ctx context.Context, runID string) ([]evidence.StoredEvent, error)
	ArtifactPath(digest string) string
	VerifyWith(ctx context.Context, req evidence.VerifyRequest) ([]evidence.RunVerification, error)
	Query(ctx context.Context, query string) (*evidence.QueryResult, error)
}

// Rule is one hazard of RISKS.md as a check. Adding a rule is adding one value to Registry, with
// its fixture test.
type Rule struct {
	// ID is the RISKS.md id, "R01" … "R14".
	ID string
	// Title is a short name, e.g. "Authority drift on resume".
	Title string
	// Severity is RISKS.md's.
	Severity Severity
	// Hazard is RISKS.md's hazard, in its words.
	Hazard string
	// Doc says what the rule reads and how it decides, in full sentences: its derivation.
	Doc string
	// Procedure names the query or procedure a finding of this rule came from; each finding
	// repeats it, so a reader can run it again.
	Procedure string
	// Check evaluates the rule over in. It returns the rule's outcome; an error means the store
	// could not be read (not a finding).
	Check func(ctx context.Context, in *Input) (Outcome, error)
}

// Outcome is what a rule's Check found.
type Outcome struct {
	// Evaluated counts the rows the rule was evaluated over (runs, resumes, replays, artifacts,
	// effects: Subject says which). 0 with no findings means the rule applied to nothing.
	Evaluated int
	// Subject names what Evaluated counts, e.g. "resumed runs".
	Subject string
	// NotAssessable, when set, is why the evidence cannot decide the rule.
	NotAssessable string
	// Findings are the hazards found.
	Findings []Finding
}

// Finding is one hazard found in the evidence.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// RunID is the run the finding is about; "" for a finding about the store.
	RunID string `json:"run_id"`
	// Message says what was found, naming both values where two disagree.
	Message string `json:"message"`
	// Evidence are the rows the finding rests on.
	Evidence []Row `json:"evidence"`
	// Procedure is the query or procedure that found it (Rule.Procedure).
	Procedure string `json:"procedure"`
}

// Row names one piece of evidence: a run, and within it an event (Seq), a table row, an artifact
// or a checkpoint (Digest: SHA-256 hex, 64 chars, never shortened).
type Row struct {
	RunID  string `json:"run_id,omitempty"`
	Table  string `json:"table,omitempty"` // e.g. "events", "run_artifacts", "checks"
	Seq    int64  `json:"seq,omitempty"`   // event sequence number; 0 when not an event
	Key    string `json:"key,omitempty"`   // the row's key when not a seq, e.g. a check name or artifact name
	Digest string `json:"digest,omitempty"`
	Value  string `json:"value,omitempty"` // the value read, e.g. a mode or a policy digest
}

// RuleResult is one rule's outcome in a Result.
type RuleResult struct {
	ID        string    `json:"id"`
	Title     string    `json:"title"`
	Severity  Severity  `json:"severity"`
	Status    Status    `json:"status"`
	Reason    string    `json:"reason,omitempty"` // why not_assessable, or what the rule was evaluated over
	Evaluated int       `json:"evaluated"`
	Subject   string    `json:"subject,omitempty"`
	Findings  []Finding `json:"findings"`
}

// Result is an evaluation of the rules (and of metric thresholds) over a selection.
type Result struct {
	SchemaVersion int    `json:"schema_version"`
	Store         string `json:"store,omitempty"` // the evidence store's path; "" when no store was audited
	// Runs are the runs selected: the ones named, or every run of the store.
	Runs []string `json:"runs"`
	// Rules lists every rule evaluated, in registry order (all of R01–R14 unless Options.Rules
	// narrowed them).
	Rules []RuleResult `json:"rules"`
	// Graph is the code graph database metric thresholds were checked on; "" when none.
	Graph string `json:"graph,omitempty"`
	// Thresholds are the metric thresholds checked, and Exceeded the values over them.
	Thresholds []Threshold     `json:"thresholds,omitempty"`
	Exceeded   []MetricFinding `json:"exceeded,omitempty"`
}

// Critical reports whether a critical evidence finding exists: `assay audit` exits 1 then.
func (r Result) Critical() bool {
	for _, rr := range r.Rules {
		if rr.Severity == Critical && len(rr.Findings) > 0 {
			return true
		}
	}
	return false
}

// Findings returns every evidence finding, in rule order.
func (r Result) Findings() []Finding {
	var out []Finding
	for _, rr := range r.Rules {
		out = append(out, rr.Findings...)
	}
	return out
}

// Options select what Evaluate audits.
type Options struct {
	// Runs are the runs to audit; none means every run of the store. Store-wide rules (R09) read
	// the whole store either way.
	Runs []string
	// Rules are the rule ids to evaluate; none means all of them.
	Rules []string
	// Bindings recompute the records outside the store runs are bound to (run_bindings: the
	// gateway's usage database, the effect service's receipts), passed to the store's
	// verification; nil verifies only their hashes (R11 then cannot see an edited record file).
	Bindings []evidence.BindingChecker
}

// Registry returns every rule, R01 to R14 in order. Each call returns new descriptors.
func Registry() []*Rule {
	return []*Rule{
		ruleR01(), ruleR02(), ruleR03(), ruleR04(), ruleR05(), ruleR06(), ruleR07(),
		ruleR08(), ruleR09(), ruleR10(), ruleR11(), ruleR12(), ruleR13(), ruleR14(),
	}
}

// Lookup returns the rule with id (case-insensitive, "r1" and "R01" alike).
func Lookup(id string) (*Rule, bool) {
	id = normalizeID(id)
	for _, r := range Registry() {
		if r.ID == id {
			return r, true
		}
	}
	return nil, false
}

// IDs returns the rule ids in order.
func IDs() []string {
	var ids []string
	for _, r := range Registry() {
		ids = append(ids, r.ID)
	}
	return ids
}

func normalizeID(id string) string {
	id = strings.ToUpper(strings.TrimSpace(id))
	if len(id) == 2 && id[0] == 'R' && id[1] >= '0' && id[1] <= '9' {
		id = "R0" + id[1:]
	}
	return id
}

// Evaluate runs the selected rules over the selected runs of store and returns every rule's
// outcome. Errors: ErrUnknownRule (bad input) for an id not in the registry; evidence.ErrNoRun
// (wrapped) for a named run the store does not hold; the store's errors when it cannot be read.
func Evaluate(ctx context.Context, store Store, opts Options) (Result, error) {
	rules, err := selectRules(opts.Rules)
	if err != nil {
		return Result{}, err
	}
	in, err := newInput(ctx, store, opts.Runs, opts.Bindings)
	if err != nil {
		return Result{}, err
	}
	res := Result{SchemaVersion: SchemaVersion, Store: store.Path(), Runs: in.selected(), Rules: []RuleResult{}}
	for _, r := range rules {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		out, err := r.Check(ctx, in)
		if err != nil {
			return Result{}, fmt.Errorf("audit: rule %s: %w", r.ID, err)
		}
		res.Rules = append(res.Rules, r.result(out))
	}
	return res, nil
}

// result turns a rule's outcome into its RuleResult: findings decide finding; a reason or nothing
// evaluated decides not_assessable; only rows evaluated without a finding are passed.
func (r *Rule) result(out Outcome) RuleResult {
	rr := RuleResult{ID: r.ID, Title: r.Title, Severity: r.Severity, Evaluated: out.Evaluated, Subject: out.Subject, Findings: []Finding{}}
	for _, f := range out.Findings {
		f.Rule, f.Severity, f.Procedure = r.ID, r.Severity, r.Procedure
		if f.Evidence == nil {
			f.Evidence = []Row{}
		}
		rr.Findings = append(rr.Findings, f)
	}
	switch {
	case len(rr.Findings) > 0:
		rr.Status, rr.Reason = StatusFinding, fmt.Sprintf("%d findings over %d %s", len(rr.Findings), out.Evaluated, out.Subject)
	case out.NotAssessable != "":
		rr.Status, rr.Reason = StatusNotAssessable, out.NotAssessable
	case out.Evaluated == 0:
		rr.Status, rr.Reason = StatusNotAssessable, "no "+out.Subject+" in the selection"
	default:
		rr.Status, rr.Reason = StatusPassed, fmt.Sprintf("evaluated over %d %s", out.Evaluated, out.Subject)
	}
	return rr
}

// ErrUnknownRule is returned for a rule id not in the registry.
var ErrUnknownRule = errors.New("unknown rule")

func selectRules(ids []string) ([]*Rule, error) {
	all := Registry()
	if len(ids) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		n := normalizeID(id)
		if !slices.ContainsFunc(all, func(r *Rule) bool { return r.ID == n }) {
			return nil, fmt.Errorf("%w %q (rules: %s)", ErrUnknownRule, id, strings.Join(IDs(), ", "))
		}
		want[n] = true
	}
	return slices.DeleteFunc(all, func(r *Rule) bool { return !want[r.ID] }), nil
}
